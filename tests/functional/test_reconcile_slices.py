"""reconcile_slices through functions-framework, against the sandbox Kubernetes and GKE
APIs over sockets. JobSet and pod states are set directly in the Kubernetes store (no
controllers run here), and the GKE clock is advanced by hand."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from sandbox.gke import GkeApiServer
from sandbox.kubeapi import KubeApiServer
from shared import gke, kube
from shared.config import Settings
from shared.errors import ConflictError, OperationInProgressError, PermanentError, RateLimitedError
from shared.names import pool_name
from shared.nodepools import PoolSpec
from shared.slices.model import CreatePool
from shared.slices.reconcile import reconcile
from shared.slices.record import RECORD_NAME
from tests.functional.conftest import job_request, load_event
from tests.jobs_fixtures import CONFIG

GROUP = "jobset.x-k8s.io"


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
        {"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
         "message": "jobset completed successfully", "lastTransitionTime": at}]}},
        namespace=meta["namespace"], subresource="status")


def use_slice_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **slices: Any) -> None:
    config = yaml.safe_load(CONFIG.read_text())
    config["slices"] = slices
    (tmp_path / "slices-config.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("ACCELOPS_CONFIG", str(tmp_path / "slices-config.yaml"))


def pools(gke_api: GkeApiServer) -> dict[str, str]:
    return {p.name: p.status for p in gke.list_node_pools(Settings.from_env())}


def trigger(reconcile_app: Any, **attributes: str) -> int:
    envelope = load_event("pubsub_push_job_request.json")
    envelope["message"].update(data=base64.b64encode(b"{}").decode(), attributes=attributes)
    return int(reconcile_app.post("/", json=envelope).status_code)


def test_an_admitted_multi_slice_jobset_gets_all_its_slices_requested_in_one_run(
    app_client, reconcile_app, kube_api, gke_api, clock
):
    jobset = submit(app_client)  # v5litepod-16 x 2
    admit(kube_api, jobset)
    name = jobset["metadata"]["name"]

    assert trigger(reconcile_app) == 200
    assert gke_api.request_log.count("POST", "/nodePools") == 2
    assert trigger(reconcile_app) == 200  # both operations still running: nothing new
    clock.advance(200)
    assert trigger(reconcile_app) == 200

    assert pools(gke_api) == {pool_name("research", name, 0): "RUNNING",
                              pool_name("research", name, 1): "RUNNING"}
    assert gke_api.request_log.count("POST", "/nodePools") == 2


def test_no_more_operations_than_the_limit_are_in_flight(
    app_client, reconcile_app, kube_api, gke_api, clock, tmp_path, monkeypatch
):
    use_slice_config(tmp_path, monkeypatch, max_concurrent_operations=1)
    admit(kube_api, submit(app_client))  # two slices, one operation at a time

    trigger(reconcile_app)
    trigger(reconcile_app)
    assert gke_api.request_log.count("POST", "/nodePools") == 1
    clock.advance(200)
    trigger(reconcile_app)

    assert gke_api.request_log.count("POST", "/nodePools") == 2


def test_the_created_pool_follows_gke_tpu_rules(app_client, reconcile_app, kube_api, gke_api):
    jobset = submit(app_client)
    admit(kube_api, jobset)
    trigger(reconcile_app)

    settings = Settings.from_env()
    name = pool_name("research", jobset["metadata"]["name"], 0)
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
    assert report.started == ()
    assert pools(gke_api) == {}


def spec(name: str = "p-1", **changes: Any) -> PoolSpec:
    base = PoolSpec(name=name, machine_type="ct5lp-hightpu-4t", node_count=4, topology="4x4",
                    labels={"accelops.dev/slice": "0"})
    return replace(base, **changes)


def test_the_adapter_maps_gke_answers_to_domain_errors(gke_api, clock):
    settings = Settings.from_env()
    gke.create_node_pool(settings, spec("first"))
    with pytest.raises(OperationInProgressError):  # a second operation on the same pool
        gke.delete_node_pool(settings, "first")
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


def test_gke_aborted_operation_in_progress_is_retried_not_taken_for_already_exists(
    gke_api, clock
):
    # 409 with status ABORTED: google-api-core raises Aborted, a subclass of Conflict.
    settings = Settings.from_env()
    gke_api.faults.fail_next(1, status="ABORTED", http_code=409,
                             message="Operation operation-1 is currently creating node pool "
                                     "p-1. Please wait and try again once it is done.")
    with pytest.raises(OperationInProgressError) as caught:
        gke.create_node_pool(settings, spec("aborted"))
    assert not isinstance(caught.value, ConflictError)
    assert "Please wait and try again" in caught.value.message

    gke.create_node_pool(settings, spec("aborted"))
    clock.advance(500)
    with pytest.raises(ConflictError):  # a 409 ALREADY_EXISTS is still a conflict
        gke.create_node_pool(settings, spec("aborted"))


STOCKOUT = ("Instances failed to create: GCE_STOCKOUT: The zone does not have enough "
            "resources available to fulfill the request.")


def state(client: kube.KubeClient) -> dict[str, Any]:
    record = client.get(kube.CONFIG_MAPS, RECORD_NAME, "accelops-system")
    return dict(json.loads(record["data"]["state.json"]))


def test_a_failed_create_deletes_the_pool_backs_off_the_jobset_and_says_why(
    app_client, kube_api, gke_api, clock, tmp_path, monkeypatch
):
    use_slice_config(tmp_path, monkeypatch, backoff_initial_seconds=60,
                     backoff_max_seconds=100, capacity_fallback=["on-demand", "spot"])
    jobset = submit(app_client, tpu={"type": "v5litepod-16", "slices": 1})
    admit(kube_api, jobset)
    name, key = jobset["metadata"]["name"], f"research/{jobset['metadata']['name']}"
    pool = pool_name("research", name, 0)
    client = kube.get_client()
    gke_api.faults.fail_next_create_with_pool_error(2, message=STOCKOUT)
    t0 = 1_900_000_000.0

    assert len(reconcile(now=t0).started) == 1
    clock.advance(200)  # the create ends in ERROR
    seen = reconcile(now=t0 + 10)

    assert seen.failed == (key,)
    assert [(a.kind, a.pool) for a, _ in seen.started] == [("delete", pool)]
    annotated = client.get(kube.JOBSETS, name, "research")["metadata"]["annotations"]
    failure = json.loads(annotated["accelops.dev/slice-failure"])
    assert failure["message"] == STOCKOUT
    assert failure["nextAttempt"] == "2030-03-17T17:47:50Z"  # t0 + 10 + 60
    assert failure["capacity"] == "on-demand"
    [event] = [e for e in client.list(kube.EVENTS, "research")
               if e["involvedObject"]["name"] == name]
    assert (event["type"], event["reason"]) == ("Warning", "SliceCreateFailed")
    assert STOCKOUT in event["message"]

    clock.advance(100)  # the ERROR pool is gone
    waiting = reconcile(now=t0 + 30)
    assert waiting.started == ()
    assert waiting.plan.actions == ()
    assert any("next attempt in 40s" in note for note in waiting.plan.waiting)
    assert gke_api.request_log.count("POST", "/nodePools") == 1

    retry = reconcile(now=t0 + 71)  # backoff over: the next capacity in the order
    [(create, _)] = retry.started
    assert isinstance(create, CreatePool)
    assert create.spec.spot is True
    clock.advance(200)  # fails again: the backoff doubles, up to the cap
    reconcile(now=t0 + 80)
    assert state(client)["failures"][key]["attempts"] == 2
    assert state(client)["failures"][key]["next_attempt"] == t0 + 80 + 100

    clock.advance(100)
    reconcile(now=t0 + 181)  # the third attempt succeeds
    clock.advance(200)
    reconcile(now=t0 + 190)
    assert pools(gke_api) == {pool: "RUNNING"}
    assert state(client)["failures"] == {}
    annotations = client.get(kube.JOBSETS, name, "research")["metadata"]["annotations"]
    assert "accelops.dev/slice-failure" not in annotations


def test_a_failing_jobset_does_not_hold_up_the_others(app_client, kube_api, gke_api, clock):
    failing = submit(app_client, tpu={"type": "v5litepod-16", "slices": 1}, request_id="r-1")
    admit(kube_api, failing)
    gke_api.faults.fail_next_create_with_pool_error(1)
    t0 = 1_900_000_000.0
    reconcile(now=t0)
    clock.advance(200)
    reconcile(now=t0 + 1)  # failure seen, ERROR pool deleted
    other = submit(app_client, tpu={"type": "v5litepod-16", "slices": 1}, request_id="r-2")
    admit(kube_api, other)

    report = reconcile(now=t0 + 2)

    assert [a.jobset for a, _ in report.started] == [
        f"research/{other['metadata']['name']}"]


def test_the_slices_of_a_jobset_failing_in_one_stockout_count_as_one_attempt(
    app_client, kube_api, gke_api, clock, tmp_path, monkeypatch
):
    use_slice_config(tmp_path, monkeypatch, backoff_initial_seconds=60, backoff_max_seconds=600)
    jobset = submit(app_client, tpu={"type": "v5litepod-16", "slices": 3})
    admit(kube_api, jobset)
    name, key = jobset["metadata"]["name"], f"research/{jobset['metadata']['name']}"
    client = kube.get_client()
    gke_api.faults.stockout_for(10_000)
    t0 = 1_900_000_000.0

    assert len(reconcile(now=t0).started) == 3
    clock.advance(200)  # all three creates end in ERROR
    reconcile(now=t0 + 10)
    first = state(client)["failures"][key]
    clock.advance(100)  # the ERROR pools are gone
    assert len(reconcile(now=t0 + 71).started) == 3  # one backoff later, not three
    clock.advance(200)
    reconcile(now=t0 + 80)
    second = state(client)["failures"][key]

    assert (first["attempts"], first["next_attempt"]) == (1, t0 + 10 + 60)
    assert (second["attempts"], second["next_attempt"]) == (2, t0 + 80 + 120)
    events = sorted(e["metadata"]["name"] for e in client.list(kube.EVENTS, "research")
                    if e["involvedObject"]["name"] == name)
    assert events == [f"{name}.slice-failure-1", f"{name}.slice-failure-2"]
    annotation = client.get(kube.JOBSETS, name, "research")["metadata"]["annotations"][
        "accelops.dev/slice-failure"]
    assert json.loads(annotation)["attempts"] == 2
