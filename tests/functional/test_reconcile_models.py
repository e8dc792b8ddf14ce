"""reconcile_models and ``accelops models`` in process, against the Kubernetes API
stand-in and Cloud Storage over sockets.

Here nothing runs the pods: each test writes the Deployment's and pods' status the
way the Deployment controller and the kubelet would, then lets reconcile_models
judge it. (The e2e tests run real Triton processes under the cluster simulation.)
"""

from __future__ import annotations

import time
from typing import Any

import functions_framework
import pytest

from sandbox.kubeapi import KubeApiServer
from shared.cli import main as cli
from shared.config import ServingConfig
from shared.kube import DEPLOYMENTS, HTTPROUTES, SERVICES
from shared.serving.gateway import route_weights
from shared.serving.ledger import load_ledger
from shared.serving.reconcile import reconcile_models
from shared.serving.triton import release_name
from tests.functional.conftest import SERVING_NAMESPACE as NAMESPACE
from tests.serving_fixtures import (
    REPO,
    TOY_CONFIG,
    TOY_MODEL,
    manifest_for,
    notification_envelope,
    upload_version,
)

FILES = {"config.pbtxt": TOY_CONFIG, "model.py": TOY_MODEL}


@pytest.fixture(scope="module")
def app() -> Any:
    return functions_framework.create_app("deploy_model", str(REPO / "functions" / "main.py"),
                                          "cloudevent").test_client()


def deploy(app: Any, env: dict[str, Any], version: str,
           manifest: dict[str, Any] | None = None) -> str:
    upload = upload_version(env["bucket"], "toy-lm", version, FILES, manifest=manifest)
    envelope = notification_envelope(upload.bucket, upload.name, upload.generation)
    assert app.post("/", json=envelope).status_code == 200
    ledger = load_ledger(env["kube"], NAMESPACE, "toy-lm")
    return ledger.rollouts[-1].id


def deployed(env: dict[str, Any]) -> dict[str, str]:
    """The release each Triton Deployment of toy-lm serves, by Deployment name."""
    return {d["metadata"]["name"]:
            d["spec"]["template"]["metadata"]["annotations"]["accelops.dev/release"]
            for d in env["kube"].list(DEPLOYMENTS, NAMESPACE,
                                      label_selector="app.kubernetes.io/instance=toy-lm")}


def routed(env: dict[str, Any]) -> dict[str, int]:
    """The weight the model's HTTPRoute gives each release's Service."""
    route = env["kube"].find(HTTPROUTES, "toy-lm", NAMESPACE)
    return route_weights(route) if route else {}


def controller_reports_ready(api: KubeApiServer, release: str) -> None:
    """What the Deployment controller writes once every replica runs the template."""
    deployment = api.store.get("apps", "deployments", release_name("toy-lm", release),
                               NAMESPACE)
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


def serving(app: Any, env: dict[str, Any], api: KubeApiServer, version: str,
            manifest: dict[str, Any] | None = None) -> str:
    """Deploy ``version`` and let it become ready."""
    rid = deploy(app, env, version, manifest)
    controller_reports_ready(api, rid)
    reconcile_models()
    return rid


def test_a_first_rollout_that_serves_takes_every_request(app, serving_env, kube_api):
    v1 = deploy(app, serving_env, "v1")
    reconcile_models()
    assert load_ledger(serving_env["kube"], NAMESPACE, "toy-lm").find(v1).state == "rolling-out"
    assert routed(serving_env) == {}  # nothing is routed to a release that is not ready

    controller_reports_ready(kube_api, v1)
    reconcile_models()

    ledger = load_ledger(serving_env["kube"], NAMESPACE, "toy-lm")
    assert (ledger.find(v1).state, ledger.current) == ("ready", v1)
    assert ledger.find(v1).canary is None  # nothing served before it: no canary
    assert routed(serving_env) == {release_name("toy-lm", v1): 100}
    assert deployed(serving_env) == {release_name("toy-lm", v1): v1}


def test_a_version_that_fails_to_load_is_rolled_back_without_ever_taking_requests(
        app, serving_env, kube_api, capsys):
    v1 = serving(app, serving_env, kube_api, "v1")
    v2 = deploy(app, serving_env, "v2")
    assert deployed(serving_env) == {release_name("toy-lm", v1): v1,
                                     release_name("toy-lm", v2): v2}

    crash_looping_pod(kube_api, v2)
    reconcile_models()

    ledger = load_ledger(serving_env["kube"], NAMESPACE, "toy-lm")
    assert (ledger.find(v2).state, ledger.current) == ("rolled-back", v1)
    assert "ModuleNotFoundError" in (ledger.find(v2).reason or "")
    assert routed(serving_env) == {release_name("toy-lm", v1): 100}
    assert [r.release for r in ledger.retiring] == [v2]
    # Its objects go once load balancers have caught up.
    reconcile_models(now=time.time() + ServingConfig().retire_after_seconds + 1)
    assert deployed(serving_env) == {release_name("toy-lm", v1): v1}
    assert serving_env["kube"].find(SERVICES, release_name("toy-lm", v2), NAMESPACE) is None
    assert load_ledger(serving_env["kube"], NAMESPACE, "toy-lm").retiring == []
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
    assert [r.release for r in ledger.retiring] == [v1]
    assert set(deployed(serving_env).values()) == {v1, v2}


def test_models_rollback_serves_the_previous_version_again_at_once(
        app, serving_env, kube_api, capsys):
    v1 = serving(app, serving_env, kube_api, "v1")
    straight = manifest_for("toy-lm", "v2", FILES)
    straight["canary"] = {"steps": [100]}  # switch as soon as it is ready
    v2 = serving(app, serving_env, kube_api, "v2", straight)
    assert routed(serving_env) == {release_name("toy-lm", v2): 100}
    capsys.readouterr()

    assert cli(["models", "rollback", "toy-lm"]) == 0

    assert "rolling back to version v1" in capsys.readouterr().out
    ledger = load_ledger(serving_env["kube"], NAMESPACE, "toy-lm")
    back = ledger.rollouts[-1]
    assert (back.kind, back.id.startswith(v1)) == ("rollback", True)
    controller_reports_ready(kube_api, back.id)
    reconcile_models()
    ledger = load_ledger(serving_env["kube"], NAMESPACE, "toy-lm")
    assert ledger.find(ledger.current).version == "v1"
    assert ledger.find(back.id).canary is None  # back to what served: no canary
    assert routed(serving_env) == {release_name("toy-lm", back.id): 100}
    assert cli(["models", "list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("toy-lm"))
    assert row.split()[3:5] == ["v1", "v2"]


def test_rolling_back_without_a_previous_version_is_refused(app, serving_env, capsys):
    deploy(app, serving_env, "v1")

    assert cli(["models", "rollback", "toy-lm"]) == 1

    assert "no previous version" in capsys.readouterr().err


def test_a_rollout_interrupted_before_it_started_waits_for_its_redelivery(serving_env):
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
