"""What a Triton release renders to, how a rollout is judged, and the ledger's rules."""

from __future__ import annotations

from typing import Any

import pytest

from shared.config import ServingConfig
from shared.serving.ledger import Ledger, Rollout
from shared.serving.observe import judge_deployment
from shared.serving.triton import render_triton, snapshot_names

SPEC = {"server": "triton", "model": "toy-lm", "version": "v2", "deployment": "toy-lm",
        "accelerator": {"gpu": {"type": "nvidia-l4", "count": 1}, "tpu": None},
        "replicas": {"min": 2, "max": 4},
        "autoscaling": {"metric": "nv_inference_pending_request_count", "target": 10}}
CONFIG = ServingConfig()


def rendered(replicas: int | None = 2) -> dict[str, dict[str, Any]]:
    return {body["kind"]: body for _, body in
            render_triton(SPEC, "gs://b/releases/toy-lm/r-1/", "r-1", CONFIG,
                          replicas=replicas)}


def test_every_pod_of_a_release_loads_exactly_its_snapshot():
    pod = rendered()["Deployment"]["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]

    assert "--model-repository=gs://b/releases/toy-lm/r-1/" in args
    assert "--model-control-mode=explicit" in args
    assert "--load-model=toy-lm" in args
    assert "--exit-on-error=true" in args
    assert "--strict-readiness=true" in args


def test_a_switch_adds_a_ready_pod_before_it_retires_one():
    deployment = rendered()["Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]

    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1,
                                                              "maxUnavailable": 0}
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert container["lifecycle"]["preStop"]["sleep"]["seconds"] > 0


def test_the_pods_run_on_gpus_as_the_readers_identity_without_privileges():
    pod = rendered()["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]

    assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert pod["serviceAccountName"] == CONFIG.triton_service_account
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_replicas_are_set_on_create_only_so_the_autoscaler_keeps_them():
    assert rendered(2)["Deployment"]["spec"]["replicas"] == 2
    assert "replicas" not in rendered(None)["Deployment"]["spec"]
    hpa = rendered()["HorizontalPodAutoscaler"]["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (2, 4)
    assert rendered()["PodMonitoring"]["spec"]["endpoints"][0]["port"] == "metrics"


def test_the_config_sits_beside_the_version_directory_in_a_snapshot():
    names = snapshot_names("releases/d/r-1/", "toy-lm", 2, ["config.pbtxt", "model.py",
                                                            "tok/vocab.json"])

    assert names == {"config.pbtxt": "releases/d/r-1/toy-lm/config.pbtxt",
                     "model.py": "releases/d/r-1/toy-lm/2/model.py",
                     "tok/vocab.json": "releases/d/r-1/toy-lm/2/tok/vocab.json"}


def deployment(release: str = "r-1", *, updated: int = 2, available: int = 2, total: int = 2,
               conditions: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"metadata": {"generation": 3},
            "spec": {"replicas": 2, "template": {"metadata": {
                "annotations": {"accelops.dev/release": release}}}},
            "status": {"observedGeneration": 3, "updatedReplicas": updated,
                       "availableReplicas": available, "replicas": total,
                       "conditions": conditions or []}}


def pod(restarts: int = 0, waiting: str | None = None, message: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {"restartCount": restarts, "state": {}}
    if waiting:
        status["state"] = {"waiting": {"reason": waiting}}
    if message:
        status["lastState"] = {"terminated": {"exitCode": 1, "message": message}}
    return {"metadata": {"name": "p"}, "status": {"containerStatuses": [status]}}


def judge(dep: dict[str, Any] | None, pods: list[dict[str, Any]], age: float = 10.0) -> Any:
    return judge_deployment(dep, pods, "r-1", age_seconds=age, timeout_seconds=600,
                            max_restarts=2)


def test_a_rollout_is_ready_only_when_no_old_pod_is_left():
    assert judge(deployment(), [pod()]).outcome == "ready"
    assert judge(deployment(total=3), [pod()]).outcome == "waiting"
    assert judge(deployment(updated=1), [pod()]).outcome == "waiting"


@pytest.mark.parametrize("bad", [
    pod(1, "CrashLoopBackOff", "failed to load 'toy-lm'"),
    pod(0, "ImagePullBackOff"),
    pod(2, None, "exit 1"),
])
def test_a_pod_that_cannot_serve_fails_the_rollout_with_its_reason(bad):
    verdict = judge(deployment(updated=1, available=0, total=3), [bad])

    assert verdict.outcome == "failed"
    assert "pod p" in verdict.detail


def test_kubernetes_progress_deadline_and_the_rollout_timeout_fail_it():
    stuck = deployment(updated=1, available=1, total=3, conditions=[
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}])

    assert judge(stuck, []).outcome == "failed"
    assert judge(deployment(updated=1, total=3), [], age=601).outcome == "failed"
    assert judge(None, []).outcome == "failed"


def test_a_deployment_changed_by_someone_else_is_not_judged_ready():
    assert judge(deployment("r-other"), [pod()]).outcome == "failed"


def test_the_ledger_keeps_the_current_previous_and_active_rollouts_when_it_trims():
    ledger = Ledger(model="m")
    for index in range(6):
        ledger.record(Rollout(id=f"r{index}", key=f"k{index}", version=f"v{index}",
                              state="ready"), history=3)
        if index == 1:
            ledger.promote("r1")
    ledger.record(Rollout(id="r9", key="k9", version="v9", state="rolling-out"), history=3)

    ids = [r.id for r in ledger.rollouts]
    assert "r1" in ids
    assert "r9" in ids
    assert len(ids) == 3
    assert ledger.active() is not None
    assert ledger.active().id == "r9"


def test_the_reason_reported_is_the_log_line_that_names_the_error():
    tail = ("E1123 failed to load 'toy-lm' version 3: RuntimeError: broken on purpose\n"
            "+-------------+\n| Backend | Path |\n| python | /opt/backends |\n"
            "| min_supported_compute_capability | 6.0 |\n+-------------+\n")

    verdict = judge(deployment(updated=1, available=0, total=3), [pod(1, "CrashLoopBackOff",
                                                                     tail)])

    assert "failed to load 'toy-lm' version 3: RuntimeError: broken on purpose" in verdict.detail
