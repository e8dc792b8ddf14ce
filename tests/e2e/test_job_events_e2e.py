"""Job lifecycle telemetry on the running sandbox: submit_job and reconcile_slices
publish each transition they observe, ingest_metrics writes it to BigQuery's
``job_events``, and the test reads the rows back with google-cloud-bigquery.

Every process is separate (the Pub/Sub stand-in pushing to functions-framework, the
Kubernetes and GKE stand-ins on the simulated clock, bqemulator); reconcile_slices
runs as its own identity under the RBAC the deployment definition grants it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import bigquery, pubsub_v1
from kubernetes import client as k8s

from sandbox.supervisor.runner import Sandbox
from sandbox.topology import PROJECT
from shared.config import MetricsConfig
from shared.metrics.job_event import PER_SLICE
from shared.metrics.usage.sql import JOB_EVENTS_UNIQUE
from tests.e2e.conftest import wait_for

pytestmark = pytest.mark.e2e

SANDBOX_PARTS = {"jobs", "metrics"}
SANDBOX_SPEED = 300.0  # a simulated minute every 0.2 s
TABLE = f"{PROJECT}.{MetricsConfig().dataset}.{MetricsConfig().job_events_table}"
UNIQUE_VIEW = f"{PROJECT}.{MetricsConfig().dataset}.{JOB_EVENTS_UNIQUE}"
LIFE = ("submitted", "admitted", "slice_requested", "slice_ready", "running", "finished",
        "slice_deleted")


@pytest.fixture(scope="module")
def warehouse(sandbox: Sandbox) -> Iterator[bigquery.Client]:
    client = bigquery.Client(project=PROJECT, credentials=AnonymousCredentials(),
                             client_options=ClientOptions(api_endpoint=sandbox.bigquery_url))
    try:
        yield client
    finally:
        client.close()


def publish(body: dict[str, Any]) -> tuple[str, bytes]:
    data = json.dumps(body).encode()
    publisher = pubsub_v1.PublisherClient()
    try:
        topic = publisher.topic_path(PROJECT, "job-requests")
        return str(publisher.publish(topic, data).result(timeout=10)), data
    finally:
        publisher.transport.close()


def request(request_id: str, slices: int = 1, run_seconds: int = 600,
            tpu: str = "v5litepod-16") -> dict[str, Any]:
    return {"name": f"ev-{request_id}", "team": "research",
            "image": "us-docker.pkg.dev/acme/train/llama:1.4", "request_id": request_id,
            "tpu": {"type": tpu, "slices": slices},
            "env": {"ACCELOPS_SANDBOX_RUN_SECONDS": str(run_seconds)}}


def raw_rows(warehouse: bigquery.Client, request_id: str) -> list[dict[str, Any]]:
    job = warehouse.query(f"SELECT * FROM `{TABLE}` WHERE request_id = @id",
                          job_config=bigquery.QueryJobConfig(query_parameters=[
                              bigquery.ScalarQueryParameter("id", "STRING", request_id)]))
    return [dict(row.items()) for row in job.result(timeout=30)]


def unique_count(warehouse: bigquery.Client, request_id: str, event: str) -> int:
    """How many times the ``job_events_unique`` view holds a request's event."""
    job = warehouse.query(
        f"SELECT COUNT(*) AS n FROM `{UNIQUE_VIEW}` WHERE request_id = @id AND event = @event",
        job_config=bigquery.QueryJobConfig(query_parameters=[
            bigquery.ScalarQueryParameter("id", "STRING", request_id),
            bigquery.ScalarQueryParameter("event", "STRING", event)]))
    return int(next(iter(job.result(timeout=30)))["n"])


def transition(row: dict[str, Any]) -> tuple[Any, ...]:
    """A row without what says how it arrived (which message, when ingested)."""
    return tuple(sorted((k, v) for k, v in row.items()
                        if k not in ("message_id", "ingested_at")))


def events(warehouse: bigquery.Client, request_id: str) -> dict[str, dict[str, Any]]:
    """The rows of a request, one per row key (redeliveries are rows with the same key)."""
    return {row["row_key"]: row for row in raw_rows(warehouse, request_id)}


def keys(request_id: str, slices: int, *names: str) -> set[str]:
    return {f"{request_id}:{name}:{i}" if name in PER_SLICE else f"{request_id}:{name}"
            for name in names for i in range(slices if name in PER_SLICE else 1)}


def jobset(custom: k8s.CustomObjectsApi, request_id: str) -> dict[str, Any] | None:
    items = custom.list_cluster_custom_object("jobset.x-k8s.io", "v1alpha2", "jobsets")["items"]
    return next((dict(j) for j in items
                 if j["metadata"]["annotations"].get("accelops.dev/request-id") == request_id),
                None)


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def function_log(sandbox: Sandbox, target: str) -> list[dict[str, Any]]:
    text = (sandbox.state_dir / "logs" / f"{target}.log").read_text()
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_a_job_through_its_whole_life_is_each_transition_once_in_bigquery_in_order(
    sandbox, custom, warehouse
):
    message_id, data = publish(request("life", slices=2))
    js = wait_for(lambda: jobset(custom, "life"))
    assert sandbox.redeliver("submit_job", message_id, data) == 200
    expected = keys("life", 2, *LIFE)

    found = wait_for(lambda: (rows := events(warehouse, "life")).keys() == expected and rows,
                     timeout=120)

    assert found, f"got {sorted(events(warehouse, 'life'))}, want {sorted(expected)}"
    order = sorted(found.values(), key=lambda row: (row["at"], LIFE.index(row["event"])))
    assert [row["event"] for row in order] == [
        "submitted", "admitted", "slice_requested", "slice_requested", "slice_ready",
        "slice_ready", "running", "finished", "slice_deleted", "slice_deleted"]
    submitted, finished = found["life:submitted"], found["life:finished"]
    [completed] = [c for c in jobset(custom, "life")["status"]["conditions"]
                   if c["type"] == "Completed"]
    assert submitted["at"] == instant(js["metadata"]["creationTimestamp"])
    assert (finished["outcome"], finished["at"]) == (
        "succeeded", instant(completed["lastTransitionTime"]))
    assert {(r["team"], r["tpu_type"], r["slices"], r["chips_per_slice"])
            for r in found.values()} == {("research", "v5litepod-16", 2, 16)}
    # The redelivered message published its record again: the first delivery and the
    # redelivery (answered 200 above) each published one, so at least two raw rows from
    # two messages (a busy machine can add push redeliveries of either hop, never take
    # these away), every copy the same transition, and the unique view holds it once.
    copies = [r for r in raw_rows(warehouse, "life") if r["event"] == "submitted"]
    assert len({r["message_id"] for r in copies}) >= 2, copies
    assert {transition(r) for r in copies} == {transition(submitted)}
    assert unique_count(warehouse, "life", "submitted") == 1
    # reconcile_slices read the Workloads under its own RBAC and never had to retry.
    assert not [e for e in function_log(sandbox, "reconcile_slices")
                if e["message"].startswith("will retry")]


def test_a_rejected_request_is_one_rejected_row_with_its_field_and_rule(sandbox, warehouse):
    publish(request("refused", slices=9))

    rows = wait_for(lambda: events(warehouse, "refused"), timeout=60)

    [row] = rows.values()
    assert (row["event"], row["team"], row["field"], row["rule"]) == (
        "rejected", "research", "tpu.slices", "must be at most 4")
    assert row["jobset"] is None


def test_a_cancelled_jobset_is_finished_as_cancelled_and_its_slice_deleted(
    sandbox, custom, warehouse
):
    publish(request("cancel", run_seconds=36_000, tpu="v5litepod-8"))
    js = wait_for(lambda: jobset(custom, "cancel"))
    assert wait_for(lambda: "cancel:slice_ready:0" in events(warehouse, "cancel"), timeout=60)

    custom.delete_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "research",
                                           "jobsets", js["metadata"]["name"])
    ending = keys("cancel", 1, "finished", "slice_deleted")
    rows = wait_for(lambda: ending <= (found := events(warehouse, "cancel")).keys() and found,
                    timeout=90)

    assert rows, sorted(events(warehouse, "cancel"))
    finished, deleted = rows["cancel:finished"], rows["cancel:slice_deleted:0"]
    assert finished["outcome"] == "cancelled"
    assert rows["cancel:slice_ready:0"]["at"] <= finished["at"] <= deleted["at"]
