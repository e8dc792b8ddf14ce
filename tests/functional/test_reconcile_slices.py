"""reconcile_slices through functions-framework, against the sandbox Kubernetes and GKE
APIs over sockets. JobSet and pod states are set directly in the Kubernetes store (no
controllers run here), and the GKE clock is advanced by hand."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import functions_framework
import pytest

from sandbox.clock import SimClock
from sandbox.gke import GkeApiServer, GkeState, start_gke_api
from sandbox.kubeapi import KubeApiServer
from shared import gke, kube
from shared.config import Settings
from shared.errors import ConflictError, OperationInProgressError, PermanentError, RateLimitedError
from shared.names import pool_name
from shared.slices.model import PoolSpec
from shared.slices.reconcile import reconcile
from tests.functional.conftest import REPO, job_request, load_event

GROUP = "jobset.x-k8s.io"


@pytest.fixture(scope="module")
def reconcile_app() -> Any:
    return functions_framework.create_app("reconcile_slices", str(REPO / "functions/main.py"),
                                          "cloudevent").test_client()


@pytest.fixture
def clock() -> SimClock:
    return SimClock(speed=1.0)


@pytest.fixture
def gke_api(kube_api: KubeApiServer, clock: SimClock, cluster: kube.KubeClient,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[GkeApiServer]:
    state = GkeState(clock)
    state.add_cluster("accelops-test", "us-central2-b", "sandbox", kube_api.url)
    server = start_gke_api(state)
    monkeypatch.setenv("ACCELOPS_GKE_ENDPOINT", server.url)
    monkeypatch.setenv("ACCELOPS_LOCATION", "us-central2-b")
    monkeypatch.setenv("ACCELOPS_CLUSTER", "sandbox")
    try:
        yield server
    finally:
        server.stop()


def submit(app_client: Any, **changes: Any) -> dict[str, Any]:
    """Submit a request through submit_job and return the JobSet, admitted (unsuspended)."""
    body = {**job_request(), **changes}
    envelope = load_event("pubsub_push_job_request.json")
    envelope["message"]["data"] = base64.b64encode(json.dumps(body).encode()).decode()
    assert app_client.post("/", json=envelope).status_code == 200
    client = kube.get_client()
    [jobset] = [j for j in client.list(kube.JOBSETS) if j["metadata"]["annotations"][
        "accelops.dev/request-id"] == body.get("request_id", "9876543210")]
    return jobset


def admit(kube_api: KubeApiServer, jobset: dict[str, Any]) -> None:
    meta = jobset["metadata"]
    kube_api.store.patch(GROUP, "jobsets", meta["name"], {"spec": {"suspend": False}},
                         namespace=meta["namespace"])


def finish(kube_api: KubeApiServer, jobset: dict[str, Any], at: str) -> None:
    meta = jobset["metadata"]
    kube_api.store.patch(GROUP, "jobsets", meta["name"], {"status": {"conditions": [
        {"type": "Completed", "status": "True", "lastTransitionTime": at}]}},
        namespace=meta["namespace"], subresource="status")


def pools(gke_api: GkeApiServer) -> dict[str, str]:
    return {p.name: p.status for p in gke.list_node_pools(Settings.from_env())}


def trigger(reconcile_app: Any, **attributes: str) -> int:
    envelope = load_event("pubsub_push_job_request.json")
    envelope["message"].update(data=base64.b64encode(b"{}").decode(), attributes=attributes)
    return int(reconcile_app.post("/", json=envelope).status_code)


def test_an_admitted_jobset_gets_its_slices_one_operation_at_a_time(
    app_client, reconcile_app, kube_api, gke_api, clock
):
    jobset = submit(app_client)  # v5litepod-16 x 2
    admit(kube_api, jobset)
    name = jobset["metadata"]["name"]

    assert trigger(reconcile_app) == 200
    first = pools(gke_api)
    assert trigger(reconcile_app) == 200  # operation still running: nothing new
    assert pools(gke_api) == first
    clock.advance(200)
    assert trigger(reconcile_app) == 200

    assert pools(gke_api) == {pool_name("research", name, 0): "RUNNING",
                              pool_name("research", name, 1): "PROVISIONING"}
    creates = gke_api.request_log.count("POST", "/nodePools")
    assert creates == 2


def test_the_created_pool_follows_gke_tpu_rules(app_client, reconcile_app, kube_api, gke_api):
    jobset = submit(app_client)
    admit(kube_api, jobset)
    trigger(reconcile_app)

    settings = Settings.from_env()
    [name] = pools(gke_api)
    created = gke.container_client(settings).get_node_pool(
        name=f"projects/accelops-test/locations/us-central2-b/clusters/sandbox/nodePools/{name}")
    assert created.config.machine_type == "ct5lp-hightpu-4t"
    assert created.initial_node_count == 4
    assert created.placement_policy.type_.name == "COMPACT"
    assert created.placement_policy.tpu_topology == "4x4"
    assert (created.management.auto_upgrade, created.management.auto_repair) == (False, True)
    assert created.autoscaling.enabled is False
    assert created.config.labels["accelops.dev/jobset"] == jobset["metadata"]["name"]
    assert created.config.labels["accelops.dev/slice"] == "0"


def test_a_finished_jobset_pool_is_deleted_after_the_grace_period(
    app_client, reconcile_app, kube_api, gke_api, clock
):
    jobset = submit(app_client, tpu={"type": "v5litepod-16", "slices": 1})
    admit(kube_api, jobset)
    trigger(reconcile_app)
    clock.advance(200)
    trigger(reconcile_app)  # observes the finished create
    finish(kube_api, jobset, "2020-01-01T00:00:00Z")

    assert trigger(reconcile_app) == 200

    assert list(pools(gke_api).values()) == ["STOPPING"]
    clock.advance(100)
    assert pools(gke_api) == {}


def test_gke_busy_answers_back_off_instead_of_failing(app_client, reconcile_app, kube_api,
                                                      gke_api):
    jobset = submit(app_client)
    admit(kube_api, jobset)
    gke_api.faults.fail_next(3, status="FAILED_PRECONDITION")

    assert trigger(reconcile_app) == 200
    assert trigger(reconcile_app) == 200  # backing off: no second attempt yet

    assert pools(gke_api) == {}
    assert gke_api.request_log.count("POST", "/nodePools") == 1
    record = kube.get_client().get(kube.Resource("", "v1", "configmaps"), "accelops-slices",
                                   "accelops-system")
    state = json.loads(record["data"]["state.json"])
    assert state["backoff_attempts"] == 1
    assert "incompatible operation" in state["backoff_reason"] or state["backoff_reason"]


def test_an_unreachable_gke_api_makes_the_delivery_retry(reconcile_app, gke_api, monkeypatch):
    monkeypatch.setenv("ACCELOPS_GKE_ENDPOINT", "http://127.0.0.1:9")
    assert trigger(reconcile_app) == 500


def test_cleanup_only_mode_never_creates(app_client, reconcile_app, kube_api, gke_api):
    admit(kube_api, submit(app_client))

    assert trigger(reconcile_app, mode="cleanup-only") == 200

    assert pools(gke_api) == {}


def test_a_dry_run_plans_but_changes_nothing(app_client, kube_api, gke_api):
    admit(kube_api, submit(app_client))

    report = reconcile(dry_run=True)

    assert [a.kind for a in report.plan.actions] == ["create", "create"]
    assert report.started is None
    assert pools(gke_api) == {}


def spec(name: str = "p-1", **changes: Any) -> PoolSpec:
    base = PoolSpec(name=name, machine_type="ct5lp-hightpu-4t", node_count=4, topology="4x4",
                    labels={"accelops.dev/slice": "0"})
    return replace(base, **changes)


def test_the_adapter_maps_gke_answers_to_domain_errors(gke_api, clock):
    settings = Settings.from_env()
    gke.create_node_pool(settings, spec("first"))
    with pytest.raises(OperationInProgressError):
        gke.create_node_pool(settings, spec("second"))
    clock.advance(500)
    gke_api.faults.fail_next(1, status="RESOURCE_EXHAUSTED", http_code=429)
    with pytest.raises(RateLimitedError):
        gke.create_node_pool(settings, spec("third"))


def test_an_invalid_shape_is_permanent_and_a_duplicate_is_a_conflict(gke_api, clock):
    settings = Settings.from_env()
    with pytest.raises(PermanentError) as caught:
        gke.create_node_pool(settings, spec("bad", topology="8x8"))
    assert not isinstance(caught.value, OperationInProgressError)
    gke.create_node_pool(settings, spec("dup"))
    clock.advance(500)
    with pytest.raises(ConflictError):
        gke.create_node_pool(settings, spec("dup"))


def test_operations_are_observed_until_done(gke_api, clock):
    settings = Settings.from_env()
    name = gke.create_node_pool(settings, spec("watched"))
    assert gke.get_operation(settings, name).done is False
    clock.advance(500)
    assert gke.get_operation(settings, name).done is True
