"""GKE's operation concurrency in the sandbox, through the real google-cloud-container client.

Pools of one cluster change in parallel; a second operation on the same pool and
any pool operation during a control-plane upgrade are FAILED_PRECONDITION; one
operation more than the cluster's limit is 429; a stockout window makes creates
end in ERROR. Codes, messages and their sources: ``sandbox/gke/operations.py`` and
``sandbox/gke/faults.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from google.api_core import exceptions as gexc
from google.cloud import container_v1

from sandbox.common.clock import SimClock
from sandbox.gke import GkeApiServer, GkeError, GkeState, start_gke_api
from tests.e2e.test_sandbox_gke import (
    CLUSTER,
    KUBE_URL,
    OTHER_ZONE,
    PROJECT,
    ZONE,
    client_for,
    error_of,
    http,
    op_path,
    pool_path,
    tpu_pool,
)

pytestmark = pytest.mark.e2e

NodePool = container_v1.NodePool
Operation = container_v1.Operation
OTHER_CLUSTER = f"projects/{PROJECT}/locations/{OTHER_ZONE}/clusters/serve"
ZONE_PARENT = f"projects/{PROJECT}/locations/{ZONE}"


@pytest.fixture
def clock() -> SimClock:
    return SimClock(speed=1.0)


@pytest.fixture
def state(clock: SimClock) -> GkeState:
    state = GkeState(clock)
    state.add_cluster(PROJECT, ZONE, "tpu", KUBE_URL)
    state.add_cluster(PROJECT, OTHER_ZONE, "serve", "http://127.0.0.1:6444")
    return state


@pytest.fixture
def server(state: GkeState) -> Iterator[GkeApiServer]:
    with start_gke_api(state) as server:
        yield server


@pytest.fixture
def gke(server: GkeApiServer) -> container_v1.ClusterManagerClient:
    return client_for(server)


def single_host(name: str) -> NodePool:
    """A v5litepod-8 pool: one VM, ready after 90 simulated seconds."""
    return tpu_pool(name, nodes=1, topology="2x4", machine_type="ct5lp-hightpu-8t")


def status(gke: container_v1.ClusterManagerClient, op: Operation) -> Operation.Status:
    return gke.get_operation(name=op_path(op)).status


# ---------------------------------------------------------------------- pools in parallel


def test_two_pools_created_in_parallel_each_finish_after_their_own_delay(gke, clock):
    multi = gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool("slice-a"))
    single = gke.create_node_pool(parent=CLUSTER, node_pool=single_host("slice-b"))

    clock.advance(90)
    assert status(gke, single) == Operation.Status.DONE
    assert status(gke, multi) == Operation.Status.RUNNING
    assert gke.get_node_pool(name=pool_path("slice-b")).status == NodePool.Status.RUNNING
    clock.advance(90)

    assert status(gke, multi) == Operation.Status.DONE
    assert {p.name: p.status for p in gke.list_node_pools(parent=CLUSTER).node_pools} == {
        "slice-a": NodePool.Status.RUNNING, "slice-b": NodePool.Status.RUNNING}
    assert gke.get_cluster(name=CLUSTER).status == container_v1.Cluster.Status.RUNNING


def test_one_pool_is_deleted_and_another_resized_while_a_third_is_created(gke, clock):
    for name in ("old", "kept"):
        gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool(name))
    clock.advance(180)

    ops = [gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool("new")),
           gke.delete_node_pool(name=pool_path("old")),
           gke.set_node_pool_size(request={"name": pool_path("kept"), "node_count": 0})]
    clock.advance(180)

    assert [status(gke, op) for op in ops] == [Operation.Status.DONE] * 3
    assert sorted(p.name for p in gke.list_node_pools(parent=CLUSTER).node_pools) == [
        "kept", "new"]


# ---------------------------------------------------------------------- same pool


def test_a_second_operation_on_the_same_pool_is_refused_with_failed_precondition(gke, clock):
    create = gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool())

    with pytest.raises(gexc.BadRequest) as excinfo:
        gke.delete_node_pool(name=pool_path())

    assert error_of(excinfo) == {
        "code": 400, "status": "FAILED_PRECONDITION",
        "message": f"Operation {create.name} is currently creating node pool slice-a in "
                   "cluster tpu. Please wait and try again once it is done."}
    clock.advance(180)
    resize = gke.set_node_pool_size(request={"name": pool_path(), "node_count": 0})
    with pytest.raises(gexc.BadRequest, match=f"{resize.name} is currently resizing"):
        gke.set_node_pool_size(request={"name": pool_path(), "node_count": 4})
    clock.advance(60)
    assert gke.delete_node_pool(name=pool_path()).status == Operation.Status.RUNNING


# ---------------------------------------------------------------------- cluster-level operation


def test_an_injected_upgrade_blocks_pool_operations_until_it_ends(gke, clock, server):
    gke.create_node_pool(parent=CLUSTER, node_pool=single_host("ready"))
    clock.advance(90)

    code, armed = http(server, "POST", "/sandbox/v1/faults",
                       {"kind": "upgrade", "for_seconds": 600, "cluster": "tpu"})
    upgrade = armed["operations"][0]
    # Over REST the client picks the class from the HTTP code (400 → BadRequest), as
    # against GKE itself; the canonical status is in the body.
    with pytest.raises(gexc.BadRequest) as created:
        gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool())
    with pytest.raises(gexc.BadRequest) as deleted:
        gke.delete_node_pool(name=pool_path("ready"))
    listed = gke.list_operations(parent=ZONE_PARENT).operations
    other = gke.create_node_pool(parent=OTHER_CLUSTER, node_pool=single_host("cpu"))

    assert code == 200
    assert error_of(created)["status"] == error_of(deleted)["status"] == "FAILED_PRECONDITION"
    assert error_of(created)["message"] == (
        f"Cluster is running incompatible operation {upgrade['name']}.")
    assert created.value.reason == "CLUSTER_ALREADY_HAS_OPERATION"
    running = [o for o in listed if o.status == Operation.Status.RUNNING]
    assert [(o.name, o.operation_type) for o in running] == [
        (upgrade["name"], Operation.Type.UPGRADE_MASTER)]
    assert running[0].target_link.endswith(f"/{CLUSTER}")
    assert gke.get_cluster(name=CLUSTER).status == container_v1.Cluster.Status.RECONCILING
    assert other.status == Operation.Status.RUNNING  # the other cluster is not upgrading

    clock.advance(600)

    done = gke.get_operation(name=f"{ZONE_PARENT}/operations/{upgrade['name']}")
    assert done.status == Operation.Status.DONE
    assert gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool()).name


def test_the_upgrade_is_a_python_call_too_and_refuses_an_unknown_cluster(gke, state):
    [upgrade] = state.upgrade_for(60, cluster=CLUSTER)

    with pytest.raises(gexc.BadRequest, match=upgrade["name"]):
        gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool())
    with pytest.raises(GkeError, match="missing"):
        state.upgrade_for(60, cluster="missing")


# ---------------------------------------------------------------------- concurrency limit


def test_one_operation_more_than_the_cluster_limit_is_answered_with_429(gke, clock, state):
    assert state.max_concurrent_operations == 5
    first = gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool("p0"))
    for i in range(1, 5):
        gke.create_node_pool(parent=CLUSTER, node_pool=single_host(f"p{i}"))

    with pytest.raises(gexc.TooManyRequests) as excinfo:
        gke.create_node_pool(parent=CLUSTER, node_pool=single_host("p5"))
    other = gke.create_node_pool(parent=OTHER_CLUSTER, node_pool=single_host("p5"))
    clock.advance(90)  # p1..p4 finish; p0 still runs

    assert error_of(excinfo) == {
        "code": 429, "status": "RESOURCE_EXHAUSTED",
        "message": 'Too many operations: cluster "tpu" hits the concurrent operations '
                   "quota 5, please try again later."}
    assert other.status == Operation.Status.RUNNING
    assert status(gke, first) == Operation.Status.RUNNING
    assert gke.create_node_pool(parent=CLUSTER, node_pool=single_host("p5")).name


def test_the_limit_is_set_over_http(gke, server):
    code, limits = http(server, "POST", "/sandbox/v1/limits", {"concurrent_operations": 1})
    gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool("a"))

    with pytest.raises(gexc.TooManyRequests, match="quota 1"):
        gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool("b"))
    assert (code, limits) == (200, {"concurrent_operations": 1})
    assert http(server, "POST", "/sandbox/v1/limits", {"concurrent_operations": 0})[0] == 400


# ---------------------------------------------------------------------- stockout


def test_a_stockout_window_makes_creates_end_in_error_until_it_closes(gke, clock, server):
    code, armed = http(server, "POST", "/sandbox/v1/faults",
                       {"kind": "stockout", "for_seconds": 600})
    failing = gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool())
    clock.advance(180)
    done = gke.get_operation(name=op_path(failing))
    pool = gke.get_node_pool(name=pool_path())

    assert code == 200
    assert armed["stockouts"][0]["reason"] == "stockout"
    assert done.status == Operation.Status.DONE
    assert done.error.code == 8  # RESOURCE_EXHAUSTED
    assert done.error.message == (
        f"GCE_STOCKOUT: The zone 'projects/{PROJECT}/zones/{ZONE}' does not have enough "
        "resources available to fulfill the request. Try a different zone, or try again later.")
    assert pool.status == NodePool.Status.ERROR
    assert pool.status_message == done.error.message

    gke.delete_node_pool(name=pool_path())
    clock.advance(600)  # the window has closed
    retried = gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool())
    clock.advance(180)

    assert not gke.get_operation(name=op_path(retried)).error.message
    assert gke.get_node_pool(name=pool_path()).status == NodePool.Status.RUNNING
    assert http(server, "GET", "/sandbox/v1/faults")[1]["stockouts"] == []


def test_a_quota_window_on_one_cluster_fails_its_creates_with_insufficient_quota(gke, clock,
                                                                                server):
    http(server, "POST", "/sandbox/v1/faults",
         {"kind": "quota", "for_seconds": 300, "cluster": "tpu"})
    here = gke.create_node_pool(parent=CLUSTER, node_pool=single_host("a"))
    there = gke.create_node_pool(parent=OTHER_CLUSTER, node_pool=single_host("a"))
    clock.advance(90)

    message = gke.get_operation(name=op_path(here)).error.message
    assert message.startswith("Insufficient quota to satisfy the request")
    assert "ct5lp-hightpu-8t" in message
    assert "us-central2" in message
    assert not gke.get_operation(name=op_path(there, OTHER_ZONE)).error.message


def test_an_unknown_fault_kind_or_a_window_without_duration_is_refused(server):
    assert http(server, "POST", "/sandbox/v1/faults", {"kind": "meteor", "for_seconds": 1})[0] \
        == 400
    assert http(server, "POST", "/sandbox/v1/faults", {"kind": "stockout"})[0] == 400
