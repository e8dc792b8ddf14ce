"""``accelops deploy generate`` and ``accelops manifests render``; the arguments of
``accelops doctor`` and ``accelops deploy up|down`` too, whose implementations
(``doctor``, ``deploy_cli``) the command line imports only when one of them runs.

Kept apart from ``shared/cli.py`` so the everyday commands do not import the
deployment definition.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["add_commands", "repo_root", "write_files"]


def repo_root() -> Path:
    """The repository this package runs from (terraform/ and manifests/ live there)."""
    return Path(__file__).resolve().parents[2]


def write_files(root: Path, files: dict[str, str], *, check: bool) -> list[str]:
    """Write ``files`` under ``root`` (or, with check, only compare); returns the paths
    that differ from what is on disk. Files under root that are not in ``files`` are
    stale too, and removed when writing."""
    stale = [name for name, text in files.items()
             if not (root / name).is_file() or (root / name).read_text("utf-8") != text]
    on_disk = (str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    extra = sorted(name for name in on_disk if name not in files)
    if check:
        return stale + extra
    for name in stale:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(files[name], "utf-8")
    for name in extra:
        (root / name).unlink()
    return stale + extra


def generate(root: Path, *, check: bool) -> list[str]:
    """Write (or, with check, compare) every generated file under the repository
    ``root``; returns the paths that were (or would be) changed."""
    from shared.deployment.manifests import BASE_DIR, base_files
    from shared.deployment.readme import BLOCKS, replace_block
    from shared.deployment.terraform import GENERATED_DIR, generated_files

    changed: list[str] = []
    for directory, files in ((GENERATED_DIR, generated_files()), (BASE_DIR, base_files())):
        changed += [f"{directory}/{name}"
                    for name in write_files(root / directory, files, check=check)]
    for block in BLOCKS:
        page = root / block.page
        if page.is_file():
            text = page.read_text("utf-8")
            if (fresh := replace_block(text, block)) != text:
                changed.append(block.page)
                if not check:
                    page.write_text(fresh, "utf-8")
    return changed


def stale_generated_files(root: Path) -> list[str]:
    """The generated files under ``root`` that are stale (empty: all current)."""
    return generate(root, check=True)


def cmd_generate(args: argparse.Namespace) -> int:
    changed = generate(Path(args.root) if args.root else repo_root(), check=args.check)
    if args.check:
        if changed:
            print("stale (run `accelops deploy generate`):\n  " + "\n  ".join(changed),
                  file=sys.stderr)
            return 1
        print("generated files are current")
        return 0
    print("\n".join(f"wrote {name}" for name in changed) or "generated files were current")
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    from shared.config import load_config
    from shared.deployment.locust import LocustSite
    from shared.deployment.manifests import overlay_files
    from shared.deployment.serving import (
        DEFAULT_ADMIN_IMAGE,
        DEFAULT_PROXY_IMAGE,
        SaxmlSite,
        sax_bucket_name,
    )

    config = load_config(args.config)
    out = Path(args.out)
    site = SaxmlSite(args.sax_bucket or sax_bucket_name(args.project),
                     args.saxml_admin_image or DEFAULT_ADMIN_IMAGE,
                     args.saxml_proxy_image or DEFAULT_PROXY_IMAGE)
    locust = (LocustSite(args.locust_image, args.locust_server, args.locust_model)
              if args.locust_image else None)
    written = write_files(out, overlay_files(config, args.project, out, repo_root(), site,
                                             locust), check=False)
    print("\n".join(f"wrote {out / name}" for name in written) or f"{out} was current")
    print(f"apply with: kubectl apply --server-side -k {out}")
    return 0


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    deploy = sub.add_parser("deploy", help="the deployment definition").add_subparsers(
        dest="deploy_command", required=True, metavar="ACTION")
    generate = deploy.add_parser(
        "generate", help="write terraform/generated and manifests/base from "
                         "shared/deployment")
    generate.add_argument("--check", action="store_true",
                          help="write nothing; exit 1 when a generated file is stale")
    generate.add_argument("--root", help="repository root (default: this checkout)")
    generate.set_defaults(func=cmd_generate)
    _add_deploy_commands(deploy)

    manifests = sub.add_parser("manifests", help="Kubernetes manifests").add_subparsers(
        dest="manifests_command", required=True, metavar="ACTION")
    render = manifests.add_parser(
        "render", help="write a kustomize overlay (team namespaces, Kueue queues, the "
                       "serving namespace and Sax cell, RBAC bindings) for a config and "
                       "project")
    render.add_argument("--config", required=True, help="the team config YAML")
    render.add_argument("--project", required=True,
                        help="the Google Cloud project of the functions' service accounts")
    render.add_argument("--out", required=True, help="overlay directory to write")
    render.add_argument("--sax-bucket",
                        help="bucket of the Sax cell's state (Terraform output "
                             "model_serving.sax_bucket; default: PROJECT-accelops-sax)")
    render.add_argument("--saxml-admin-image",
                        help="Sax admin server image (default: sax-admin-server of "
                             "shared/deployment/serving.py)")
    render.add_argument("--saxml-proxy-image",
                        help="Saxml HTTP proxy image (default: sax-http of "
                             "shared/deployment/serving.py)")
    render.add_argument("--locust-image",
                        help="the load generator's image (Terraform output images.loadgen): "
                             "adds its Locust master and worker Deployments (locust.yaml)")
    render.add_argument("--locust-server", choices=["triton", "saxml"], default="triton",
                        help="with --locust-image: the protocol of the tests' target "
                             "(default: triton; a test may name another)")
    render.add_argument("--locust-model",
                        help="with --locust-image: the model a test targets unless it names "
                             "one (default: none, each test names it)")
    render.set_defaults(func=cmd_render)

    doctor = sub.add_parser(
        "doctor", help="check a deployment from outside and print each problem with its fix",
        description="Checks the deployment the config and project name, as built from the "
                    "deployment definition: topics and push subscriptions, each team's "
                    "namespace and Kueue queues, the serving namespace, each function's "
                    "Kubernetes permissions (by SubjectAccessReview) and the BigQuery "
                    "tables. Prints each problem with its fix; exits 1 when there is one.")
    doctor.add_argument("--config", help="team config YAML (default: $ACCELOPS_CONFIG)")
    doctor.add_argument("--project", help="default: $ACCELOPS_PROJECT")
    doctor.set_defaults(func="shared.deployment.doctor:main")


def _deploy_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="the team config YAML (uploaded as ACCELOPS_CONFIG)")
    parser.add_argument("--project", help="the Google Cloud project")
    parser.add_argument("--plan", action="store_true",
                        help="print the steps as shell commands; run nothing")
    parser.add_argument("--from", dest="from_step", metavar="STEP",
                        help="start at this step (default: after the last completed one)")
    parser.add_argument("--restart", action="store_true",
                        help="forget the recorded progress; start at the first step")
    parser.add_argument("--terraform-dir",
                        help="the Terraform configuration (default: terraform/envs/example)")
    parser.add_argument("--work-dir", help="progress, kubeconfig and overlay "
                                           "(default: .deploy/PROJECT)")
    parser.add_argument("--state-bucket",
                        help="bucket of Terraform's state (default: PROJECT-tfstate; "
                             "created by up when missing)")
    parser.add_argument("--state-location", default="US",
                        help="location of the state bucket when up creates it (default: US)")
    parser.add_argument("--auto-approve", action="store_true",
                        help="apply and destroy without Terraform asking first")
    parser.add_argument("--controllers-timeout", type=int, default=300, metavar="SECONDS",
                        help="how long to wait for each controller to be Available")


def _add_deploy_commands(deploy: argparse._SubParsersAction[argparse.ArgumentParser],
                         ) -> None:
    up = deploy.add_parser(
        "up", help="deploy to Google Cloud in order: Terraform's state and foundation, "
                   "images, the rest (the functions built from this checkout), "
                   "controllers, overlay, doctor")
    _deploy_common(up)
    up.add_argument("--builder", choices=["cloudbuild", "docker"], default="cloudbuild",
                    help="build the service images with Cloud Build (default) or a local "
                         "docker")
    up.set_defaults(func="shared.deployment.deploy_cli:cmd_up")

    down = deploy.add_parser(
        "down", help="remove a deployment: JobSets and their TPU pools, the overlay, the "
                     "data, then terraform destroy")
    _deploy_common(down)
    down.add_argument("--delete-data", action="store_true",
                      help="confirm that the metrics tables and buckets go with their data")
    down.add_argument("--controllers", action="store_true",
                      help="also delete the Kueue and JobSet controllers and their CRDs")
    down.set_defaults(func="shared.deployment.deploy_cli:cmd_down")
