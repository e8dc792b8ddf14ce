"""Off-hours schedules on the running sandbox: the deployed pool_schedule function,
ticked by the sandbox scheduler on the simulated clock, against the GKE and
Kubernetes stand-ins through the real clients.

One night is played: a window that runs over midnight into the night clocks go
forward in Europe/Berlin (2027-03-28, 02:00 CET -> 03:00 CEST), with one pool kept
busy by a pod past the window's end. The clock is jumped between the moments that
matter rather than waited for.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import pytest
from google.cloud import pubsub_v1
from kubernetes import client as k8s

from sandbox.supervisor.runner import Sandbox
from sandbox.topology import PROJECT
from shared import gke
from shared.config import Settings
from shared.offhours.plan import OUTPUT_ONLY
from tests.e2e.conftest import wait_for
from tests.slice_faults import control

pytestmark = pytest.mark.e2e

SANDBOX_SPEED = 300.0  # a 5-minute tick every real second
UTC = dt.UTC
SCHEDULE = """
pool_schedule:
  lead_time_minutes: 30
schedules:
  night-shift:
    time_zone: Europe/Berlin
    on_hours:
      saturday: ["22:00-04:00"]
"""
LABEL = {"accelops.dev/schedule": "night-shift"}
# Saturday 2027-03-27 22:00 CET is 21:00 UTC; the window ends Sunday 04:00 CEST, which
# is 02:00 UTC (03:00 UTC had the clocks not gone forward).
WINDOW_START = dt.datetime(2027, 3, 27, 21, 0, tzinfo=UTC)
WINDOW_END = dt.datetime(2027, 3, 28, 2, 0, tzinfo=UTC)
LEAD = dt.timedelta(minutes=30)
POOLS: dict[str, dict[str, Any]] = {
    "gpu-serve": {"initial_node_count": 2, "autoscaling": {
        "enabled": True, "min_node_count": 1, "max_node_count": 3},
        "config": {"machine_type": "g2-standard-8", "labels": LABEL, "accelerators": [
            {"accelerator_count": 1, "accelerator_type": "nvidia-l4"}]}},
    "team-slice": {"initial_node_count": 4, "config": {
        "machine_type": "ct5lp-hightpu-4t", "labels": LABEL},
        "placement_policy": {"type_": "COMPACT", "tpu_topology": "4x4"}},
    "dev-tpu": {"initial_node_count": 1, "config": {
        "machine_type": "ct5lp-hightpu-4t", "labels": LABEL},
        "placement_policy": {"type_": "COMPACT", "tpu_topology": "2x2"}},
    "gpu-kept": {"initial_node_count": 1, "config": {
        "machine_type": "g2-standard-8", "labels": {**LABEL, "accelops.dev/keep": "true"},
        "accelerators": [{"accelerator_count": 1, "accelerator_type": "nvidia-l4"}]}},
}


def now(sandbox: Sandbox) -> dt.datetime:
    return dt.datetime.fromtimestamp(control(sandbox, "clock")["time"], UTC)


def jump_to(sandbox: Sandbox, moment: dt.datetime) -> None:
    control(sandbox, "clock", {"advance": (moment - now(sandbox)).total_seconds()})


def specs() -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in gke.list_node_pool_specs(Settings.from_env())}


def nodes(core: k8s.CoreV1Api) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in core.list_node().items:
        pool = node.metadata.labels.get("cloud.google.com/gke-nodepool")
        counts[pool] = counts.get(pool, 0) + 1
    return counts


def removed(core: k8s.CoreV1Api, *names: str) -> bool:
    present, counts = specs(), nodes(core)
    return all(name not in present or counts.get(name, 0) == 0 for name in names)


def up(core: k8s.CoreV1Api, *names: str) -> bool:
    present, counts = specs(), nodes(core)
    return all(present.get(n, {}).get("status") == "RUNNING" and counts.get(n, 0) > 0
               for n in names)


def phase(core: k8s.CoreV1Api) -> str | None:
    status = core.read_namespaced_pod("night-run", "research").status
    return status.phase if status is not None else None


@pytest.fixture(scope="module")
def audits(sandbox: Sandbox) -> Iterator[pubsub_v1.SubscriberClient]:
    subscriber = pubsub_v1.SubscriberClient()
    path = subscriber.subscription_path(PROJECT, "pool-actions-e2e")
    subscriber.create_subscription(name=path, topic=f"projects/{PROJECT}/topics/loadtest-metrics")
    try:
        yield subscriber
    finally:
        subscriber.close()


def audit_rows(subscriber: pubsub_v1.SubscriberClient) -> list[dict[str, Any]]:
    path = subscriber.subscription_path(PROJECT, "pool-actions-e2e")
    rows: list[dict[str, Any]] = []
    while True:
        response = subscriber.pull(subscription=path, max_messages=100, timeout=10)
        if not response.received_messages:
            return rows
        for received in response.received_messages:
            if received.message.attributes.get("kind") == "pool_action":
                rows.extend(json.loads(received.message.data))
        subscriber.acknowledge(subscription=path,
                               ack_ids=[r.ack_id for r in response.received_messages])


def test_a_night_across_a_daylight_saving_change_removes_and_restores_on_time(
        sandbox: Sandbox, core: k8s.CoreV1Api, audits: pubsub_v1.SubscriberClient) -> None:
    settings = Settings.from_env()
    for name, body in POOLS.items():
        gke.create_node_pool_from_spec(settings, {"name": name, **body})
    assert wait_for(lambda: up(core, *POOLS), timeout=30), specs()
    before = specs()["team-slice"]

    # Saturday morning, off-hours: the schedule arrives and the pools go, but the kept one.
    sandbox.config.write_text(sandbox.config.read_text() + SCHEDULE)
    assert wait_for(lambda: removed(core, "gpu-serve", "team-slice", "dev-tpu"), timeout=30)
    assert up(core, "gpu-kept")
    assert "team-slice" not in specs()

    # The next Saturday evening of the change: restored by 22:00 CET, starting at 21:30.
    jump_to(sandbox, WINDOW_START - LEAD - dt.timedelta(minutes=5))
    assert removed(core, "gpu-serve", "team-slice", "dev-tpu")
    assert wait_for(lambda: up(core, "gpu-serve", "team-slice", "dev-tpu"), timeout=30)
    assert now(sandbox) <= WINDOW_START, "restored after the window started"
    after = specs()
    assert {k: v for k, v in after["team-slice"].items() if k not in OUTPUT_ONLY} == \
        {k: v for k, v in before.items() if k not in OUTPUT_ONLY}
    assert wait_for(lambda: specs()["gpu-serve"].get("autoscaling", {}).get(
        "min_node_count") == 1, timeout=60), "autoscaling minimum not restored"

    # A pod on the dev pool runs until 03:00 UTC, past the window's end.
    run_seconds = (dt.datetime(2027, 3, 28, 3, 0, tzinfo=UTC) - now(sandbox)).total_seconds()
    core.create_namespaced_pod("research", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "night-run"},
        "spec": {"restartPolicy": "Never",
                 "nodeSelector": {"cloud.google.com/gke-nodepool": "dev-tpu"},
                 "tolerations": [{"key": "google.com/tpu", "operator": "Exists",
                                  "effect": "NoSchedule"}],
                 "containers": [{"name": "train", "image": "us-docker.pkg.dev/acme/train:1",
                                 "env": [{"name": "ACCELOPS_SANDBOX_RUN_SECONDS",
                                          "value": str(int(run_seconds))}]}]}})
    assert wait_for(lambda: phase(core) == "Running", timeout=60)

    # 03:50 CEST = 01:50 UTC: still on-hours, though the wall clock read 02:50 CET an
    # hour earlier. Nothing goes before 04:00 CEST.
    jump_to(sandbox, WINDOW_END - dt.timedelta(minutes=10))
    assert up(core, "gpu-serve", "team-slice", "dev-tpu")
    assert wait_for(lambda: removed(core, "gpu-serve", "team-slice"), timeout=30)
    assert now(sandbox) >= WINDOW_END
    assert now(sandbox) < WINDOW_END + dt.timedelta(minutes=30), "removed late"
    # The busy pool stays while its pod runs, and goes once it has finished.
    assert up(core, "dev-tpu")
    assert wait_for(lambda: removed(core, "dev-tpu"), timeout=60)
    assert phase(core) == "Succeeded"
    assert up(core, "gpu-kept")

    rows = audit_rows(audits)
    keys = {(r["pool"], r["action"], r["method"]) for r in rows}
    assert {("gpu-serve", "remove", "resize"), ("team-slice", "remove", "delete"),
            ("dev-tpu", "remove", "resize"), ("team-slice", "restore", "recreate"),
            ("gpu-serve", "restore", "resize"), ("dev-tpu", "skip", None)} <= keys
    assert not [r for r in rows if r["pool"] == "gpu-kept"]
    slice_rows = [r for r in rows if r["pool"] == "team-slice" and r["action"] == "remove"]
    assert {r["accelerator_count"] for r in slice_rows} == {16}
    skip = next(r for r in rows if r["action"] == "skip")
    assert "research/night-run" in skip["reason"]


def test_schedule_plan_at_a_later_time_prints_what_a_tick_would_do_and_changes_nothing(
        sandbox: Sandbox, capsys: pytest.CaptureFixture[str]) -> None:
    from shared.cli import main

    before = specs()
    assert main(["schedule", "plan", "--at", "2027-04-03T21:35+02:00",
                 "--config", str(sandbox.config)]) == 0
    out = capsys.readouterr().out
    assert "pool schedule at 2027-04-03T21:35:00+02:00" in out
    assert "ON  schedule night-shift: on-hours Sat 22:00-04:00 (Europe/Berlin) start " \
           "Sat 2027-04-03 22:00 CEST; restoring 30 min early" in out
    assert "team-slice: on-hours: recreate from the saved spec [recreate team-slice" in out
    assert "gpu-serve: on-hours: resize gpu-serve to 2 node(s) per zone" in out
    assert "gpu-kept" not in out
    assert specs().keys() == before.keys()
