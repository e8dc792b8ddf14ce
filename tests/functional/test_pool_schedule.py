"""pool_schedule through functions-framework: a Cloud Scheduler tick pushed by Pub/Sub,
against the sandbox Kubernetes, GKE and Pub/Sub APIs over sockets. No controllers run:
Nodes are written into the Kubernetes store and GKE's clock is advanced by hand. Both
APIs share one simulated clock that starts on Monday 2026-11-23 at 19:05 in Berlin,
five minutes into the evening of the schedule below."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import functions_framework
import pytest
from google.cloud import pubsub_v1

from sandbox.common.clock import SimClock
from sandbox.gke import GkeApiServer, GkeState, start_gke_api
from sandbox.kubeapi import KubeApiServer, install_crds, start_kube_api
from sandbox.pubsub import PubSubServer, SubscriptionConfig
from shared import gke, kube, pubsub
from shared.config import Settings
from shared.kube import CONFIG_MAPS, NAMESPACES
from tests.functional.conftest import REPO, load_event
from tests.jobs_fixtures import PROJECT, topic

EVENING = dt.datetime(2026, 11, 23, 18, 5, tzinfo=dt.UTC)  # 19:05 CET
AUDITS = f"projects/{PROJECT}/subscriptions/pool-actions"
CONFIG = """
schedules:
  office:
    time_zone: Europe/Berlin
    on_hours: {weekdays: ["08:00-19:00"]}
"""
GPU = {"machine_type": "g2-standard-8",
       "accelerators": [{"accelerator_count": 1, "accelerator_type": "nvidia-l4"}]}


@pytest.fixture(scope="module")
def schedule_app() -> Any:
    return functions_framework.create_app("pool_schedule", str(REPO / "functions/main.py"),
                                          "cloudevent").test_client()


@pytest.fixture
def clock() -> SimClock:
    return SimClock(speed=1.0, start=EVENING)


@pytest.fixture
def world(clock: SimClock, pubsub_api: PubSubServer, tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[KubeApiServer, GkeApiServer]]:
    kube_api = start_kube_api(clock=clock)
    install_crds(kube_api.store)
    state = GkeState(clock)
    state.add_cluster(PROJECT, "us-central2-b", "sandbox", kube_api.url)
    gke_api = start_gke_api(state)
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    for key, value in {
            "KUBECONFIG": str(kube_api.write_kubeconfig(tmp_path / "kubeconfig")),
            "PUBSUB_EMULATOR_HOST": pubsub_api.address, "ACCELOPS_CONFIG": str(config),
            "ACCELOPS_PROJECT": PROJECT, "ACCELOPS_LOCATION": "us-central2-b",
            "ACCELOPS_CLUSTER": "sandbox", "ACCELOPS_GKE_ENDPOINT": gke_api.url}.items():
        monkeypatch.setenv(key, value)
    kube.reset_client()
    pubsub.reset_client()
    kube.get_client().create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": "accelops-system"}})
    pubsub_api.broker.create_topic(topic("loadtest-metrics"))
    pubsub_api.broker.create_subscription(SubscriptionConfig(
        name=AUDITS, topic=topic("loadtest-metrics")))
    try:
        yield kube_api, gke_api
    finally:
        gke_api.stop()
        kube_api.stop()
        kube.reset_client()
        pubsub.reset_client()


def add_pool(world: tuple[KubeApiServer, GkeApiServer], clock: SimClock, name: str,
             nodes: int, labels: dict[str, str], **extra: Any) -> None:
    kube_api, _ = world
    gke.create_node_pool_from_spec(Settings.from_env(), {
        "name": name, "initial_node_count": nodes, "config": {**GPU, "labels": labels},
        **extra})
    clock.advance(120)
    for i in range(nodes):
        kube_api.store.create("", "nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"{name}-{i}",
                         "labels": {"cloud.google.com/gke-nodepool": name}}})


def pools() -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in gke.list_node_pool_specs(Settings.from_env())}


def audit_rows() -> list[dict[str, Any]]:
    subscriber = pubsub_v1.SubscriberClient()
    try:
        response = subscriber.pull(subscription=AUDITS, max_messages=50, timeout=5)
        rows = []
        for received in response.received_messages:
            assert received.message.attributes["kind"] == "pool_action"
            rows.extend(json.loads(received.message.data))
        return rows
    finally:
        subscriber.close()


def tick(app: Any) -> int:
    return int(app.post("/", json=load_event("pubsub_push_scheduler_tick.json")).status_code)


def test_an_evening_tick_scales_a_scheduled_pool_down_and_records_why(
        schedule_app: Any, world: Any, clock: SimClock) -> None:
    scheduled = {"accelops.dev/schedule": "office", "accelops.dev/team": "research"}
    add_pool(world, clock, "gpu", 2, scheduled, autoscaling={
        "enabled": True, "min_node_count": 1, "max_node_count": 3})
    add_pool(world, clock, "kept", 1, {**scheduled, "accelops.dev/keep": "true"})
    add_pool(world, clock, "slice", 1, {**scheduled, "accelops.dev/managed-by": "accelops"})
    add_pool(world, clock, "other", 1, {})

    assert tick(schedule_app) == 200
    clock.advance(60)
    after = pools()
    assert "min_node_count" not in after["gpu"]["autoscaling"]  # proto3 JSON: 0 is omitted
    assert after["gpu"]["autoscaling"]["max_node_count"] == 3
    for untouched in ("kept", "slice", "other"):
        assert "autoscaling" not in after[untouched]
    saved = kube.get_client().get(CONFIG_MAPS, "accelops-pool-gpu", "accelops-system")
    assert json.loads(saved["data"]["saved.json"])["autoscaling"]["min_node_count"] == 1

    [row] = audit_rows()
    assert (row["pool"], row["action"], row["method"], row["accelerator_count"], row["team"],
            row["schedule"]) == ("gpu", "remove", "resize", 2, "research", "office")
    assert row["action_id"].endswith(":remove:off-2026-11-23T18:00:00+00:00")
    assert "off-hours since Mon 2026-11-23 19:00 CET" in row["reason"]


def test_a_duplicate_tick_starts_nothing_twice_and_reports_nothing_twice(
        schedule_app: Any, world: Any, clock: SimClock) -> None:
    add_pool(world, clock, "gpu", 2, {"accelops.dev/schedule": "office"})
    _, gke_api = world
    gke_api.request_log.clear()
    assert tick(schedule_app) == 200
    assert tick(schedule_app) == 200  # redelivered while the resize runs
    assert gke_api.request_log.count("POST", ":setSize") == 1
    assert [r["action"] for r in audit_rows()] == ["remove"]


def test_a_tick_that_cannot_reach_gke_fails_so_pubsub_retries_and_changes_nothing(
        schedule_app: Any, world: Any, clock: SimClock) -> None:
    add_pool(world, clock, "gpu", 2, {"accelops.dev/schedule": "office"})
    _, gke_api = world
    gke_api.stop()
    assert tick(schedule_app) == 500
    assert kube.get_client().find(CONFIG_MAPS, "accelops-pool-gpu", "accelops-system") is None
