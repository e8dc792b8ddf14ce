"""TPU slices on the running sandbox: real clients, separate processes, simulated clock.

Jobs are published to Pub/Sub; Kueue (simulated) admits them; reconcile_slices,
triggered by the scheduler, submit_job and the pod log sink, creates node pools
through the sandbox GKE API; pods run and finish; pools are deleted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.cloud import pubsub_v1
from kubernetes import client as k8s

from sandbox.supervisor.runner import Sandbox
from sandbox.topology import PROJECT
from shared import gke
from shared.config import Settings
from shared.names import pool_name
from tests.e2e.conftest import wait_for
from tests.slice_faults import control

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SANDBOX_SPEED = 300.0  # a simulated minute every 0.2 s


def publish(body: dict[str, Any]) -> str:
    publisher = pubsub_v1.PublisherClient()
    try:
        topic = publisher.topic_path(PROJECT, "job-requests")
        return str(publisher.publish(topic, json.dumps(body).encode()).result(timeout=10))
    finally:
        publisher.transport.close()


def request(request_id: str, tpu: str = "v5litepod-16", slices: int = 1,
            run_seconds: int = 600, team: str = "research") -> dict[str, Any]:
    return {"name": f"e2e-{request_id}", "team": team,
            "image": "us-docker.pkg.dev/acme/train/llama:1.4", "request_id": request_id,
            "tpu": {"type": tpu, "slices": slices},
            "env": {"ACCELOPS_SANDBOX_RUN_SECONDS": str(run_seconds)}}


def jobset(custom: k8s.CustomObjectsApi, request_id: str) -> dict[str, Any] | None:
    items = custom.list_cluster_custom_object("jobset.x-k8s.io", "v1alpha2", "jobsets")["items"]
    for item in items:
        if item["metadata"]["annotations"].get("accelops.dev/request-id") == request_id:
            return dict(item)
    return None


def pools() -> dict[str, str]:
    return {p.name: p.status for p in gke.list_node_pools(Settings.from_env())}


def finished(js: dict[str, Any] | None) -> str | None:
    for condition in ((js or {}).get("status") or {}).get("conditions") or []:
        if condition["type"] in ("Completed", "Failed") and condition["status"] == "True":
            return str(condition["type"])
    return None


def reconcile_log(sandbox: Sandbox) -> list[dict[str, Any]]:
    text = (sandbox.state_dir / "logs" / "reconcile_slices.log").read_text()
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_a_multi_slice_job_gets_its_pools_runs_and_its_pools_are_reaped(sandbox, custom):
    publish(request("lifecycle", slices=2))
    js = wait_for(lambda: jobset(custom, "lifecycle"))
    names = [pool_name("research", js["metadata"]["name"], i) for i in range(2)]

    created = wait_for(lambda: all(pools().get(n) == "RUNNING" for n in names))
    outcome = wait_for(lambda: finished(jobset(custom, "lifecycle")))
    reaped = wait_for(lambda: not set(names) & set(pools()))

    assert created, "both slices should get a RUNNING pool"
    assert outcome == "Completed"
    assert reaped, "the pools should be deleted after the job"


def test_gke_answering_429_and_failed_precondition_for_a_while_only_delays_provisioning(
    sandbox, custom
):
    control(sandbox, "faults", {"status": "RESOURCE_EXHAUSTED", "http_code": 429,
                                "for_seconds": 240, "methods": ["POST"]})
    publish(request("busy-429", tpu="v5litepod-8"))
    js = wait_for(lambda: jobset(custom, "busy-429"))
    name = pool_name("research", js["metadata"]["name"], 0)
    backoffs = wait_for(lambda: [e for e in reconcile_log(sandbox)
                                 if e["message"].startswith("GKE is busy")])
    control(sandbox, "faults", {"status": "FAILED_PRECONDITION", "http_code": 400,
                                "count": 2, "methods": ["POST"]})

    assert wait_for(lambda: pools().get(name) == "RUNNING", timeout=60)
    assert backoffs
    retried = [e for e in reconcile_log(sandbox) if e["message"].startswith("will retry")]
    assert retried == [], "busy answers must back off, not fail the delivery"


def test_a_jobset_deleted_while_its_pool_is_being_created_has_the_pool_reaped(sandbox, custom):
    publish(request("deleted-early", tpu="v5litepod-16", run_seconds=3600))
    js = wait_for(lambda: jobset(custom, "deleted-early"))
    name = pool_name("research", js["metadata"]["name"], 0)
    assert wait_for(lambda: name in pools())

    custom.delete_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "research",
                                           "jobsets", js["metadata"]["name"])

    assert wait_for(lambda: name not in pools(), timeout=60)


def test_a_pool_that_ends_in_error_is_replaced_and_the_job_still_completes(sandbox, custom):
    control(sandbox, "pool-error", {})
    publish(request("pool-error", tpu="v5litepod-8", run_seconds=300))

    outcome = wait_for(lambda: finished(jobset(custom, "pool-error")), timeout=60)

    assert outcome == "Completed"
    errors = [e for e in reconcile_log(sandbox)
              if e["message"].startswith("started delete") and "ERROR" in e["message"]]
    assert errors, "the pool in ERROR should have been deleted and recreated"
