"""`accelops deploy up|down` from the command line: the Google side of a first
deployment in order, stopping at a failure and resuming there.

`gcloud` and `terraform` are small stand-in scripts at the process boundary (first on
PATH): they record their arguments and answer as the real tools do for the calls the
plan makes, because nothing here can reach Google Cloud or download the google
provider. Everything else is real: the plan, the runner, the state file. The Kubernetes
half runs for real against the sandbox in tests/e2e/test_deploy_up_sandbox.py.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from shared.cli import main
from shared.deployment import system

PROJECT = "acme-ml"
CONFIG = Path(__file__).resolve().parents[2] / "terraform" / "envs" / "example" / "accelops.yaml"
REPOSITORY = "us-central1-docker.pkg.dev/acme-ml/accelops"
OUTPUTS = {
    "image_repository": REPOSITORY,
    "images": {s.name: f"{REPOSITORY}/{s.name}:0.1.0" for s in system.SERVICES},
    "buckets": {"config": "acme-ml-accelops-config",
                "function_source": "acme-ml-accelops-function-source",
                "models": "acme-ml-accelops-models", "sax": "acme-ml-accelops-sax"},
}

# Answers as gcloud does for the calls the plan makes; state in files under FAKE_DIR.
GCLOUD = r'''
import os, pathlib, sys
home = pathlib.Path(os.environ["FAKE_DIR"])
args = sys.argv[1:]
with open(home / "log", "a") as log:
    log.write("gcloud " + " ".join(args) + "\n")
known = home / "exists"
known.mkdir(exist_ok=True)
def mark(name): (known / name.replace("/", "_")).touch()
def has(name): return (known / name.replace("/", "_")).exists()
if args[:3] == ["storage", "buckets", "describe"]:
    sys.exit(0 if has(args[3]) else 1)
if args[:3] == ["storage", "buckets", "create"]:
    mark(args[3]); print("Creating " + args[3] + "..."); sys.exit(0)
if args[:3] == ["storage", "buckets", "update"]:
    sys.exit(0)
if args[:4] == ["artifacts", "docker", "images", "describe"]:
    if has(args[4]): sys.exit(0)
    print("ERROR: (gcloud.artifacts.docker.images.describe) Image not found", file=sys.stderr)
    sys.exit(1)
if args[:2] == ["builds", "submit"]:
    subs = dict(kv.split("=", 1) for kv in args[args.index("--substitutions") + 1].split(","))
    mark(subs["_IMAGE"]); print("DONE"); sys.exit(0)
if args[:2] == ["storage", "cp"]:
    source = args[-2]
    sys.exit(0 if pathlib.Path(source).is_file() else 1)
if args[:3] == ["container", "clusters", "get-credentials"]:
    print("ERROR: (gcloud.container.clusters.get-credentials) ResponseError: code=404, "
          "message=Not found: projects/acme-ml/locations/us-central1-a/clusters/"
          + args[3] + ".", file=sys.stderr)
    sys.exit(1)
print("unexpected gcloud call", args, file=sys.stderr)
sys.exit(2)
'''

TERRAFORM = r'''
import json, os, pathlib, sys
home = pathlib.Path(os.environ["FAKE_DIR"])
args = sys.argv[1:]
with open(home / "log", "a") as log:
    log.write("terraform " + " ".join(args) + "\n")
if "output" in args:
    print((home / "outputs.json").read_text())
    sys.exit(0)
print("Apply complete! Resources: 0 added, 0 changed, 0 destroyed.")
'''


def _tool(bin_dir: Path, name: str, source: str) -> None:
    path = bin_dir / name
    # -S: no site-packages to scan; the stand-ins need only the standard library.
    path.write_text(f"#!{sys.executable} -S\n{source}")
    path.chmod(0o755)


@pytest.fixture
def google(tmp_path, monkeypatch) -> Path:
    """Stand-in gcloud and terraform first on PATH; their record in FAKE_DIR/log."""
    home = tmp_path / "google"
    bin_dir = home / "bin"
    bin_dir.mkdir(parents=True)
    _tool(bin_dir, "gcloud", GCLOUD)
    _tool(bin_dir, "terraform", TERRAFORM)
    outputs = {**OUTPUTS, "cluster": {"name": "tpu-cluster", "location": "us-central1-a"}}
    (home / "outputs.json").write_text(json.dumps(
        {name: {"value": value, "type": "whatever", "sensitive": False}
         for name, value in outputs.items()}))
    monkeypatch.setenv("FAKE_DIR", str(home))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return home


@pytest.fixture
def terraform_dir(tmp_path) -> Path:
    directory = tmp_path / "envs" / "acme"
    directory.mkdir(parents=True)
    (directory / "main.tf").write_text("# applied by the stand-in terraform\n")
    (directory / "terraform.tfvars").write_text('project_id = "acme-ml"\n')
    return directory


def deploy(tmp_path: Path, terraform_dir: Path, *extra: str) -> int:
    return main(["deploy", "up", "--config", str(CONFIG), "--project", PROJECT,
                 "--terraform-dir", str(terraform_dir), "--work-dir", str(tmp_path / "work"),
                 "--auto-approve", *extra])


def calls(google: Path) -> list[str]:
    return (google / "log").read_text().splitlines()


def test_a_first_deployment_runs_the_google_side_in_order_and_stops_where_it_fails(
        tmp_path, google, terraform_dir, capsys):
    assert deploy(tmp_path, terraform_dir) == 1

    tf = f"terraform -chdir={terraform_dir}"
    made = [c for c in calls(google) if "output -json" not in c]
    images = [f"{REPOSITORY}/{s.name}:0.1.0" for s in system.SERVICES]
    assert made[:5] == [
        f"gcloud storage buckets describe gs://{PROJECT}-tfstate --project={PROJECT}",
        f"gcloud storage buckets create gs://{PROJECT}-tfstate --project={PROJECT} "
        "--location=US --uniform-bucket-level-access --public-access-prevention",
        f"gcloud storage buckets update gs://{PROJECT}-tfstate --versioning",
        f"{tf} init -input=false -backend-config=bucket={PROJECT}-tfstate",
        f"{tf} apply -input=false -auto-approve -target=module.project_services "
        "-target=module.artifact_registry -target=module.buckets "
        f"-var=project_id={PROJECT} -var=config_file={os.path.relpath(CONFIG, terraform_dir)}",
    ]
    for index, (service, image) in enumerate(zip(system.SERVICES, images, strict=True)):
        describe, build = made[5 + 2 * index], made[6 + 2 * index]
        assert describe == f"gcloud artifacts docker images describe {image}"
        assert build.startswith(f"gcloud builds submit --project={PROJECT} "
                                "--config=services/cloudbuild.yaml --substitutions "
                                f"_SERVICE={service.name},_REVISION=")
        assert build.endswith(f",_IMAGE={image} .")
    rest = made[5 + 2 * len(images):]
    assert rest[0].startswith(f"{tf} apply -input=false -auto-approve -var=project_id=")
    assert rest[1] == ("gcloud container clusters get-credentials tpu-cluster --location "
                       f"us-central1-a --project={PROJECT}")
    assert len(rest) == 2

    out, err = capsys.readouterr()
    assert "[9/17] credentials:" in out
    assert "Not found: projects/acme-ml" in out
    assert "deploy up stopped at step 9/17 credentials: it exited 1." in err
    assert "again: it resumes at credentials" in err


def test_running_it_again_resumes_at_the_failed_step(tmp_path, google, terraform_dir,
                                                     capsys):
    deploy(tmp_path, terraform_dir)
    before = len(calls(google))
    assert deploy(tmp_path, terraform_dir) == 1
    again = [c for c in calls(google)[before:] if "output -json" not in c]
    assert again == ["gcloud container clusters get-credentials tpu-cluster --location "
                     f"us-central1-a --project={PROJECT}"]
    assert "resuming at step 9/17 credentials" in capsys.readouterr().out


def test_images_already_pushed_are_not_built_again(tmp_path, google, terraform_dir):
    deploy(tmp_path, terraform_dir, "--restart")
    deploy(tmp_path, terraform_dir, "--restart")
    builds = [c for c in calls(google) if c.startswith("gcloud builds submit")]
    assert len(builds) == len(system.SERVICES)


def test_the_plan_is_printed_without_running_anything(tmp_path, google, terraform_dir,
                                                      capsys):
    assert deploy(tmp_path, terraform_dir, "--plan") == 0
    out = capsys.readouterr().out
    assert out.startswith("# accelops deploy up: 17 steps (project acme-ml, config ")
    assert "\n# [17/17] doctor: check the deployment from outside\n" in out
    assert not (google / "log").exists()


def test_down_asks_for_delete_data_before_it_starts(tmp_path, google, terraform_dir,
                                                    capsys):
    assert main(["deploy", "down", "--config", str(CONFIG), "--project", PROJECT,
                 "--terraform-dir", str(terraform_dir),
                 "--work-dir", str(tmp_path / "work")]) == 1
    assert "pass --delete-data to go on" in capsys.readouterr().err
    assert not (google / "log").exists()


def test_up_needs_a_filled_in_tfvars_next_to_the_terraform(tmp_path, google, terraform_dir,
                                                         capsys):
    (terraform_dir / "terraform.tfvars").unlink()
    assert deploy(tmp_path, terraform_dir) == 1
    assert "terraform.tfvars: copy terraform.tfvars.example" in capsys.readouterr().err
