"""The sandbox's Kueue as Kueue v0.10.1 behaves, in process: ObjectStore + SimClock.

Priority classes that must exist, ClusterQueues inactive without their
ResourceFlavors, ``namespaceSelector``, and preemption within a ClusterQueue (the
JobSet of a preempted Workload suspended, re-queued, admitted again). The
builders and fixtures are those of ``test_sandbox_cluster.py``.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from sandbox.cluster.clusterqueues import namespace_matches
from sandbox.cluster.preemption import LOWER_PRIORITY, NEVER, Holder, targets
from sandbox.kubeapi import ObjectStore
from tests.unit import test_sandbox_cluster as cluster_tests
from tests.unit.test_sandbox_cluster import (
    ACCELERATOR,
    KUEUE,
    NAMESPACE,
    QUEUE,
    V5E,
    add_flavor,
    add_pools,
    add_priorities,
    add_queue,
    condition,
    events,
    is_true,
    jobset,
    pending_message,
    pods_of,
    run_until,
    submit,
    tpu_jobset,
    workload_of,
)

# test_sandbox_cluster.py's fixtures: a clock that moves only when a test advances it,
# a store with the team's namespace and the simulation on them.
clock, store, sim = cluster_tests.clock, cluster_tests.store, cluster_tests.sim


PREEMPTED = ("Preempted to accommodate a workload (UID: {}) due to prioritization in the "
             "ClusterQueue")


def set_queue(store: ObjectStore, **spec: Any) -> None:
    """Merge ``spec`` into the ClusterQueue's spec (None removes a field)."""
    store.patch(KUEUE, "clusterqueues", "research-cq", {"spec": spec})


def workloads(store: ObjectStore) -> list[dict[str, Any]]:
    return store.list(KUEUE, "workloads", NAMESPACE)


def suspended(store: ObjectStore, name: str) -> bool:
    return bool(jobset(store, name)["spec"]["suspend"])


# ----------------------------------------------------------------------------- priorities


def add_queue_without_priorities(store: ObjectStore, quota: int) -> None:
    """A ClusterQueue naming flavor ``tpu`` and its LocalQueue, nothing else."""
    store.create(KUEUE, "clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
        "metadata": {"name": "research-cq"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["google.com/tpu"], "flavors": [{"name": "tpu", "resources": [
                {"name": "google.com/tpu", "nominalQuota": quota}]}]}]}})
    store.create(KUEUE, "localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
        "metadata": {"name": QUEUE, "namespace": NAMESPACE},
        "spec": {"clusterQueue": "research-cq"}})


def test_a_jobset_naming_a_missing_priority_class_gets_no_workload_until_it_exists(
    store, sim, caplog
):
    add_queue(store, quota=32)
    submit(store, tpu_jobset("urgent", priority="urgent"))

    with caplog.at_level(logging.ERROR, logger="sandbox.cluster.kueue"):
        sim.settle()
        sim.settle()

    assert suspended(store, "urgent")
    assert workloads(store) == []
    assert [e["reason"] for e in store.list("", "events", NAMESPACE)] == []
    assert [r.getMessage() for r in caplog.records] == [
        'Handling job with no workload job="research/urgent" '
        'gvk="jobset.x-k8s.io/v1alpha2, Kind=JobSet" '
        'error="workloadpriorityclasses.kueue.x-k8s.io \\"urgent\\" not found"']

    store.create(KUEUE, "workloadpriorityclasses", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass",
        "metadata": {"name": "urgent"}, "value": 5000})
    sim.settle()

    spec = workload_of(store, "urgent")["spec"]
    assert (spec["priority"], spec["priorityClassName"], spec["priorityClassSource"]) == (
        5000, "urgent", "kueue.x-k8s.io/workloadpriorityclass")
    assert not suspended(store, "urgent")


def test_the_names_job_requests_use_have_no_priority_without_their_classes(store, sim):
    add_flavor(store, "tpu")
    add_queue_without_priorities(store, quota=32)
    submit(store, tpu_jobset("high", priority="high"))

    sim.settle()

    assert workloads(store) == []
    assert suspended(store, "high")


def unlabelled(name: str) -> dict[str, Any]:
    body = tpu_jobset(name)
    del body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"]
    return body


def test_a_jobset_without_a_priority_class_label_gets_priority_0(store, sim):
    add_queue(store, quota=32)
    submit(store, unlabelled("plain"))

    sim.settle()

    spec = workload_of(store, "plain")["spec"]
    assert spec["priority"] == 0
    assert "priorityClassName" not in spec
    assert not suspended(store, "plain")


def test_a_jobset_without_a_priority_class_label_takes_the_global_default_priority_class(
    store, sim
):
    add_queue(store, quota=32)
    for name, value in (("cluster-default", 7), ("older-default", 3), ("other", 1)):
        store.create("scheduling.k8s.io", "priorityclasses", {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, "globalDefault": name != "other"})
    submit(store, unlabelled("plain"))

    sim.settle()

    spec = workload_of(store, "plain")["spec"]
    assert (spec["priority"], spec["priorityClassName"], spec["priorityClassSource"]) == (
        3, "older-default", "scheduling.k8s.io/priorityclass")


# ----------------------------------------------------------------------------- ResourceFlavors


def test_a_queue_is_inactive_while_its_flavor_has_no_resource_flavor_even_with_none_at_all(
    store, sim
):
    add_priorities(store)
    add_queue_without_priorities(store, quota=32)
    submit(store, tpu_jobset("llama"))

    sim.settle()

    assert suspended(store, "llama")
    pending = condition(workload_of(store, "llama"), "QuotaReserved")
    assert pending is not None
    assert (pending["reason"], pending["message"]) == (
        "Inadmissible", "ClusterQueue research-cq is inactive")
    active = condition(store.get(KUEUE, "clusterqueues", "research-cq"), "Active")
    assert active is not None
    assert (active["status"], active["reason"], active["message"]) == (
        "False", "FlavorNotFound",
        "Can't admit new workloads: references missing ResourceFlavor(s): [tpu].")

    add_flavor(store, "tpu")
    sim.settle()

    assert not suspended(store, "llama")


# ----------------------------------------------------------------------------- namespaceSelector


def test_a_cluster_queue_admits_only_from_namespaces_its_selector_matches(store, sim):
    add_queue(store, quota=32)
    set_queue(store, namespaceSelector={"matchLabels": {"accelops.dev/team": "research"}})
    submit(store, tpu_jobset("llama"))

    sim.settle()

    assert suspended(store, "llama")
    pending = condition(workload_of(store, "llama"), "QuotaReserved")
    assert pending is not None
    assert (pending["reason"], pending["message"]) == (
        "Pending", "Workload namespace doesn't match ClusterQueue selector")
    assert store.get(KUEUE, "clusterqueues", "research-cq")["status"]["pendingWorkloads"] == 1

    store.patch("", "namespaces", NAMESPACE,
                {"metadata": {"labels": {"accelops.dev/team": "research"}}})
    sim.settle()

    assert not suspended(store, "llama")


def test_a_cluster_queue_without_a_namespace_selector_admits_from_no_namespace(store, sim):
    add_queue(store, quota=32)
    set_queue(store, namespaceSelector=None)
    submit(store, tpu_jobset("llama"))

    sim.settle()

    assert suspended(store, "llama")
    assert pending_message(store, "llama") == \
        "Workload namespace doesn't match ClusterQueue selector"


def test_a_workload_from_another_namespace_does_not_hold_up_a_strict_fifo_queue(
    store, sim, clock
):
    add_queue(store, quota=32, strategy="StrictFIFO")
    set_queue(store, namespaceSelector={"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [NAMESPACE]}]})
    store.patch("", "namespaces", NAMESPACE,
                {"metadata": {"labels": {"kubernetes.io/metadata.name": NAMESPACE}}})
    store.create("", "namespaces", {"metadata": {"name": "other", "labels": {
        "kubernetes.io/metadata.name": "other"}}})
    store.create(KUEUE, "localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
        "metadata": {"name": QUEUE, "namespace": "other"},
        "spec": {"clusterQueue": "research-cq"}})
    foreign = tpu_jobset("foreign")
    foreign["metadata"]["namespace"] = "other"
    submit(store, foreign)
    clock.advance(1)
    submit(store, tpu_jobset("local"))

    sim.settle()

    assert store.get("jobset.x-k8s.io", "jobsets", "foreign", "other")["spec"]["suspend"]
    assert not suspended(store, "local")


@pytest.mark.parametrize(("selector", "labels", "matches"), [
    (None, {"team": "a"}, False),
    ({}, {}, True),
    ({"matchLabels": {"team": "a"}}, {"team": "a", "x": "y"}, True),
    ({"matchLabels": {"team": "a"}}, {"team": "b"}, False),
    ({"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]},
     {"team": "b"}, True),
    ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]}, {}, True),
    ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}, {}, True),
    ({"matchLabels": {"team": "a"},
      "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]},
     {"team": "a", "tier": "silver"}, False),
], ids=["null-selects-nothing", "empty-selects-everything", "match-labels", "other-value",
        "in", "not-in-absent-key", "exists", "does-not-exist", "labels-and-expressions"])
def test_a_namespace_selector_matches_as_label_selector_as_selector_does(selector, labels,
                                                                         matches):
    queue = {"spec": {} if selector is None else {"namespaceSelector": selector}}
    assert namespace_matches(queue, labels) is matches


# ----------------------------------------------------------------------------- preemption


def preempting_queue(store: ObjectStore, sim: Any, quota: int = 16,
                     policy: str = LOWER_PRIORITY) -> None:
    add_queue(store, quota=quota)
    set_queue(store, preemption={"withinClusterQueue": policy})
    add_pools(sim, "pool-a", "pool-b")


def running(store: ObjectStore, sim: Any, name: str, **kwargs: Any) -> None:
    submit(store, tpu_jobset(name, slices=1, **kwargs))
    sim.settle()
    assert [p["status"]["phase"] for p in pods_of(store, name)] == ["Running"] * 4


def test_a_high_priority_jobset_preempts_a_running_low_one_which_runs_again_after_it(
    store, sim, clock
):
    preempting_queue(store, sim)
    running(store, sim, "low", priority="low", run_seconds=600)
    clock.advance(60)
    submit(store, tpu_jobset("high", slices=1, priority="high", run_seconds=300))

    sim.kueue.reconcile()

    high = workload_of(store, "high")
    text = PREEMPTED.format(high["metadata"]["uid"])
    victim = workload_of(store, "low")
    assert (condition(victim, "Evicted") or {}).get("reason") == "Preempted"
    assert is_true(victim, "QuotaReserved"), "the quota is held until the pods are gone"
    assert pending_message(store, "high") == (
        "couldn't assign flavors to pod set slice: insufficient unused quota for "
        "google.com/tpu in flavor tpu, 16 more needed. Pending the preemption of 1 workload(s)")

    sim.settle()

    # Requeued, it is pending again: the scheduler's message replaces the eviction's.
    victim = workload_of(store, "low")
    assert [(c["type"], c["status"], c["reason"], c["message"])
            for c in victim["status"]["conditions"]
            if c["type"] in ("Evicted", "Preempted", "Requeued", "QuotaReserved", "Admitted")] \
        == [("QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set slice: "
             "insufficient unused quota for google.com/tpu in flavor tpu, 16 more needed"),
            ("Admitted", "False", "NoReservation", "The workload has no reservation"),
            ("Evicted", "True", "Preempted", text),
            ("Preempted", "True", "InClusterQueue", text),
            ("Requeued", "True", "Preempted", text)]
    assert "admission" not in victim["status"]
    assert suspended(store, "low")
    assert [p["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"]
            for p in store.list("", "pods", NAMESPACE)] == ["high"] * 4
    assert [e["message"] for e in events(store, "Preempted")] == [text]
    assert [(e["involvedObject"]["name"], e["message"]) for e in events(store, "Stopped")] \
        == [("low", text)]
    assert not suspended(store, "high")

    run_until(sim, clock, lambda: is_true(jobset(store, "high"), "Completed"))
    sim.settle()

    readmitted = workload_of(store, "low")
    assert is_true(readmitted, "Admitted")
    assert (condition(readmitted, "Evicted") or {}).get("message") == f"Previously: {text}"
    assert (condition(readmitted, "Preempted") or {}).get("status") == "False"
    run_until(sim, clock, lambda: is_true(jobset(store, "low"), "Completed"))


def test_without_a_preemption_policy_a_high_priority_jobset_waits_for_a_full_queue(
    store, sim
):
    preempting_queue(store, sim, policy=NEVER)
    running(store, sim, "low", priority="low")
    submit(store, tpu_jobset("high", slices=1, priority="high"))

    sim.settle()

    assert not is_true(workload_of(store, "low"), "Evicted")
    assert pending_message(store, "high") == (
        "couldn't assign flavors to pod set slice: insufficient unused quota for "
        "google.com/tpu in flavor tpu, 16 more needed")


@pytest.mark.parametrize(("policy", "preempted"), [
    ("LowerPriority", False), ("LowerOrNewerEqualPriority", True)])
def test_an_equal_priority_jobset_is_preempted_only_when_newer_under_lower_or_newer_equal(
    store, sim, clock, policy, preempted
):
    preempting_queue(store, sim, policy=policy)
    submit(store, tpu_jobset("older", slices=1, queue="late-queue"))  # no such queue yet
    sim.settle()
    clock.advance(1)
    running(store, sim, "newer")
    assert pending_message(store, "older") == "LocalQueue late-queue doesn't exist"

    store.create(KUEUE, "localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
        "metadata": {"name": "late-queue", "namespace": NAMESPACE},
        "spec": {"clusterQueue": "research-cq"}})
    sim.settle()

    assert is_true(workload_of(store, "newer"), "Evicted") is preempted
    assert suspended(store, "older") is not preempted


def test_the_preempting_jobset_keeps_its_place_at_the_head_of_the_queue(store, sim, clock):
    preempting_queue(store, sim, quota=32)
    running(store, sim, "low", priority="low", run_seconds=600)  # 16 of 32
    submit(store, tpu_jobset("high", slices=2, priority="high"))  # 32: needs low's 16
    clock.advance(1)
    submit(store, tpu_jobset("small", slices=1, priority="low"))  # 16 would fit now

    sim.kueue.reconcile()

    assert is_true(workload_of(store, "low"), "Evicted")
    assert suspended(store, "small")
    assert condition(workload_of(store, "small"), "QuotaReserved") is None

    sim.settle()

    assert not suspended(store, "high")
    assert suspended(store, "small")
    assert suspended(store, "low")


def node_selector(body: dict[str, Any]) -> dict[str, str]:
    pod = body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return dict(pod["nodeSelector"])


def test_a_preempted_jobset_gets_back_the_node_selector_it_had_before_its_flavor(store, sim):
    spot = {ACCELERATOR: V5E, "cloud.google.com/gke-spot": "true"}
    add_flavor(store, "v5e-spot", spot)
    add_queue(store, quota=16)
    set_queue(store, preemption={"withinClusterQueue": LOWER_PRIORITY}, resourceGroups=[{
        "coveredResources": ["google.com/tpu"], "flavors": [{"name": "v5e-spot", "resources": [
            {"name": "google.com/tpu", "nominalQuota": 16}]}]}])
    body = tpu_jobset("low", slices=1, priority="low")
    submit(store, body)
    sim.settle()
    assert node_selector(jobset(store, "low"))["cloud.google.com/gke-spot"] == "true"

    submit(store, tpu_jobset("high", slices=1, priority="high"))
    sim.settle()

    assert suspended(store, "low")
    assert node_selector(jobset(store, "low")) == node_selector(body)


def holder(key: str, priority: int, chips: int, reserved_at: str, *,
           evicted: bool = False) -> Holder:
    return Holder(key=key, uid=f"uid-{key}", priority=priority, queued_at="2026-11-21T08:00:00Z",
                  reserved_at=reserved_at, evicted=evicted, usage={"tpu": chips})


def chosen(holders: list[Holder], request: int, *, used: int | None = None,
           priority: int = 1000) -> list[str]:
    total = sum(h.usage["tpu"] for h in holders) if used is None else used
    return sorted(h.key for h in targets(
        LOWER_PRIORITY, priority=priority, queued_at="2026-11-21T09:00:00Z",
        requests={"tpu": request}, preempting={"tpu"}, quotas={"tpu": 64},
        usage={"tpu": total}, holders=holders))


def test_preemption_takes_the_most_recently_admitted_of_the_lowest_priority_first():
    holders = [holder("low-old", 100, 16, "2026-11-21T08:00:00Z"),
               holder("low-new", 100, 16, "2026-11-21T08:05:00Z"),
               holder("medium", 500, 16, "2026-11-21T08:10:00Z"),
               holder("other", 100, 16, "2026-11-21T08:01:00Z")]

    assert chosen(holders, 16) == ["low-new"]
    assert chosen(holders, 48) == ["low-new", "low-old", "other"]
    assert chosen(holders, 64) == ["low-new", "low-old", "medium", "other"]


def test_preemption_gives_back_a_candidate_the_request_fits_without():
    holders = [holder("small", 100, 8, "2026-11-21T08:05:00Z"),
               holder("big", 200, 40, "2026-11-21T08:00:00Z")]

    # 16 free of 64: taking the small one (8) is not enough, the big one is, alone.
    assert chosen(holders, 48, used=48) == ["big"]


def test_preemption_never_takes_equal_or_higher_priority_nor_an_insufficient_set():
    holders = [holder("low", 100, 16, "2026-11-21T08:00:00Z"),
               holder("peer", 1000, 48, "2026-11-21T08:00:00Z")]

    assert chosen(holders, 32) == []
    assert chosen(holders, 16) == ["low"]


def test_a_workload_already_being_preempted_is_counted_before_new_victims():
    holders = [holder("evicting", 500, 16, "2026-11-21T08:00:00Z", evicted=True),
               holder("low", 100, 16, "2026-11-21T08:05:00Z")]

    assert chosen(holders, 16) == ["evicting"]


# ------------------------------------------------------------------- deleting queue objects
IN_USE = "kueue.x-k8s.io/resource-in-use"


def in_use(store: ObjectStore, resource: str, name: str) -> None:
    """The finalizer Kueue's webhook adds to every ClusterQueue and ResourceFlavor."""
    store.patch(KUEUE, resource, name, {"metadata": {"finalizers": [IN_USE]}})


def test_a_deleted_cluster_queue_goes_once_no_workload_holds_quota_in_it(store, sim, clock):
    preempting_queue(store, sim)
    in_use(store, "clusterqueues", "research-cq")
    running(store, sim, "low", priority="low", run_seconds=300)

    store.delete(KUEUE, "clusterqueues", "research-cq")
    sim.settle()

    assert store.try_get(KUEUE, "clusterqueues", "research-cq") is not None, \
        "kept while an admitted workload holds quota in it"
    run_until(sim, clock, lambda: is_true(jobset(store, "low"), "Completed"))
    sim.settle()

    assert store.try_get(KUEUE, "clusterqueues", "research-cq") is None


def test_a_deleted_resource_flavor_goes_once_no_cluster_queue_names_it(store, sim):
    add_queue(store, quota=16)
    in_use(store, "resourceflavors", "tpu")
    in_use(store, "clusterqueues", "research-cq")

    store.delete(KUEUE, "resourceflavors", "tpu")
    sim.settle()
    assert store.try_get(KUEUE, "resourceflavors", "tpu") is not None, \
        "kept while the ClusterQueue names it"

    store.delete(KUEUE, "clusterqueues", "research-cq")
    sim.settle()

    assert store.try_get(KUEUE, "clusterqueues", "research-cq") is None
    assert store.try_get(KUEUE, "resourceflavors", "tpu") is None
