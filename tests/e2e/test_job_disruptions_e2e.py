"""A training job's failures on the running sandbox: a Spot preemption costs a restart but
not the job's ``max_restarts``; a program that fails spends them and then fails the job.

Jobs are published to Pub/Sub; submit_job renders the JobSet (with its podFailurePolicy
and failurePolicy rule), reconcile_slices makes Spot pools through the sandbox GKE API,
and the preemption is injected through that API's control surface, as GKE faults are. What
the tests read they read through the kubernetes client and the jobs status lookup.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s

from sandbox.supervisor.runner import Sandbox
from shared import kube
from shared.config import AccelopsConfig, Settings, load_config
from shared.errors import NotFoundError
from shared.jobs.lookup import job_status
from shared.jobs.status.model import JobStatus
from tests.e2e.conftest import wait_for
from tests.e2e.test_slices_e2e import finished, jobset, publish
from tests.slice_faults import preempt

pytestmark = pytest.mark.e2e

# A simulated minute every 0.2 s: a multi-host pool in 0.6 s, a 15-minute job in 3 s.
SANDBOX_SPEED = 300.0
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"


@pytest.fixture(scope="module")
def settings(sandbox: Sandbox) -> Settings:
    kube.reset_client()
    return Settings.from_env()


@pytest.fixture(scope="module")
def config(sandbox: Sandbox) -> AccelopsConfig:
    return load_config(str(sandbox.config))


def training(request_id: str, *, tpu: str, slices: int, max_restarts: int, run_seconds: int,
             spot: bool = False, outcome: str = "succeed") -> dict[str, Any]:
    return {"name": f"e2e-{request_id}", "team": "research",
            "image": "us-docker.pkg.dev/acme/train/llama:1.4", "request_id": request_id,
            "tpu": {"type": tpu, "slices": slices, "spot": spot},
            "max_restarts": max_restarts,
            "env": {"ACCELOPS_SANDBOX_RUN_SECONDS": str(run_seconds),
                    "ACCELOPS_SANDBOX_OUTCOME": outcome}}


def pods(core: k8s.CoreV1Api, name: str) -> list[k8s.V1Pod]:
    return list(core.list_namespaced_pod("research",
                                         label_selector=f"{JOBSET_LABEL}={name}").items)


def status_text(settings: Settings, config: AccelopsConfig, request_id: str) -> list[str]:
    try:
        status: JobStatus = job_status(settings, config, request_id)
    except NotFoundError:
        return []
    return list(status.explanation)


def all_running(core: k8s.CoreV1Api, name: str, count: int) -> list[k8s.V1Pod]:
    current = pods(core, name)
    return current if len(current) == count and all(
        p.status.phase == "Running" for p in current) else []


def test_a_spot_preemption_restarts_a_two_slice_job_which_finishes_with_max_restarts_unspent(
    sandbox, custom, core, settings, config
):
    publish(training("preempted", tpu="v5litepod-16", slices=2, max_restarts=0,
                     run_seconds=900, spot=True))
    name = wait_for(lambda: (jobset(custom, "preempted") or {}).get("metadata", {})
                    .get("name"))
    running = wait_for(lambda: all_running(core, name, 8), timeout=60)
    assert running, "both slices should run before the preemption"
    victim = running[0]
    node = core.read_node(victim.spec.node_name)
    assert node.metadata.labels.get("cloud.google.com/gke-spot") == "true"

    preempt(sandbox, node.metadata.labels["cloud.google.com/gke-nodepool"],
            node=victim.spec.node_name, for_seconds=180)

    restarted = wait_for(lambda: ((jobset(custom, "preempted") or {}).get("status") or {})
                         .get("restarts"))
    outcome = wait_for(lambda: finished(jobset(custom, "preempted")), timeout=60)

    final = jobset(custom, "preempted") or {}
    assert restarted == 1
    assert outcome == "Completed"
    assert final["status"]["restarts"] == 1
    assert final["status"].get("restartsCountTowardsMax", 0) == 0
    assert final["spec"]["failurePolicy"]["maxRestarts"] == 0
    warnings = [(e.involved_object.kind, e.reason, e.message)
                for e in core.list_namespaced_event("research").items
                if e.involved_object.name.startswith(name) and e.type == "Warning"]
    assert ("Job", "PodFailurePolicy",
            f"Pod research/{victim.metadata.name} has condition DisruptionTarget matching "
            f"FailJob rule at index 0") in warnings
    assert "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction" in {
        reason for kind, reason, _ in warnings if kind == "JobSet"}
    assert any("after a disrupted host" in line and "does not count" in line
               for line in status_text(settings, config, "preempted"))


def test_a_program_exiting_1_restarts_once_with_max_restarts_1_and_then_fails_the_job(
    sandbox, custom, settings, config
):
    publish(training("exits-1", tpu="v5litepod-8", slices=1, max_restarts=1,
                     run_seconds=120, outcome="fail"))

    outcome = wait_for(lambda: finished(jobset(custom, "exits-1")), timeout=60)

    final = jobset(custom, "exits-1") or {}
    assert outcome == "Failed"
    assert (final["status"]["restarts"], final["status"]["restartsCountTowardsMax"]) == (1, 1)
    failed = next(c for c in final["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "ReachedMaxRestarts"
    assert failed["message"].startswith("jobset failed due to reaching max number of restarts")
    assert any("restarted 1 time(s) after a failed pod" in line
               for line in status_text(settings, config, "exits-1"))
