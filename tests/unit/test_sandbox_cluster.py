"""The sandbox cluster simulation, in process: ObjectStore + SimClock, no sockets.

Most tests run the controllers with ``Simulation.settle()`` (passes until nothing
changes) and move simulated time with ``clock.advance``; the last ones start the
simulation's thread and feed it node pool events from a real ``GkeState``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from sandbox.cluster import Simulation, log_entry
from sandbox.cluster.nodes import ClusterRef
from sandbox.common.clock import SimClock
from sandbox.gke import GkeState
from sandbox.kubeapi import ObjectStore
from shared.jobspec.tpu import lookup

PROJECT, LOCATION, CLUSTER_NAME = "acme", "us-central2-b", "tpu"
CLUSTER = f"projects/{PROJECT}/locations/{LOCATION}/clusters/{CLUSTER_NAME}"
NAMESPACE = "research"
QUEUE = "research-queue"
START = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
KUEUE = "kueue.x-k8s.io"
JOBSETS = ("jobset.x-k8s.io", "jobsets")
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODEPOOL = "cloud.google.com/gke-nodepool"


# ----------------------------------------------------------------------------- builders


def tpu_jobset(
    name: str,
    *,
    tpu: str = "v5litepod-16",
    slices: int = 2,
    run_seconds: int = 600,
    outcome: str = "succeed",
    max_restarts: int = 0,
    priority: str = "medium",
    queue: str | None = QUEUE,
    suspend: bool = True,
) -> dict[str, Any]:
    """A JobSet shaped like the one accelops renders (one replicated job per slice)."""
    shape = lookup(tpu)
    chips = str(shape.chips_per_vm)
    labels = {"kueue.x-k8s.io/priority-class": priority}
    if queue:
        labels["kueue.x-k8s.io/queue-name"] = queue
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels,
                     "annotations": {EXCLUSIVE: NODEPOOL}},
        "spec": {
            "suspend": suspend,
            "failurePolicy": {"maxRestarts": max_restarts},
            "replicatedJobs": [{
                "name": "slice",
                "replicas": slices,
                "template": {"spec": {
                    "parallelism": shape.vms,
                    "completions": shape.vms,
                    "completionMode": "Indexed",
                    "backoffLimit": 0,
                    "template": {"spec": {
                        "restartPolicy": "Never",
                        "nodeSelector": shape.node_selector(),
                        "containers": [{
                            "name": "main",
                            "image": "us-docker.pkg.dev/acme/train:1",
                            "env": [
                                {"name": "ACCELOPS_SANDBOX_RUN_SECONDS",
                                 "value": str(run_seconds)},
                                {"name": "ACCELOPS_SANDBOX_OUTCOME", "value": outcome},
                            ],
                            "resources": {"requests": {"google.com/tpu": chips},
                                          "limits": {"google.com/tpu": chips}},
                        }],
                    }},
                }},
            }],
        },
    }


def tpu_pool(name: str, *, tpu: str = "v5litepod-16", nodes: int | None = None,
             spot: bool = False, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Container API NodePool as the sandbox GKE API reports it."""
    shape = lookup(tpu)
    pool: dict[str, Any] = {
        "name": name,
        "initialNodeCount": shape.vms,
        "nodeCount": shape.vms if nodes is None else nodes,
        "config": {"machineType": shape.machine_type, "spot": spot, "labels": labels or {}},
        "status": "RUNNING",
    }
    if shape.multi_host:
        pool["placementPolicy"] = {"type": "COMPACT", "tpuTopology": shape.topology}
    return pool


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture
def clock() -> SimClock:
    # Practically frozen: simulated time moves only when a test advances it.
    return SimClock(speed=1e-6, start=START)


@pytest.fixture
def store(clock: SimClock) -> ObjectStore:
    store = ObjectStore(clock=clock)
    store.create("", "namespaces", {"metadata": {"name": NAMESPACE}})
    return store


@pytest.fixture
def sim(store: ObjectStore, clock: SimClock) -> Simulation:
    return Simulation(store, clock, cluster=CLUSTER)


# The WorkloadPriorityClasses accelops' manifests create (manifests/base).
PRIORITIES = {"low": 100, "medium": 500, "high": 1000}


def add_priorities(store: ObjectStore) -> None:
    """The priority classes job requests name: Kueue makes no Workload without them."""
    for name, value in PRIORITIES.items():
        store.create(KUEUE, "workloadpriorityclasses", {
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass",
            "metadata": {"name": name}, "value": value})


def add_queue(store: ObjectStore, quota: int, *, strategy: str | None = None) -> None:
    """One ClusterQueue with a single flavor ``tpu`` (a ResourceFlavor without
    nodeLabels), its LocalQueue and the priority classes."""
    add_priorities(store)
    store.create(KUEUE, "resourceflavors", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
        "metadata": {"name": "tpu"}, "spec": {}})
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": [{
        "coveredResources": ["google.com/tpu"],
        "flavors": [{"name": "tpu", "resources": [
            {"name": "google.com/tpu", "nominalQuota": quota}]}]}]}
    if strategy:
        spec["queueingStrategy"] = strategy
    store.create(KUEUE, "clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
        "metadata": {"name": "research-cq"}, "spec": spec})
    store.create(KUEUE, "localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
        "metadata": {"name": QUEUE, "namespace": NAMESPACE},
        "spec": {"clusterQueue": "research-cq"}})


def submit(store: ObjectStore, body: dict[str, Any]) -> None:
    store.create(*JOBSETS, body)


def add_pools(sim: Simulation, *names: str, **kwargs: Any) -> None:
    for name in names:
        sim.on_pool_event("POOL_RUNNING", CLUSTER, tpu_pool(name, **kwargs))


def jobset(store: ObjectStore, name: str) -> dict[str, Any]:
    return store.get(*JOBSETS, name, NAMESPACE)


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c["type"] == kind), None)


def is_true(obj: dict[str, Any], kind: str) -> bool:
    found = condition(obj, kind)
    return found is not None and found["status"] == "True"


def pods(store: ObjectStore, **labels: str) -> list[dict[str, Any]]:
    selector = ",".join(f"{k}={v}" for k, v in labels.items()) or None
    return store.list("", "pods", NAMESPACE, label_selector=selector)


def pods_of(store: ObjectStore, jobset_name: str) -> list[dict[str, Any]]:
    return store.list("", "pods", NAMESPACE,
                      label_selector=f"jobset.sigs.k8s.io/jobset-name={jobset_name}")


def node_pool_of(store: ObjectStore, node_name: str) -> str:
    return str(store.get("", "nodes", node_name)["metadata"]["labels"][NODEPOOL])


def events(store: ObjectStore, reason: str) -> list[dict[str, Any]]:
    return [e for e in store.list("", "events", NAMESPACE) if e["reason"] == reason]


def run_until(sim: Simulation, clock: SimClock, done: Callable[[], bool], *,
              step: float = 60, limit: float = 7200) -> None:
    """Advance simulated time in steps, settling after each, until ``done()``."""
    sim.settle()
    waited = 0.0
    while not done():
        assert waited < limit, "the simulated cluster never got there"
        clock.advance(step)
        waited += step
        sim.settle()


# ----------------------------------------------------------------------------- Kueue


def test_a_two_slice_v5e_16_jobset_with_enough_quota_is_admitted(store, sim):
    add_queue(store, quota=32)
    submit(store, tpu_jobset("llama"))

    sim.settle()

    admitted = jobset(store, "llama")
    assert admitted["spec"]["suspend"] is False
    assert admitted["metadata"]["annotations"]["sandbox.accelops.dev/admitted-at"] \
        == "2026-11-21T08:00:00Z"
    [workload] = store.list(KUEUE, "workloads", NAMESPACE)
    assert re.fullmatch(r"jobset-llama-[0-9a-f]{5}", workload["metadata"]["name"])
    assert workload["metadata"]["ownerReferences"][0]["uid"] == admitted["metadata"]["uid"]
    assert is_true(workload, "QuotaReserved")
    assert is_true(workload, "Admitted")
    assert workload["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] \
        == {"google.com/tpu": "32"}
    usage = store.get(KUEUE, "clusterqueues", "research-cq")["status"]["flavorsUsage"]
    assert usage[0]["resources"][0]["total"] == "32"


def test_a_jobset_needing_more_than_the_free_quota_waits_until_another_one_finishes(
    store, sim, clock
):
    add_queue(store, quota=32)
    add_pools(sim, "pool-a", "pool-b")
    submit(store, tpu_jobset("first", run_seconds=600))
    sim.settle()
    clock.advance(10)
    submit(store, tpu_jobset("second"))
    sim.settle()

    waiting = jobset(store, "second")
    assert waiting["spec"]["suspend"] is True
    assert not pods_of(store, "second")
    [workload] = [w for w in store.list(KUEUE, "workloads", NAMESPACE)
                  if "second" in w["metadata"]["name"]]
    pending = condition(workload, "QuotaReserved")
    assert pending is not None
    assert pending["status"] == "False"
    assert "insufficient unused quota for google.com/tpu" in pending["message"]
    assert "32 more needed" in pending["message"]

    run_until(sim, clock, lambda: is_true(jobset(store, "first"), "Completed"))

    assert jobset(store, "second")["spec"]["suspend"] is False


def test_higher_priority_jobsets_are_admitted_before_older_lower_priority_ones(store, sim):
    add_queue(store, quota=32)
    submit(store, tpu_jobset("older-low", priority="low"))
    submit(store, tpu_jobset("newer-high", priority="high"))

    sim.settle()

    assert jobset(store, "newer-high")["spec"]["suspend"] is False
    assert jobset(store, "older-low")["spec"]["suspend"] is True


def test_a_smaller_jobset_may_pass_a_bigger_one_unless_the_queue_is_strict_fifo(
    store, sim, clock
):
    add_queue(store, quota=40)
    submit(store, tpu_jobset("running", slices=1))  # 16 chips
    sim.settle()
    clock.advance(1)
    submit(store, tpu_jobset("big", slices=2))  # 32 chips: does not fit in 24
    clock.advance(1)
    submit(store, tpu_jobset("small", slices=1))  # 16 chips: fits

    sim.settle()

    assert jobset(store, "big")["spec"]["suspend"] is True
    assert jobset(store, "small")["spec"]["suspend"] is False


def test_a_jobset_without_a_queue_label_or_with_a_missing_queue_stays_suspended_and_says_why(
    store, sim
):
    add_priorities(store)
    submit(store, tpu_jobset("no-label", queue=None))
    submit(store, tpu_jobset("no-queue", queue="nonexistent"))

    sim.settle()
    sim.settle()

    assert jobset(store, "no-label")["spec"]["suspend"] is True
    assert jobset(store, "no-queue")["spec"]["suspend"] is True
    [missing_label] = events(store, "QueueNameMissing")
    assert missing_label["involvedObject"]["name"] == "no-label"
    [workload] = store.list(KUEUE, "workloads", NAMESPACE)
    pending = condition(workload, "QuotaReserved")
    assert pending is not None
    assert pending["message"] == "LocalQueue nonexistent doesn't exist"


def test_a_deactivated_workload_suspends_its_jobset_and_frees_the_quota(store, sim):
    add_queue(store, quota=32)
    submit(store, tpu_jobset("llama"))
    sim.settle()
    [workload] = store.list(KUEUE, "workloads", NAMESPACE)

    store.patch(KUEUE, "workloads", workload["metadata"]["name"], {"spec": {"active": False}},
                namespace=NAMESPACE)
    sim.settle()

    assert jobset(store, "llama")["spec"]["suspend"] is True
    evicted = store.list(KUEUE, "workloads", NAMESPACE)[0]
    assert (condition(evicted, "Evicted") or {}).get("reason") == "Deactivated"
    assert (condition(evicted, "Requeued") or {}).get("status") == "False"
    assert [e["message"] for e in events(store, "EvictedDueToDeactivated")] == [
        "The workload is deactivated"]
    cq = store.get(KUEUE, "clusterqueues", "research-cq")
    assert cq["status"]["admittedWorkloads"] == 0


# ----------------------------------------------------------------------------- ResourceFlavors

V5E, V4 = "tpu-v5-lite-podslice", "tpu-v4-podslice"
ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"


def add_flavor(store: ObjectStore, name: str, node_labels: dict[str, str] | None = None) -> None:
    spec = {"nodeLabels": node_labels} if node_labels is not None else {}
    store.create(KUEUE, "resourceflavors", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
        "metadata": {"name": name}, "spec": spec})


def add_flavored_queue(store: ObjectStore, quotas: dict[str, int]) -> None:
    """A ClusterQueue shaped like the production manifests: one resource group,
    one ``google.com/tpu`` flavor per accelerator, in the given order."""
    add_priorities(store)
    store.create(KUEUE, "clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
        "metadata": {"name": "research-cq"},
        "spec": {"namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
                 "resourceGroups": [{"coveredResources": ["google.com/tpu"], "flavors": [
                     {"name": name, "resources": [
                         {"name": "google.com/tpu", "nominalQuota": quota}]}
                     for name, quota in quotas.items()]}]}})
    store.create(KUEUE, "localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
        "metadata": {"name": QUEUE, "namespace": NAMESPACE},
        "spec": {"clusterQueue": "research-cq"}})


def add_accelerator_flavors(store: ObjectStore, quotas: dict[str, int]) -> None:
    for name in quotas:
        add_flavor(store, name, {ACCELERATOR: name})
    add_flavored_queue(store, quotas)


def workload_of(store: ObjectStore, jobset_name: str) -> dict[str, Any]:
    [found] = [w for w in store.list(KUEUE, "workloads", NAMESPACE)
               if w["metadata"]["name"].startswith(f"jobset-{jobset_name}-")]
    return found


def admitted_flavors(store: ObjectStore, jobset_name: str) -> list[str]:
    admission = workload_of(store, jobset_name)["status"]["admission"]
    return [a["flavors"]["google.com/tpu"] for a in admission["podSetAssignments"]]


def flavor_usage(store: ObjectStore) -> dict[str, str]:
    cq = store.get(KUEUE, "clusterqueues", "research-cq")
    return {f["name"]: f["resources"][0]["total"] for f in cq["status"]["flavorsUsage"]}


def pending_message(store: ObjectStore, jobset_name: str) -> str:
    found = condition(workload_of(store, jobset_name), "QuotaReserved")
    assert found is not None
    assert found["status"] == "False"
    return str(found["message"])


def test_a_jobset_for_each_accelerator_is_admitted_in_its_own_flavor(store, sim):
    add_accelerator_flavors(store, {V5E: 256, V4: 256})
    submit(store, tpu_jobset("gemma", tpu="v5litepod-16"))
    submit(store, tpu_jobset("llama", tpu="v4-32"))

    sim.settle()

    assert jobset(store, "gemma")["spec"]["suspend"] is False
    assert jobset(store, "llama")["spec"]["suspend"] is False
    assert admitted_flavors(store, "gemma") == [V5E]
    assert admitted_flavors(store, "llama") == [V4]
    assert flavor_usage(store) == {V5E: "32", V4: "32"}


def test_quota_used_up_in_one_flavor_does_not_hold_back_jobsets_of_another(store, sim):
    add_accelerator_flavors(store, {V5E: 32, V4: 32})
    submit(store, tpu_jobset("first", tpu="v5litepod-16"))
    sim.settle()
    submit(store, tpu_jobset("second", tpu="v5litepod-16"))
    submit(store, tpu_jobset("llama", tpu="v4-32"))

    sim.settle()

    assert jobset(store, "second")["spec"]["suspend"] is True
    assert pending_message(store, "second") == (
        f"couldn't assign flavors to pod set slice: flavor {V4} doesn't match node affinity, "
        f"insufficient unused quota for google.com/tpu in flavor {V5E}, 32 more needed")
    assert jobset(store, "llama")["spec"]["suspend"] is False
    assert admitted_flavors(store, "llama") == [V4]
    assert flavor_usage(store) == {V5E: "32", V4: "32"}


def test_a_jobset_whose_node_selector_matches_no_flavor_stays_pending_and_says_so(store, sim):
    add_accelerator_flavors(store, {V5E: 256, V4: 256})
    submit(store, tpu_jobset("big", tpu="v5p-16", slices=1))

    sim.settle()

    assert jobset(store, "big")["spec"]["suspend"] is True
    assert pending_message(store, "big") == (
        f"couldn't assign flavors to pod set slice: flavor {V4} doesn't match node affinity, "
        f"flavor {V5E} doesn't match node affinity")
    assert flavor_usage(store) == {V5E: "0", V4: "0"}


def test_a_jobset_selecting_its_accelerator_by_required_node_affinity_gets_that_flavor(
    store, sim
):
    add_accelerator_flavors(store, {V5E: 256, V4: 256})
    body = tpu_jobset("llama", tpu="v4-32")
    pod_spec = body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    del pod_spec["nodeSelector"][ACCELERATOR]
    pod_spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": ACCELERATOR, "operator": "In", "values": [V4]}]}]}}}
    submit(store, body)

    sim.settle()

    assert admitted_flavors(store, "llama") == [V4]
    admitted = jobset(store, "llama")["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert admitted["template"]["spec"]["nodeSelector"][ACCELERATOR] == V4


def test_a_full_flavor_spills_over_into_the_next_matching_one_whose_labels_the_pods_get(
    store, sim
):
    add_flavor(store, "v5e-reserved", {ACCELERATOR: V5E})
    add_flavor(store, "v5e-spot", {ACCELERATOR: V5E, "cloud.google.com/gke-spot": "true"})
    add_flavored_queue(store, {"v5e-reserved": 32, "v5e-spot": 64})
    submit(store, tpu_jobset("first"))
    sim.settle()
    submit(store, tpu_jobset("second"))

    sim.settle()

    assert admitted_flavors(store, "first") == ["v5e-reserved"]
    assert admitted_flavors(store, "second") == ["v5e-spot"]
    spec = jobset(store, "second")["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert spec["template"]["spec"]["nodeSelector"] == {
        ACCELERATOR: V5E, "cloud.google.com/gke-tpu-topology": "4x4",
        "cloud.google.com/gke-spot": "true"}
    assert flavor_usage(store) == {"v5e-reserved": "32", "v5e-spot": "32"}


def test_a_cluster_queue_naming_a_missing_resource_flavor_admits_nothing_until_it_exists(
    store, sim
):
    add_flavor(store, V5E, {ACCELERATOR: V5E})
    add_flavored_queue(store, {V5E: 256, V4: 256})
    submit(store, tpu_jobset("gemma", tpu="v5litepod-16"))

    sim.settle()

    assert jobset(store, "gemma")["spec"]["suspend"] is True
    pending = condition(workload_of(store, "gemma"), "QuotaReserved")
    assert pending is not None
    assert (pending["reason"], pending["message"]) == (
        "Inadmissible", "ClusterQueue research-cq is inactive")
    active = condition(store.get(KUEUE, "clusterqueues", "research-cq"), "Active")
    assert active is not None
    assert (active["status"], active["reason"], active["message"]) == (
        "False", "FlavorNotFound",
        f"Can't admit new workloads: references missing ResourceFlavor(s): [{V4}].")
    local_queue = condition(store.get(KUEUE, "localqueues", QUEUE, NAMESPACE), "Active")
    assert local_queue is not None
    assert local_queue["reason"] == "ClusterQueueIsInactive"

    add_flavor(store, V4, {ACCELERATOR: V4})
    sim.settle()

    assert jobset(store, "gemma")["spec"]["suspend"] is False
    assert is_true(store.get(KUEUE, "clusterqueues", "research-cq"), "Active")


def test_a_flavor_without_node_labels_admits_without_touching_the_pods_node_selector(
    store, sim
):
    add_queue(store, quota=32)
    body = tpu_jobset("llama")
    submit(store, body)
    submit(store, tpu_jobset("waits"))

    sim.settle()

    assert admitted_flavors(store, "llama") == ["tpu"]
    admitted = jobset(store, "llama")["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert admitted["template"]["spec"]["nodeSelector"] \
        == body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"]
    assert pending_message(store, "waits") == ("couldn't assign flavors to pod set slice: "
        "insufficient unused quota for google.com/tpu in flavor tpu, 32 more needed")
    assert flavor_usage(store) == {"tpu": "32"}
    assert is_true(store.get(KUEUE, "clusterqueues", "research-cq"), "Active")


# ----------------------------------------------------------------------------- nodes


def test_a_running_node_pool_becomes_tpu_nodes_labelled_and_tainted_like_gke(store, sim):
    add_pools(sim, "slice-0", spot=True, labels={"accelops.dev/jobset": "llama"})
    sim.settle()

    nodes = store.list("", "nodes")
    assert len(nodes) == 4
    for node in nodes:
        name = node["metadata"]["name"]
        assert re.fullmatch(r"gke-tpu-slice-0-[0-9a-f]{8}-[a-z0-9]{4}", name)
        labels = node["metadata"]["labels"]
        assert labels[NODEPOOL] == "slice-0"
        assert labels["cloud.google.com/gke-tpu-accelerator"] == "tpu-v5-lite-podslice"
        assert labels["cloud.google.com/gke-tpu-topology"] == "4x4"
        assert labels["kubernetes.io/hostname"] == name
        assert labels["node.kubernetes.io/instance-type"] == "ct5lp-hightpu-4t"
        assert labels["cloud.google.com/gke-spot"] == "true"
        assert labels["accelops.dev/jobset"] == "llama"
        assert {"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"} \
            in node["spec"]["taints"]
        assert node["status"]["allocatable"]["google.com/tpu"] == "4"
        assert node["status"]["capacity"]["google.com/tpu"] == "4"
        assert is_true(node, "Ready")
    assert len({n["metadata"]["name"].rsplit("-", 1)[0] for n in nodes}) == 1


def test_a_single_host_pool_gets_the_topology_of_its_machine_type(store, sim):
    add_pools(sim, "small", tpu="v5litepod-8")
    sim.settle()

    [node] = store.list("", "nodes")
    assert node["metadata"]["labels"]["cloud.google.com/gke-tpu-topology"] == "2x4"
    assert node["status"]["allocatable"]["google.com/tpu"] == "8"
    assert "cloud.google.com/gke-spot" not in node["metadata"]["labels"]


def test_resizing_a_pool_adds_and_removes_its_nodes(store, sim):
    sim.on_pool_event("POOL_RUNNING", CLUSTER, tpu_pool("cpu", tpu="v5litepod-4", nodes=1))
    sim.on_pool_event("POOL_RESIZED", CLUSTER, tpu_pool("cpu", tpu="v5litepod-4", nodes=3))
    sim.settle()
    assert len(store.list("", "nodes")) == 3

    sim.on_pool_event("POOL_RESIZED", CLUSTER, tpu_pool("cpu", tpu="v5litepod-4", nodes=0))
    sim.settle()
    assert store.list("", "nodes") == []


def test_pool_events_of_another_cluster_create_no_nodes(store, sim):
    sim.on_pool_event("POOL_RUNNING", "projects/acme/locations/us-east5-a/clusters/other",
                      tpu_pool("elsewhere"))
    sim.settle()

    assert store.list("", "nodes") == []


def test_deleting_a_pool_removes_its_nodes_and_fails_the_pods_running_there(
    store, sim
):
    add_queue(store, quota=32)
    add_pools(sim, "pool-a", "pool-b")
    submit(store, tpu_jobset("llama"))
    sim.settle()
    assert all(p["status"]["phase"] == "Running" for p in pods_of(store, "llama"))
    victims = [p["metadata"]["name"] for p in pods_of(store, "llama")
               if node_pool_of(store, p["spec"]["nodeName"]) == "pool-a"]

    sim.nodes.on_pool_event("POOL_DELETED", CLUSTER, tpu_pool("pool-a", nodes=0))

    assert {node_pool_of(store, n["metadata"]["name"]) for n in store.list("", "nodes")} \
        == {"pool-b"}
    lost = [store.get("", "pods", name, NAMESPACE) for name in victims]
    assert len(lost) == 4
    for pod in lost:
        assert pod["status"]["phase"] == "Failed"
        assert pod["status"]["reason"] == "NodeLost"
        assert is_true(pod, "DisruptionTarget")
        assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137


# ----------------------------------------------------------------------------- scheduling


def test_each_slice_runs_on_a_node_pool_of_its_own(store, sim):
    add_queue(store, quota=32)
    add_pools(sim, "pool-a", "pool-b", "pool-c")
    submit(store, tpu_jobset("llama"))

    sim.settle()

    running = pods_of(store, "llama")
    assert len(running) == 8
    assert all(p["status"]["phase"] == "Running" for p in running)
    pools_by_job: dict[str, set[str]] = {}
    jobs_by_pool: dict[str, set[str]] = {}
    for pod in running:
        job = pod["metadata"]["labels"]["batch.kubernetes.io/job-name"]
        pool = node_pool_of(store, pod["spec"]["nodeName"])
        pools_by_job.setdefault(job, set()).add(pool)
        jobs_by_pool.setdefault(pool, set()).add(job)
    assert all(len(pools) == 1 for pools in pools_by_job.values())
    assert all(len(jobs) == 1 for jobs in jobs_by_pool.values())
    assert len(jobs_by_pool) == 2
    assert len({p["spec"]["nodeName"] for p in running}) == 8
    assert all(is_true(p, "PodScheduled") and p["status"]["startTime"] for p in running)


def test_two_slices_never_share_a_pool_even_when_it_has_room_for_both(store, sim):
    add_queue(store, quota=32)
    # One pool of 8 v5e hosts with the 4x4 labels: room for both 4-host slices.
    sim.on_pool_event("POOL_RUNNING", CLUSTER, tpu_pool("big", nodes=8))
    submit(store, tpu_jobset("llama"))

    sim.settle()

    phases = sorted(p["status"]["phase"] for p in pods_of(store, "llama"))
    assert phases == ["Pending"] * 4 + ["Running"] * 4
    waiting = [p for p in pods_of(store, "llama") if p["status"]["phase"] == "Pending"]
    assert "didn't match pod anti-affinity rules" in \
        condition(waiting[0], "PodScheduled")["message"]  # type: ignore[index]


def test_a_slice_starts_only_when_all_its_hosts_fit_in_one_pool(store, sim):
    add_queue(store, quota=32)
    sim.on_pool_event("POOL_RUNNING", CLUSTER, tpu_pool("short", nodes=3))
    submit(store, tpu_jobset("llama", slices=1))

    sim.settle()

    assert [p["status"]["phase"] for p in pods_of(store, "llama")] == ["Pending"] * 4
    assert all(not p["spec"].get("nodeName") for p in pods_of(store, "llama"))


def test_pods_without_matching_nodes_stay_pending_with_one_failed_scheduling_event_each(
    store, sim, clock
):
    add_queue(store, quota=32)
    sim.on_pool_event("POOL_RUNNING", CLUSTER, tpu_pool("v4", tpu="v4-32"))
    seen: list[tuple[str, str]] = []
    sim.on_unschedulable(lambda pod, event: seen.append((pod["metadata"]["name"],
                                                         event["reason"])))
    submit(store, tpu_jobset("llama"))

    for _ in range(3):
        sim.settle()
        clock.advance(30)

    waiting = pods_of(store, "llama")
    assert len(waiting) == 8
    for pod in waiting:
        assert pod["status"]["phase"] == "Pending"
        scheduled = condition(pod, "PodScheduled")
        assert scheduled is not None
        assert scheduled["status"] == "False"
        assert scheduled["reason"] == "Unschedulable"
        assert scheduled["message"].startswith(
            "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector.")
    failed = events(store, "FailedScheduling")
    assert sorted(e["involvedObject"]["name"] for e in failed) \
        == sorted(p["metadata"]["name"] for p in waiting)
    assert all(e["type"] == "Warning" and e["involvedObject"]["kind"] == "Pod" for e in failed)
    assert sorted(seen) == sorted((p["metadata"]["name"], "FailedScheduling") for p in waiting)


def test_pending_pods_start_once_a_matching_pool_comes_up(store, sim):
    add_queue(store, quota=32)
    submit(store, tpu_jobset("llama", slices=1))
    sim.settle()
    assert events(store, "FailedScheduling")

    add_pools(sim, "late")
    sim.settle()

    assert [p["status"]["phase"] for p in pods_of(store, "llama")] == ["Running"] * 4


def test_a_cpu_pod_cannot_land_on_a_tainted_tpu_node(store, sim):
    add_pools(sim, "tpu-only")
    store.create("", "pods", {"metadata": {"name": "web", "namespace": NAMESPACE},
                              "spec": {"containers": [{"name": "web", "image": "nginx"}]}})
    sim.settle()

    pod = store.get("", "pods", "web", NAMESPACE)
    assert pod["status"]["phase"] == "Pending"
    assert "4 node(s) had untolerated taint {google.com/tpu: present}" in \
        condition(pod, "PodScheduled")["message"]  # type: ignore[index]


# ----------------------------------------------------------------------------- JobSet and Job


def test_jobs_and_pods_carry_the_labels_and_names_the_real_controllers_give_them(store, sim):
    add_queue(store, quota=32)
    add_pools(sim, "pool-a", "pool-b")
    submit(store, tpu_jobset("llama"))
    sim.settle()
    owner = jobset(store, "llama")

    jobs = store.list("batch", "jobs", NAMESPACE)
    assert [j["metadata"]["name"] for j in jobs] == ["llama-slice-0", "llama-slice-1"]
    job = jobs[1]
    labels = job["metadata"]["labels"]
    assert labels["jobset.sigs.k8s.io/jobset-name"] == "llama"
    assert labels["jobset.sigs.k8s.io/replicatedjob-name"] == "slice"
    assert labels["jobset.sigs.k8s.io/job-index"] == "1"
    assert labels["jobset.sigs.k8s.io/restart-attempt"] == "0"
    assert labels["jobset.sigs.k8s.io/replicatedjob-replicas"] == "2"
    assert re.fullmatch(r"[0-9a-f]{40}", labels["jobset.sigs.k8s.io/job-key"])
    assert job["metadata"]["annotations"][EXCLUSIVE] == NODEPOOL
    assert job["metadata"]["ownerReferences"][0]["uid"] == owner["metadata"]["uid"]
    assert job["metadata"]["ownerReferences"][0]["kind"] == "JobSet"

    [pod] = pods(store, **{"batch.kubernetes.io/job-name": "llama-slice-1",
                           "batch.kubernetes.io/job-completion-index": "2"})
    assert re.fullmatch(r"llama-slice-1-2-[a-z0-9]{5}", pod["metadata"]["name"])
    assert pod["metadata"]["labels"]["controller-uid"] == job["metadata"]["uid"]
    assert pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == "llama"
    assert pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "2"
    assert pod["spec"]["hostname"] == "llama-slice-1-2"
    assert pod["spec"]["subdomain"] == "llama"
    assert pod["spec"]["nodeSelector"] == lookup("v5litepod-16").node_selector()
    assert {"name": "TPU_WORKER_ID", "value": "2"} in pod["spec"]["containers"][0]["env"]
    assert store.get("", "services", "llama", NAMESPACE)["spec"]["clusterIP"] == "None"


def test_pods_run_for_their_simulated_time_and_the_jobset_completes(store, sim, clock):
    add_queue(store, quota=32)
    add_pools(sim, "pool-a", "pool-b")
    submit(store, tpu_jobset("llama", run_seconds=600))
    sim.settle()

    clock.advance(599)
    sim.settle()
    assert not is_true(jobset(store, "llama"), "Completed")

    clock.advance(2)
    sim.settle()

    done = jobset(store, "llama")
    completed = condition(done, "Completed")
    assert completed is not None
    assert completed["status"] == "True"
    assert completed["reason"] == "AllJobsCompleted"
    assert completed["lastTransitionTime"] == "2026-11-21T08:10:01Z"
    assert done["status"]["terminalState"] == "Completed"
    assert done["status"]["replicatedJobsStatus"][0]["succeeded"] == 2
    for pod in pods_of(store, "llama"):
        assert pod["status"]["phase"] == "Succeeded"
        terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert terminated["exitCode"] == 0
        assert terminated["reason"] == "Completed"
    for job in store.list("batch", "jobs", NAMESPACE):
        assert is_true(job, "Complete")
        assert job["status"]["succeeded"] == 4
        assert job["status"]["completedIndexes"] == "0-3"
    cq = store.get(KUEUE, "clusterqueues", "research-cq")
    assert cq["status"]["flavorsUsage"][0]["resources"][0]["total"] == "0"
    assert is_true(store.list(KUEUE, "workloads", NAMESPACE)[0], "Finished")


def test_a_failing_jobset_with_max_restarts_1_restarts_once_and_then_fails(
    store, sim, clock
):
    add_queue(store, quota=32)
    add_pools(sim, "pool-a", "pool-b")
    submit(store, tpu_jobset("flaky", outcome="fail", max_restarts=1, run_seconds=300))
    sim.settle()

    clock.advance(301)
    sim.settle()
    restarted = jobset(store, "flaky")
    assert restarted["status"]["restarts"] == 1
    assert not is_true(restarted, "Failed")
    assert {j["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"]
            for j in store.list("batch", "jobs", NAMESPACE)} == {"1"}
    assert [p["status"]["phase"] for p in pods_of(store, "flaky")] == ["Running"] * 8

    clock.advance(301)
    sim.settle()
    failed = jobset(store, "flaky")
    assert failed["status"]["restarts"] == 1
    reason = condition(failed, "Failed")
    assert reason is not None
    assert reason["status"] == "True"
    assert reason["reason"] == "ReachedMaxRestarts"
    assert failed["status"]["terminalState"] == "Failed"
    terminated = pods_of(store, "flaky")[0]["status"]["containerStatuses"][0]["state"]
    assert terminated["terminated"]["exitCode"] == 1
    job = store.list("batch", "jobs", NAMESPACE)[0]
    assert condition(job, "Failed")["reason"] == "BackoffLimitExceeded"  # type: ignore[index]


def test_deleting_a_jobset_removes_its_jobs_pods_and_workload(store, sim):
    add_queue(store, quota=32)
    add_pools(sim, "pool-a", "pool-b")
    submit(store, tpu_jobset("llama"))
    sim.settle()
    assert len(pods_of(store, "llama")) == 8

    store.delete(*JOBSETS, "llama", NAMESPACE)
    sim.settle()

    assert store.list("batch", "jobs", NAMESPACE) == []
    assert store.list("", "pods", NAMESPACE) == []
    assert store.list(KUEUE, "workloads", NAMESPACE) == []
    assert store.try_get("", "services", "llama", NAMESPACE) is None


def test_a_running_jobset_suspended_again_loses_its_pods_and_gets_them_back_on_resume(
    store, sim
):
    add_pools(sim, "pool-a", "pool-b")
    submit(store, tpu_jobset("manual", queue=None, suspend=False))
    sim.settle()
    assert len(pods_of(store, "manual")) == 8

    store.patch(*JOBSETS, "manual", {"spec": {"suspend": True}}, namespace=NAMESPACE)
    sim.settle()

    assert pods_of(store, "manual") == []
    suspended = jobset(store, "manual")
    assert is_true(suspended, "Suspended")
    assert all(j["spec"]["suspend"] for j in store.list("batch", "jobs", NAMESPACE))

    store.patch(*JOBSETS, "manual", {"spec": {"suspend": False}}, namespace=NAMESPACE)
    sim.settle()

    assert [p["status"]["phase"] for p in pods_of(store, "manual")] == ["Running"] * 8
    resumed = condition(jobset(store, "manual"), "Suspended")
    assert resumed is not None
    assert resumed["status"] == "False"


# ----------------------------------------------------------------------------- wiring


def test_the_running_simulation_follows_gke_node_pools_and_the_clock(store, clock):
    gke = GkeState(clock)
    gke.add_cluster(PROJECT, LOCATION, CLUSTER_NAME, "http://127.0.0.1:1")
    add_queue(store, quota=32)
    with Simulation(store, clock, gke_state=gke, cluster=CLUSTER, tick=0.01):
        submit(store, tpu_jobset("llama", run_seconds=600))
        for name in ("pool-a", "pool-b"):
            gke.create_node_pool(PROJECT, LOCATION, CLUSTER_NAME, {
                "name": name, "initialNodeCount": 4,
                "config": {"machineType": "ct5lp-hightpu-4t"},
                "placementPolicy": {"type": "COMPACT", "tpuTopology": "4x4"}})
            clock.advance(181)
            gke.tick()
        wait_for(lambda: sum(p["status"]["phase"] == "Running"
                             for p in pods_of(store, "llama")) == 8)
        assert len(store.list("", "nodes")) == 8

        clock.advance(601)
        wait_for(lambda: is_true(jobset(store, "llama"), "Completed"))

        gke.delete_node_pool(PROJECT, LOCATION, CLUSTER_NAME, "pool-a")
        clock.advance(61)
        gke.tick()
        wait_for(lambda: len(store.list("", "nodes")) == 4)


def test_a_restarted_simulation_matches_nodes_to_the_pools_gke_still_has(store, clock):
    gke = GkeState(clock)
    gke.add_cluster(PROJECT, LOCATION, CLUSTER_NAME, "http://127.0.0.1:1")
    gke.create_node_pool(PROJECT, LOCATION, CLUSTER_NAME, {
        "name": "kept", "initialNodeCount": 1, "config": {"machineType": "ct5lp-hightpu-4t"}})
    clock.advance(91)
    gke.tick()  # nobody listens: the pool is RUNNING but has no Nodes yet
    stale = Simulation(store, clock, cluster=CLUSTER)
    stale.on_pool_event("POOL_RUNNING", CLUSTER, tpu_pool("gone", tpu="v5litepod-4"))
    stale.settle()

    sim = Simulation(store, clock, gke_state=gke, cluster=CLUSTER)
    sim.sync_pools()
    sim.settle()

    assert [node_pool_of(store, n["metadata"]["name"]) for n in store.list("", "nodes")] \
        == ["kept"]


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    give_up = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < give_up, "timed out waiting for the simulation"
        time.sleep(0.01)


def test_a_failed_scheduling_event_becomes_the_log_entry_a_sink_would_publish(store, sim):
    add_queue(store, quota=32)
    published: list[dict[str, Any]] = []
    ref = ClusterRef.parse(CLUSTER)
    assert ref is not None
    sim.on_unschedulable(lambda pod, event: published.append(
        log_entry(event, ref, "2026-11-21T08:00:01Z")))
    submit(store, tpu_jobset("llama", slices=1))
    sim.settle()

    assert len(published) == 4
    entry = published[0]
    assert entry["resource"]["type"] == "k8s_pod"
    labels = entry["resource"]["labels"]
    assert labels["namespace_name"] == NAMESPACE
    assert labels["pod_name"].startswith("llama-slice-0-")
    assert labels["cluster_name"] == CLUSTER_NAME
    assert labels["location"] == LOCATION
    assert entry["jsonPayload"]["reason"] == "FailedScheduling"
    assert entry["jsonPayload"]["message"] == "no nodes available to schedule pods"
    assert entry["severity"] == "WARNING"
    assert entry["logName"] == f"projects/{PROJECT}/logs/events"
