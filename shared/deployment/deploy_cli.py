"""``accelops deploy up|down``: gather what the plan needs (paths, the commit), print
the plan or run it. (Their arguments are parsed in ``shared/deployment/cli.py``, which
names these functions for the command line to import when one of them runs.)

The order and the commands are ``shared/deployment/up.py``'s; running them is
``shared/deployment/runner.py``'s. Progress is kept in ``--work-dir`` (default
``.deploy/<project>/`` in the repository): ``up.json``/``down.json`` (completed
steps), ``kubeconfig`` (this deployment's cluster credentials) and ``overlay/`` (the
rendered manifests). The sandbox adds ``deploy up --sandbox`` and runs its plan with
:func:`run_plan` (``sandbox/commands.py``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
from pathlib import Path

from shared.deployment.cli import repo_root
from shared.deployment.steps import Plan
from shared.deployment.up import Kubernetes, Site
from shared.errors import ConfigError

__all__ = ["cmd_down", "cmd_up", "run_plan", "shown"]

TOOLS = ("terraform", "gcloud", "kubectl")


def shown(path: Path, root: Path) -> str:
    """As the steps print it: relative to the repository root (where they run) when
    inside it."""
    path = path.resolve()
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _revision(root: Path) -> str:
    """The commit the images are built from (the load generator records it)."""
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,  # noqa: S607
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _site(args: argparse.Namespace, root: Path) -> Site:
    from shared.config import load_config
    if not args.config or not args.project:
        # Said when the command has --sandbox (the sandbox adds it to up).
        raise ConfigError(f"deploy {args.deploy_command} needs --config and --project"
                          + (" (or --sandbox STATE_DIR)" if hasattr(args, "sandbox") else ""))
    config = Path(args.config).resolve()
    if not config.is_file():
        raise ConfigError(f"no team config at {args.config}")
    load_config(str(config))  # a config the functions would refuse stops here
    terraform_dir = Path(args.terraform_dir or root / "terraform" / "envs" / "example").resolve()
    if not (terraform_dir / "main.tf").is_file():
        raise ConfigError(f"{terraform_dir} holds no Terraform configuration (main.tf)")
    work = Path(args.work_dir or root / ".deploy" / args.project).resolve()
    return Site(
        project=args.project, config=shown(config, root),
        # Terraform reads the file relative to its own directory (-chdir).
        terraform_config=os.path.relpath(config, terraform_dir),
        terraform_dir=shown(terraform_dir, root), work_dir=shown(work, root),
        state_bucket=args.state_bucket or f"{args.project}-tfstate",
        state_location=args.state_location,
        kubernetes=Kubernetes(shown(work / "kubeconfig", root), shown(work / "overlay", root),
                              controllers_timeout_seconds=args.controllers_timeout),
        builder=getattr(args, "builder", "cloudbuild"),
        revision=_revision(root), auto_approve=args.auto_approve)


def _preflight(site: Site, tools: tuple[str, ...]) -> None:
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        raise ConfigError(f"not on PATH: {', '.join(missing)} (deploy runs terraform, "
                          "gcloud and kubectl; see docs/operations/deploy.md)")
    tfvars = repo_root() / site.terraform_dir / "terraform.tfvars"
    if not tfvars.is_file():
        raise ConfigError(f"no {tfvars}: copy terraform.tfvars.example next to it and set "
                          "the cluster, image_tags and who may call the services")


def _rerun(args: argparse.Namespace) -> str:
    """The command that continues this one (said when a step fails)."""
    words = [f"accelops deploy {args.deploy_command}", f"--config {args.config}",
             f"--project {args.project}"]
    for flag in ("state_bucket", "terraform_dir", "work_dir"):
        if getattr(args, flag):
            words.append(f"--{flag.replace('_', '-')} {getattr(args, flag)}")
    if getattr(args, "builder", "cloudbuild") != "cloudbuild":
        words.append(f"--builder {args.builder}")
    words += ["--auto-approve"] if args.auto_approve else []
    words += ["--delete-data"] if getattr(args, "delete_data", False) else []
    return " ".join(words)


def run_plan(args: argparse.Namespace, plan: Plan, work: Path, other: str,
             rerun: str | None = None) -> int:
    """Print the plan (``--plan``) or run it, keeping progress in ``work``; ``rerun``:
    the command that continues it (default: this one's options)."""
    from shared.deployment.runner import Runner
    from shared.deployment.steps import script

    if args.plan:
        print(script(plan), end="")
        return 0
    state = work / f"{plan.command}.json"
    Runner(repo_root(), state, rerun or _rerun(args)).run(plan, from_step=args.from_step,
                                             restart=args.restart)
    # A finished up makes an earlier down's progress meaningless, and the other way round.
    (work / f"{other}.json").unlink(missing_ok=True)
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    from shared.deployment.up import up_plan

    root = repo_root()
    site = _site(args, root)
    if not args.plan:
        _preflight(site, (*TOOLS, *(("docker",) if site.builder == "docker" else ())))
    return run_plan(args, up_plan(site), root / site.work_dir, "down")


def cmd_down(args: argparse.Namespace) -> int:
    from shared.config import load_config
    from shared.deployment.down import down_plan

    root = repo_root()
    site = _site(args, root)
    teams = load_config(str(Path(args.config).resolve())).teams.values()
    plan = down_plan(site, (team.namespace for team in teams), controllers=args.controllers)
    if not args.plan:
        if not args.delete_data:
            raise ConfigError("deploy down deletes the metrics tables and the buckets (team "
                              "config, function source, models with the releases kept "
                              "there, the Sax cell's state) with everything in them: pass "
                              "--delete-data to go on (--plan shows every step)")
        _preflight(site, TOOLS)
    return run_plan(args, plan, root / site.work_dir, "up")
