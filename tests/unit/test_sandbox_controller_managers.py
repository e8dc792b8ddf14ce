"""The Kueue and JobSet controller managers of the cluster simulation, in process.

Their Deployments (the sandbox's stand-in release manifests) turn Available, and
their Services' Endpoints get a ready address, a readiness-probe delay after they
are created; the generic Deployment and Service controllers leave them alone.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from sandbox.cluster import Simulation
from sandbox.cluster.__main__ import parse_args
from sandbox.cluster.managers import ANNOTATION_UNREADY, DEFAULT_START_SECONDS
from sandbox.common.clock import SimClock
from sandbox.kubeapi import ObjectStore
from tests.controller_manifests import store_controller_manifests

START = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)


def available(store: ObjectStore, namespace: str, name: str) -> str:
    deployment = store.get("apps", "deployments", name, namespace)
    conditions = (deployment.get("status") or {}).get("conditions") or []
    return next((c["status"] for c in conditions if c["type"] == "Available"), "")


def endpoints(store: ObjectStore, namespace: str, name: str) -> dict[str, Any]:
    return store.get("", "endpoints", name, namespace)["subsets"][0]


@pytest.fixture
def clock() -> SimClock:
    return SimClock(speed=1e-6, start=START)  # practically frozen: the test moves it


@pytest.fixture
def cluster(clock: SimClock) -> Simulation:
    store = ObjectStore(clock=clock)
    store_controller_manifests(store)
    simulation = Simulation(store, clock)
    simulation.settle()
    return simulation


def test_the_managers_are_unavailable_until_their_readiness_delay_has_passed(
        cluster: Simulation, clock: SimClock) -> None:
    before = [available(cluster.store, "kueue-system", "kueue-controller-manager"),
              available(cluster.store, "jobset-system", "jobset-controller-manager")]
    clock.advance(DEFAULT_START_SECONDS)
    cluster.settle()
    after = [available(cluster.store, "kueue-system", "kueue-controller-manager"),
             available(cluster.store, "jobset-system", "jobset-controller-manager")]

    assert before == ["False", "False"]
    assert after == ["True", "True"]


def test_the_webhook_service_has_the_pod_only_as_not_ready_until_the_manager_is_ready(
        cluster: Simulation, clock: SimClock) -> None:
    before = endpoints(cluster.store, "kueue-system", "kueue-webhook-service")
    clock.advance(DEFAULT_START_SECONDS)
    cluster.settle()
    after = endpoints(cluster.store, "kueue-system", "kueue-webhook-service")

    assert "addresses" not in before
    assert len(before["notReadyAddresses"]) == 1
    assert len(after["addresses"]) == 1
    assert after["ports"] == [{"port": 9443, "protocol": "TCP"}]


def test_a_held_manager_stays_unavailable_until_released(
        cluster: Simulation, clock: SimClock) -> None:
    cluster.managers.hold()
    clock.advance(10 * DEFAULT_START_SECONDS)
    cluster.settle()
    held = available(cluster.store, "kueue-system", "kueue-controller-manager")
    cluster.managers.release()
    cluster.settle()

    assert held == "False"
    assert available(cluster.store, "kueue-system", "kueue-controller-manager") == "True"


def test_the_deployment_controller_makes_no_replica_sets_for_the_managers(
        cluster: Simulation, clock: SimClock) -> None:
    clock.advance(DEFAULT_START_SECONDS)
    cluster.settle()

    assert cluster.store.list("apps", "replicasets") == []
    assert cluster.store.list("", "pods") == []


def test_managers_installed_before_a_restart_are_ready_at_once(clock: SimClock) -> None:
    store = ObjectStore(clock=clock)
    store_controller_manifests(store)
    clock.advance(3600)
    restored = ObjectStore(clock=clock)
    restored.restore(store.snapshot())

    simulation = Simulation(restored, clock)
    simulation.settle()

    assert available(restored, "kueue-system", "kueue-controller-manager") == "True"


def test_the_cluster_process_takes_the_managers_start_delay_as_a_flag() -> None:
    args = parse_args(["--state-dir", "/tmp/x", "--project", "p", "--location", "l",
                       "--cluster", "c", "--controller-start-seconds", "30"])

    assert args.controller_start_seconds == 30.0
    assert parse_args(["--state-dir", "/tmp/x", "--project", "p", "--location", "l",
                       "--cluster", "c"]).controller_start_seconds == DEFAULT_START_SECONDS


def test_a_manager_annotated_unready_loses_its_endpoint_until_the_annotation_goes(
        cluster: Simulation, clock: SimClock) -> None:
    clock.advance(DEFAULT_START_SECONDS)
    cluster.settle()
    cluster.store.patch("apps", "deployments", "jobset-controller-manager", {"metadata": {
        "annotations": {ANNOTATION_UNREADY: "true"}}}, namespace="jobset-system")
    cluster.settle()
    held = (available(cluster.store, "jobset-system", "jobset-controller-manager"),
            endpoints(cluster.store, "jobset-system", "jobset-webhook-service").keys())
    cluster.store.patch("apps", "deployments", "jobset-controller-manager", {"metadata": {
        "annotations": {ANNOTATION_UNREADY: None}}}, namespace="jobset-system")
    cluster.settle()

    assert held[0] == "False"
    assert "addresses" not in held[1]
    assert available(cluster.store, "kueue-system", "kueue-controller-manager") == "True"
    assert available(cluster.store, "jobset-system", "jobset-controller-manager") == "True"
