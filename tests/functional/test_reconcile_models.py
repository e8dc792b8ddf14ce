"""reconcile_models and ``accelops models`` in process, against the Kubernetes API
stand-in and Cloud Storage over sockets.

Here nothing runs the pods: each test writes the Deployment's and pods' status the
way the Deployment controller and the kubelet would, then lets reconcile_models
judge it. (The e2e tests run real Triton processes under the cluster simulation.)
"""

from __future__ import annotations

from typing import Any

import functions_framework
import pytest

from sandbox.kubeapi import KubeApiServer
from shared.cli import main as cli
from shared.kube import DEPLOYMENTS
from shared.serving.ledger import load_ledger
from shared.serving.reconcile import reconcile_models
from tests.functional.conftest import SERVING_NAMESPACE as NAMESPACE
from tests.serving_fixtures import (
    REPO,
    TOY_CONFIG,
    TOY_MODEL,
    notification_envelope,
    upload_version,
)

FILES = {"config.pbtxt": TOY_CONFIG, "model.py": TOY_MODEL}


@pytest.fixture(scope="module")
def app() -> Any:
    return functions_framework.create_app("deploy_model", str(REPO / "functions" / "main.py"),
                                          "cloudevent").test_client()


def deploy(app: Any, env: dict[str, Any], version: str) -> str:
    upload = upload_version(env["bucket"], "toy-lm", version, FILES)
    envelope = notification_envelope(upload.bucket, upload.name, upload.generation)
    assert app.post("/", json=envelope).status_code == 200
    ledger = load_ledger(env["kube"], NAMESPACE, "toy-lm")
    return ledger.rollouts[-1].id


def release_of(env: dict[str, Any]) -> str:
    deployment = env["kube"].get(DEPLOYMENTS, "toy-lm", NAMESPACE)
    return str(deployment["spec"]["template"]["metadata"]["annotations"]["accelops.dev/release"])


def controller_reports_ready(api: KubeApiServer) -> None:
    """What the Deployment controller writes once every replica runs the template."""
    deployment = api.store.get("apps", "deployments", "toy-lm", NAMESPACE)
    replicas = deployment["spec"].get("replicas", 1)
    deployment["status"] = {
        "observedGeneration": deployment["metadata"]["generation"], "replicas": replicas,
        "updatedReplicas": replicas, "readyReplicas": replicas,
        "availableReplicas": replicas,
        "conditions": [{"type": "Available", "status": "True"},
                       {"type": "Progressing", "status": "True",
                        "reason": "NewReplicaSetAvailable"}]}
    api.store.update_status("apps", "deployments", deployment, namespace=NAMESPACE)


def crash_looping_pod(api: KubeApiServer, release: str) -> None:
    """A pod of ``release`` whose Triton exits: the model did not load."""
    api.store.create("", "pods", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"toy-lm-{release}-x1", "namespace": NAMESPACE,
                     "labels": {"app.kubernetes.io/name": "triton",
                                "app.kubernetes.io/instance": "toy-lm",
                                "accelops.dev/release": release}},
        "spec": {"containers": [{"name": "triton", "image": "tritonserver"}]},
        "status": {"phase": "Running", "containerStatuses": [{
            "name": "triton", "ready": False, "restartCount": 2,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {
                "exitCode": 1, "reason": "Error",
                "message": "failed to load 'toy-lm' version 1: ModuleNotFoundError"}}}]},
    }, namespace=NAMESPACE)


def test_a_rollout_that_serves_becomes_current(app, serving_env, kube_api):
    v1 = deploy(app, serving_env, "v1")
    reconcile_models()
    assert load_ledger(serving_env["kube"], NAMESPACE, "toy-lm").find(v1).state == "rolling-out"

    controller_reports_ready(kube_api)
    reconcile_models()

    ledger = load_ledger(serving_env["kube"], NAMESPACE, "toy-lm")
    assert (ledger.find(v1).state, ledger.current) == ("ready", v1)


def test_a_version_that_fails_to_load_is_rolled_back_to_the_previous_one(
        app, serving_env, kube_api, capsys):
    v1 = deploy(app, serving_env, "v1")
    controller_reports_ready(kube_api)
    reconcile_models()
    v2 = deploy(app, serving_env, "v2")
    assert release_of(serving_env) == v2

    crash_looping_pod(kube_api, v2)
    reconcile_models()

    ledger = load_ledger(serving_env["kube"], NAMESPACE, "toy-lm")
    assert ledger.find(v2).state == "rolling-back"
    assert "ModuleNotFoundError" in (ledger.find(v2).reason or "")
    assert release_of(serving_env) == v1  # the Deployment points back at v1's snapshot
    controller_reports_ready(kube_api)
    reconcile_models()

    ledger = load_ledger(serving_env["kube"], NAMESPACE, "toy-lm")
    assert (ledger.find(v2).state, ledger.current) == ("rolled-back", v1)
    capsys.readouterr()
    assert cli(["models", "status", "toy-lm"]) == 0
    out = capsys.readouterr().out
    assert "current     v1" in out
    assert "v2 rolled-back: pod toy-lm-" in out


def test_a_first_version_that_fails_has_nothing_to_roll_back_to(app, serving_env, kube_api):
    v1 = deploy(app, serving_env, "v1")
    crash_looping_pod(kube_api, v1)

    reconcile_models()

    ledger = load_ledger(serving_env["kube"], NAMESPACE, "toy-lm")
    assert (ledger.find(v1).state, ledger.current) == ("failed", None)


def test_a_newer_upload_supersedes_a_rollout_in_flight(app, serving_env):
    v1 = deploy(app, serving_env, "v1")
    v2 = deploy(app, serving_env, "v2")

    ledger = load_ledger(serving_env["kube"], NAMESPACE, "toy-lm")
    assert (ledger.find(v1).state, ledger.find(v2).state) == ("superseded", "rolling-out")
    assert release_of(serving_env) == v2


def test_models_rollback_serves_the_previous_version_again(app, serving_env, kube_api,
                                                            capsys):
    v1 = deploy(app, serving_env, "v1")
    controller_reports_ready(kube_api)
    reconcile_models()
    deploy(app, serving_env, "v2")
    controller_reports_ready(kube_api)
    reconcile_models()
    capsys.readouterr()

    assert cli(["models", "rollback", "toy-lm"]) == 0

    assert "rolling back to version v1" in capsys.readouterr().out
    assert release_of(serving_env).startswith(v1)
    controller_reports_ready(kube_api)
    reconcile_models()
    ledger = load_ledger(serving_env["kube"], NAMESPACE, "toy-lm")
    assert ledger.find(ledger.current).version == "v1"
    assert cli(["models", "list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("toy-lm"))
    assert row.split()[3:5] == ["v1", "v2"]


def test_rolling_back_without_a_previous_version_is_refused(app, serving_env, capsys):
    deploy(app, serving_env, "v1")

    assert cli(["models", "rollback", "toy-lm"]) == 1

    assert "no previous version" in capsys.readouterr().err


def test_a_rollout_interrupted_before_it_started_waits_for_its_redelivery(serving_env):
    import time

    from shared.serving.ledger import Ledger, Rollout, save_ledger

    ledger = Ledger(model="toy-lm", server="triton", deployment="toy-lm")
    ledger.record(Rollout(id="r-1", key="gs://b/models/triton/toy-lm/v1/deploy.yaml#1",
                          version="v1", state="starting", generation=1,
                          started=time.time()), history=20)
    save_ledger(serving_env["kube"], NAMESPACE, ledger)

    reconcile_models()
    assert load_ledger(serving_env["kube"], NAMESPACE, "toy-lm").find("r-1").state == \
        "starting"  # its event comes back and resumes it

    reconcile_models(now=time.time() + 3600)
    stuck = load_ledger(serving_env["kube"], NAMESPACE, "toy-lm").find("r-1")
    assert stuck.state == "failed"
    assert "never started" in (stuck.reason or "")
