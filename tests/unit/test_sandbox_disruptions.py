"""Node disruptions in the sandbox cluster: a Spot VM preempted, a maintenance event on a
TPU slice, injected through the GKE state as the control surface does, and what a
training JobSet rendered with accelops' failure policy makes of them.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sandbox.cluster import Simulation
from sandbox.common.clock import SimClock
from sandbox.gke import GkeError, GkeState
from sandbox.kubeapi import ObjectStore
from tests.unit import test_sandbox_cluster as cluster_tests
from tests.unit.test_sandbox_cluster import (
    CLUSTER,
    LOCATION,
    NAMESPACE,
    PROJECT,
    add_queue,
    condition,
    is_true,
    jobset,
    node_pool_of,
    pods_of,
    submit,
    tpu_jobset,
)

SHUTDOWN = "Pod was terminated in response to imminent node shutdown."


# test_sandbox_cluster.py's fixtures: a clock that moves only when a test advances it,
# a store with the team's namespace.
clock, store = cluster_tests.clock, cluster_tests.store


@pytest.fixture
def gke(clock: SimClock) -> GkeState:
    state = GkeState(clock, delays={"create_multi_host": 1.0, "create_single_host": 1.0})
    state.add_cluster(PROJECT, LOCATION, "tpu", "https://127.0.0.1:1")
    return state


@pytest.fixture
def sim(store: ObjectStore, clock: SimClock, gke: GkeState) -> Simulation:
    simulation = Simulation(store, clock, gke_state=gke, cluster=CLUSTER)
    gke.subscribe(simulation.on_pool_event)
    return simulation


def create_pools(gke: GkeState, clock: SimClock, sim: Simulation, *names: str,
                 spot: bool = True) -> None:
    for name in names:
        gke.create_node_pool(PROJECT, LOCATION, "tpu", {
            "name": name, "initialNodeCount": 4,
            "config": {"machineType": "ct5lp-hightpu-4t", "spot": spot},
            "placementPolicy": {"type": "COMPACT", "tpuTopology": "4x4"}})
    clock.advance(2)
    gke.tick()
    sim.settle()


def training_jobset(name: str, *, max_restarts: int = 0, **kwargs: Any) -> dict[str, Any]:
    """tpu_jobset with the failure handling shared/jobspec/render.py gives every JobSet."""
    body = tpu_jobset(name, max_restarts=max_restarts, **kwargs)
    body["spec"]["failurePolicy"]["rules"] = [{
        "name": "restartOnHostDisruption", "action": "RestartJobSetAndIgnoreMaxRestarts",
        "onJobFailureReasons": ["PodFailurePolicy"]}]
    job = body["spec"]["replicatedJobs"][0]["template"]["spec"]
    job["podFailurePolicy"] = {"rules": [{"action": "FailJob", "onPodConditions": [
        {"type": "DisruptionTarget", "status": "True"}]}]}
    return body


def node(store: ObjectStore, name: str) -> dict[str, Any]:
    return store.get("", "nodes", name)


def ready(store: ObjectStore, name: str) -> bool:
    return is_true(node(store, name), "Ready")


def nodes_of(store: ObjectStore, pool: str) -> list[str]:
    return sorted(n["metadata"]["name"] for n in store.list(
        "", "nodes", label_selector=f"cloud.google.com/gke-nodepool={pool}"))


def advance(clock: SimClock, sim: Simulation, seconds: float) -> None:
    clock.advance(seconds)
    sim.settle()


# ----------------------------------------------------------------------------- the fault


def test_preempting_a_spot_node_ends_its_pods_as_the_kubelets_node_shutdown_does(
    store, clock, gke, sim
):
    add_queue(store, quota=32)
    create_pools(gke, clock, sim, "spot-a", "spot-b")
    body = tpu_jobset("llama", run_seconds=3600)
    body["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] = 6  # keep going
    submit(store, body)
    sim.settle()
    victim = pods_of(store, "llama")[0]
    target = victim["spec"]["nodeName"]
    others = [p["metadata"]["name"] for p in pods_of(store, "llama")
              if p["spec"]["nodeName"] != target]

    gke.disrupt("preemption", node_pool_of(store, target), node=target, for_seconds=120)
    sim.settle()

    pod = store.get("", "pods", victim["metadata"]["name"], NAMESPACE)
    assert pod["status"]["phase"] == "Failed"
    assert (pod["status"]["reason"], pod["status"]["message"]) == ("Terminated", SHUTDOWN)
    disruption = condition(pod, "DisruptionTarget")
    assert disruption is not None
    assert (disruption["status"], disruption["reason"], disruption["message"]) \
        == ("True", "TerminationByKubelet", SHUTDOWN)
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (143, "Error")
    assert not ready(store, target)
    assert condition(node(store, target), "Ready")["message"] == "node is shutting down"  # type: ignore[index]
    assert all(store.get("", "pods", name, NAMESPACE)["status"]["phase"] == "Running"
               for name in others), "the other nodes' pods are not the kubelet's to end"


def test_a_preempted_node_comes_back_ready_with_a_new_boot_after_its_downtime(
    store, clock, gke, sim
):
    create_pools(gke, clock, sim, "spot-a")
    target = nodes_of(store, "spot-a")[0]
    boot = node(store, target)["status"]["nodeInfo"]["bootID"]

    gke.disrupt("preemption", "spot-a", node=target, for_seconds=120)
    sim.settle()
    advance(clock, sim, 119)
    assert not ready(store, target)

    advance(clock, sim, 2)

    back = node(store, target)
    assert ready(store, target)
    assert back["status"]["nodeInfo"]["bootID"] != boot
    assert "sandbox.accelops.dev/down-until" not in back["metadata"].get("annotations", {})
    assert target in nodes_of(store, "spot-a"), "the instance group recreates the VM by name"
    assert len(nodes_of(store, "spot-a")) == 4


def test_a_maintenance_event_takes_every_host_of_the_slice(store, clock, gke, sim):
    create_pools(gke, clock, sim, "slice-a", "slice-b", spot=False)

    gke.disrupt("maintenance", "slice-a", for_seconds=600)
    sim.settle()

    assert [ready(store, n) for n in nodes_of(store, "slice-a")] == [False] * 4
    assert [ready(store, n) for n in nodes_of(store, "slice-b")] == [True] * 4
    advance(clock, sim, 601)
    assert [ready(store, n) for n in nodes_of(store, "slice-a")] == [True] * 4


def test_only_spot_or_preemptible_vms_can_be_preempted(clock, gke, sim):
    create_pools(gke, clock, sim, "on-demand", spot=False)

    with pytest.raises(GkeError) as refused:
        gke.disrupt("preemption", "on-demand")

    assert refused.value.status == "FAILED_PRECONDITION"
    assert "does not run on Spot or preemptible VMs" in str(refused.value)


def test_a_disruption_needs_a_running_pool_with_nodes(clock, gke):
    with pytest.raises(GkeError) as missing:
        gke.disrupt("maintenance", "nowhere")
    assert missing.value.status == "NOT_FOUND"

    gke.create_node_pool(PROJECT, LOCATION, "tpu", {
        "name": "coming", "initialNodeCount": 4,
        "config": {"machineType": "ct5lp-hightpu-4t", "spot": True},
        "placementPolicy": {"type": "COMPACT", "tpuTopology": "4x4"}})
    with pytest.raises(GkeError) as provisioning:
        gke.disrupt("preemption", "coming")
    assert provisioning.value.status == "FAILED_PRECONDITION"
    with pytest.raises(ValueError, match="unknown disruption"):
        gke.disrupt("meteor", "coming")


# ----------------------------------------------------------------------------- a training job


def test_a_preempted_host_restarts_a_two_slice_job_which_then_completes_unspent(
    store, clock, gke, sim
):
    add_queue(store, quota=32)
    create_pools(gke, clock, sim, "spot-a", "spot-b")
    submit(store, training_jobset("llama", max_restarts=0, run_seconds=600))
    sim.settle()
    advance(clock, sim, 100)
    target = pods_of(store, "llama")[0]["spec"]["nodeName"]

    gke.disrupt("preemption", node_pool_of(store, target), node=target, for_seconds=180)
    sim.settle()

    restarted = jobset(store, "llama")
    assert restarted["status"]["restarts"] == 1
    assert restarted["status"].get("restartsCountTowardsMax", 0) == 0
    assert not is_true(restarted, "Failed")
    failed_job = [j for j in store.list("batch", "jobs", NAMESPACE)
                  if j["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "0"]
    assert failed_job == [], "the first attempt's Jobs are gone"
    pending = [p for p in pods_of(store, "llama") if p["status"]["phase"] == "Pending"]
    assert len(pending) == 4, "one slice waits for its preempted host"

    advance(clock, sim, 181)
    assert [p["status"]["phase"] for p in pods_of(store, "llama")] == ["Running"] * 8
    advance(clock, sim, 601)

    done = jobset(store, "llama")
    assert is_true(done, "Completed")
    assert (done["status"]["restarts"], done["status"].get("restartsCountTowardsMax", 0)) \
        == (1, 0)


def test_the_restart_after_a_disruption_is_recorded_with_the_jobs_reason(
    store, clock, gke, sim
):
    add_queue(store, quota=32)
    create_pools(gke, clock, sim, "spot-a", "spot-b")
    submit(store, training_jobset("llama", run_seconds=600))
    sim.settle()
    target = pods_of(store, "llama")[0]
    job = target["metadata"]["labels"]["batch.kubernetes.io/job-name"]
    snapshot = copy.deepcopy(target)

    gke.disrupt("preemption", node_pool_of(store, snapshot["spec"]["nodeName"]),
                node=snapshot["spec"]["nodeName"])
    sim.settle()

    events = [(e["involvedObject"]["kind"], e["reason"], e["message"])
              for e in store.list("", "events", NAMESPACE) if e["type"] == "Warning"
              and e["reason"] != "FailedScheduling"]
    assert ("Job", "PodFailurePolicy",
            f"Pod {NAMESPACE}/{snapshot['metadata']['name']} has condition DisruptionTarget "
            f"matching FailJob rule at index 0") in events
    assert ("JobSet", "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction",
            "applying RestartJobSetAndIgnoreMaxRestarts failure policy action "
            f"(first failed job: {job})") in events


def test_a_container_exiting_1_still_spends_max_restarts_and_then_fails_the_job(
    store, clock, gke, sim
):
    add_queue(store, quota=32)
    create_pools(gke, clock, sim, "spot-a", "spot-b")
    submit(store, training_jobset("flaky", max_restarts=1, outcome="fail", run_seconds=300))
    sim.settle()

    advance(clock, sim, 301)
    restarted = jobset(store, "flaky")
    assert (restarted["status"]["restarts"], restarted["status"]["restartsCountTowardsMax"]) \
        == (1, 1)
    advance(clock, sim, 301)

    failed = jobset(store, "flaky")
    reason = condition(failed, "Failed")
    assert reason is not None
    assert reason["reason"] == "ReachedMaxRestarts"
    assert failed["status"]["restarts"] == 1
