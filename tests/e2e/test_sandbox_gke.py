"""The sandbox GKE API, driven over real sockets by the real google-cloud-container client.

The simulated clock runs at real speed and tests jump it with ``clock.advance``,
so operations that take minutes of simulated time finish at once.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions as gexc
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import container_v1

from sandbox.common.clock import SimClock
from sandbox.gke import (
    POOL_DELETED,
    POOL_DISRUPTED,
    POOL_ERROR,
    POOL_RESIZED,
    POOL_RUNNING,
    GkeApiServer,
    GkeState,
    start_gke_api,
)

pytestmark = pytest.mark.e2e

PROJECT = "acme"
ZONE = "us-central2-b"
OTHER_ZONE = "europe-west4-a"
CLUSTER = f"projects/{PROJECT}/locations/{ZONE}/clusters/tpu"
KUBE_URL = "http://127.0.0.1:6443"

NodePool = container_v1.NodePool
Operation = container_v1.Operation
COMPACT = NodePool.PlacementPolicy.Type.COMPACT
Events = list[tuple[str, str, dict[str, Any]]]


# ---------------------------------------------------------------------- fixtures


@pytest.fixture
def clock() -> SimClock:
    return SimClock(speed=1.0)


@pytest.fixture
def state(clock: SimClock) -> GkeState:
    state = GkeState(clock)
    state.add_cluster(PROJECT, ZONE, "tpu", KUBE_URL, ca_certificate="Y2VydA==")
    state.add_cluster(PROJECT, OTHER_ZONE, "serve", "http://127.0.0.1:6444")
    return state


@pytest.fixture
def events(state: GkeState) -> Events:
    seen: Events = []
    state.subscribe(lambda event, cluster, pool: seen.append((event, cluster, pool)))
    return seen


@pytest.fixture
def server(state: GkeState) -> Iterator[GkeApiServer]:
    server = start_gke_api(state)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def gke(server: GkeApiServer) -> container_v1.ClusterManagerClient:
    return client_for(server)


def client_for(server: GkeApiServer) -> container_v1.ClusterManagerClient:
    return container_v1.ClusterManagerClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options=ClientOptions(api_endpoint=server.url),
    )


# ---------------------------------------------------------------------- helpers


def tpu_pool(name: str = "slice-a", *, nodes: int = 4, topology: str | None = "4x4",
             machine_type: str = "ct5lp-hightpu-4t", compact: bool = True,
             autoscaling: container_v1.NodePoolAutoscaling | None = None) -> NodePool:
    pool = NodePool(name=name, initial_node_count=nodes,
                    config=container_v1.NodeConfig(machine_type=machine_type))
    if topology is not None:
        pool.placement_policy = NodePool.PlacementPolicy(
            type_=COMPACT if compact else NodePool.PlacementPolicy.Type.TYPE_UNSPECIFIED,
            tpu_topology=topology)
    if autoscaling is not None:
        pool.autoscaling = autoscaling
    return pool


def op_path(op: Operation, location: str = ZONE) -> str:
    return f"projects/{PROJECT}/locations/{location}/operations/{op.name}"


def pool_path(name: str = "slice-a") -> str:
    return f"{CLUSTER}/nodePools/{name}"


def create_running(gke: container_v1.ClusterManagerClient, clock: SimClock,
                   pool: NodePool | None = None) -> Operation:
    op = gke.create_node_pool(parent=CLUSTER, node_pool=pool or tpu_pool())
    clock.advance(180)
    return gke.get_operation(name=op_path(op))


def error_of(excinfo: pytest.ExceptionInfo[gexc.GoogleAPICallError]) -> dict[str, Any]:
    """The Google error body of a REST error, as the server sent it."""
    body: dict[str, Any] = excinfo.value.response.json()["error"]
    return body


def http(server: GkeApiServer, method: str, path: str,
         body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


# ---------------------------------------------------------------------- clusters


def test_a_cluster_is_read_with_its_node_pools(gke, clock):
    create_running(gke, clock)

    cluster = gke.get_cluster(name=CLUSTER)

    assert cluster.endpoint == KUBE_URL
    assert cluster.master_auth.cluster_ca_certificate == "Y2VydA=="
    assert cluster.status == container_v1.Cluster.Status.RUNNING
    assert [p.name for p in cluster.node_pools] == ["slice-a"]
    assert cluster.node_pools[0].status == NodePool.Status.RUNNING
    assert cluster.current_node_count == 4


def test_clusters_are_listed_per_location_or_everywhere_with_a_dash(gke):
    one = gke.list_clusters(parent=f"projects/{PROJECT}/locations/{ZONE}")
    every = gke.list_clusters(parent=f"projects/{PROJECT}/locations/-")
    other_project = gke.list_clusters(parent="projects/nobody/locations/-")

    assert [c.name for c in one.clusters] == ["tpu"]
    assert sorted(c.name for c in every.clusters) == ["serve", "tpu"]
    assert list(other_project.clusters) == []


def test_an_unknown_cluster_pool_or_operation_is_not_found(gke):
    with pytest.raises(gexc.NotFound, match="clusters/missing"):
        gke.get_cluster(name=f"projects/{PROJECT}/locations/{ZONE}/clusters/missing")
    with pytest.raises(gexc.NotFound, match="nodePools/missing"):
        gke.get_node_pool(name=pool_path("missing"))
    with pytest.raises(gexc.NotFound):
        gke.delete_node_pool(name=pool_path("missing"))
    with pytest.raises(gexc.NotFound, match="operation-1-x"):
        gke.get_operation(name=f"projects/{PROJECT}/locations/{ZONE}/operations/operation-1-x")


# ---------------------------------------------------------------------- create


def test_a_multi_host_pool_is_created_by_an_operation_that_ends_after_180_simulated_seconds(
    gke, clock, events
):
    op = gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool())

    assert op.status == Operation.Status.RUNNING
    assert op.operation_type == Operation.Type.CREATE_NODE_POOL
    assert op.target_link.endswith(f"{CLUSTER}/nodePools/slice-a")
    assert gke.get_node_pool(name=pool_path()).status == NodePool.Status.PROVISIONING
    assert gke.get_cluster(name=CLUSTER).status == container_v1.Cluster.Status.RECONCILING

    clock.advance(179)
    assert gke.get_operation(name=op_path(op)).status == Operation.Status.RUNNING
    assert events == []

    clock.advance(1)
    done = gke.get_operation(name=op_path(op))
    pool = gke.get_node_pool(name=pool_path())

    assert done.status == Operation.Status.DONE
    assert not done.error.message
    started = datetime.fromisoformat(done.start_time.replace("Z", "+00:00"))
    ended = datetime.fromisoformat(done.end_time.replace("Z", "+00:00"))
    assert (ended - started).total_seconds() == pytest.approx(180, abs=0.01)
    assert pool.status == NodePool.Status.RUNNING
    assert pool.placement_policy.tpu_topology == "4x4"
    assert pool.placement_policy.type_ == COMPACT
    assert pool.initial_node_count == 4
    assert [(e, c, p["name"], p["nodeCount"]) for e, c, p in events] == [
        (POOL_RUNNING, CLUSTER, "slice-a", 4)]


def test_a_single_host_pool_needs_no_placement_policy_and_is_ready_after_90_seconds(
    gke, clock, events
):
    pool = tpu_pool("serve-v6e", nodes=2, topology=None, machine_type="ct6e-standard-4t",
                    autoscaling=container_v1.NodePoolAutoscaling(
                        enabled=True, min_node_count=0, max_node_count=4))

    op = gke.create_node_pool(parent=CLUSTER, node_pool=pool)
    clock.advance(90)

    assert gke.get_operation(name=op_path(op)).status == Operation.Status.DONE
    created = gke.get_node_pool(name=pool_path("serve-v6e"))
    assert created.status == NodePool.Status.RUNNING
    assert created.autoscaling.max_node_count == 4
    assert [(e, p["nodeCount"]) for e, _, p in events] == [(POOL_RUNNING, 2)]


def test_operations_finish_on_their_own_when_the_simulated_clock_runs_fast(state, clock):
    clock.set_speed(3600)  # 180 simulated seconds take 50 ms
    running = threading.Event()
    state.subscribe(lambda event, cluster, pool: running.set())
    with start_gke_api(state) as server:
        client_for(server).create_node_pool(parent=CLUSTER, node_pool=tpu_pool())

        assert running.wait(timeout=30)
    assert state.operations()[0].status == "DONE"


def test_another_cluster_is_not_blocked_by_a_running_operation(gke):
    gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool())

    other = f"projects/{PROJECT}/locations/{OTHER_ZONE}/clusters/serve"
    op = gke.create_node_pool(parent=other, node_pool=tpu_pool(
        "cpu", nodes=1, topology=None, machine_type="e2-standard-4"))

    assert op.status == Operation.Status.RUNNING


def test_a_duplicate_pool_name_is_a_conflict_with_status_already_exists(gke, clock):
    create_running(gke, clock)

    with pytest.raises(gexc.Conflict) as excinfo:
        gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool())

    assert excinfo.value.code == 409
    assert error_of(excinfo)["status"] == "ALREADY_EXISTS"
    assert "nodePools/slice-a" in error_of(excinfo)["message"]


@pytest.mark.parametrize(
    ("pool", "field"),
    [
        (tpu_pool(machine_type="ct9-imaginary-4t"), "nodePool.config.machineType"),
        (tpu_pool(topology="2x2x2"), "nodePool.placementPolicy.tpuTopology"),
        (tpu_pool(machine_type="ct5p-hightpu-4t", topology="4x4"),
         "nodePool.placementPolicy.tpuTopology"),
        (tpu_pool(nodes=3), "nodePool.initialNodeCount"),
        (tpu_pool(compact=False), "nodePool.placementPolicy.type"),
        (tpu_pool(autoscaling=container_v1.NodePoolAutoscaling(
            enabled=True, min_node_count=0, max_node_count=4)), "nodePool.autoscaling.enabled"),
        (tpu_pool("p" * 41), "nodePool.name"),
        (tpu_pool("Slice_A"), "nodePool.name"),
    ],
    ids=["unknown-machine-type", "topology-of-another-family", "topology-of-another-machine",
         "node-count-not-matching-topology", "placement-not-compact",
         "autoscaling-on-multi-host", "name-too-long", "name-not-rfc1035"],
)
def test_an_invalid_pool_is_refused_with_invalid_argument_naming_the_field(gke, pool, field):
    with pytest.raises(gexc.BadRequest) as excinfo:
        gke.create_node_pool(parent=CLUSTER, node_pool=pool)

    assert error_of(excinfo)["status"] == "INVALID_ARGUMENT"
    assert f"'{field}'" in error_of(excinfo)["message"]
    assert gke.list_node_pools(parent=CLUSTER).node_pools == []


def test_an_unknown_field_in_the_body_is_refused_as_an_invalid_json_payload(server):
    code, body = http(server, "POST", f"/v1/{CLUSTER}/nodePools",
                      {"nodePool": {"name": "x", "nodeCount": 4}})

    assert code == 400
    assert body["error"]["status"] == "INVALID_ARGUMENT"
    assert body["error"]["message"].startswith("Invalid JSON payload received.")
    assert "nodeCount" in body["error"]["message"]


# ---------------------------------------------------------------------- delete and resize


def test_a_deleted_pool_is_stopping_and_then_gone_after_60_simulated_seconds(
    gke, clock, events
):
    create_running(gke, clock)

    op = gke.delete_node_pool(name=pool_path())

    assert op.operation_type == Operation.Type.DELETE_NODE_POOL
    assert gke.get_node_pool(name=pool_path()).status == NodePool.Status.STOPPING
    clock.advance(60)
    assert gke.get_operation(name=op_path(op)).status == Operation.Status.DONE
    with pytest.raises(gexc.NotFound):
        gke.get_node_pool(name=pool_path())
    assert [e for e, _, _ in events] == [POOL_RUNNING, POOL_DELETED]
    assert events[-1][2]["nodeCount"] == 0


def test_deleting_a_pool_while_it_is_being_created_fails_with_failed_precondition(gke):
    gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool())

    with pytest.raises(gexc.BadRequest) as excinfo:
        gke.delete_node_pool(name=pool_path())

    assert error_of(excinfo)["status"] == "FAILED_PRECONDITION"
    assert gke.get_node_pool(name=pool_path()).status == NodePool.Status.PROVISIONING


def test_a_multi_host_pool_is_resized_to_zero_and_back_to_its_full_size(gke, clock, events):
    create_running(gke, clock)

    down = gke.set_node_pool_size(request={"name": pool_path(), "node_count": 0})
    assert down.operation_type == Operation.Type.SET_NODE_POOL_SIZE
    assert gke.get_node_pool(name=pool_path()).status == NodePool.Status.RECONCILING
    clock.advance(60)
    assert gke.get_operation(name=op_path(down)).status == Operation.Status.DONE
    assert gke.get_cluster(name=CLUSTER).current_node_count == 0

    gke.set_node_pool_size(request={"name": pool_path(), "node_count": 4})
    clock.advance(60)

    assert gke.get_node_pool(name=pool_path()).status == NodePool.Status.RUNNING
    assert [(e, p["nodeCount"]) for e, _, p in events] == [
        (POOL_RUNNING, 4), (POOL_RESIZED, 0), (POOL_RESIZED, 4)]


def test_a_partial_resize_of_a_multi_host_pool_is_refused(gke, clock):
    create_running(gke, clock)

    with pytest.raises(gexc.BadRequest) as excinfo:
        gke.set_node_pool_size(request={"name": pool_path(), "node_count": 2})

    assert error_of(excinfo)["status"] == "INVALID_ARGUMENT"
    assert "'nodeCount'" in error_of(excinfo)["message"]
    assert "0 or 4" in error_of(excinfo)["message"]


def test_autoscaling_is_set_on_a_single_host_pool_and_refused_on_a_multi_host_pool(
    gke, clock
):
    create_running(gke, clock)
    single = tpu_pool("single", nodes=1, topology="2x2")
    gke.create_node_pool(parent=CLUSTER, node_pool=single)
    clock.advance(90)
    autoscaling = container_v1.NodePoolAutoscaling(enabled=True, max_node_count=3)

    op = gke.set_node_pool_autoscaling(
        request={"name": pool_path("single"), "autoscaling": autoscaling})
    clock.advance(30)
    with pytest.raises(gexc.BadRequest) as excinfo:
        gke.set_node_pool_autoscaling(request={"name": pool_path(), "autoscaling": autoscaling})

    assert op.operation_type == Operation.Type.UPDATE_CLUSTER
    assert gke.get_operation(name=op_path(op)).status == Operation.Status.DONE
    assert gke.get_node_pool(name=pool_path("single")).autoscaling.max_node_count == 3
    assert "'autoscaling.enabled'" in error_of(excinfo)["message"]


# ---------------------------------------------------------------------- operations


def test_operations_are_real_operation_json_and_enums_follow_the_requested_encoding(
    gke, clock, server
):
    op = create_running(gke, clock)
    path = f"/v1/{op_path(op)}"

    _, named = http(server, "GET", path)
    _, numbered = http(server, "GET", path + "?%24alt=json%3Benum-encoding%3Dint")

    assert re.fullmatch(r"operation-\d{13}-[0-9a-f]{8}", named["name"])
    assert named["operationType"] == "CREATE_NODE_POOL"
    assert named["status"] == "DONE"
    assert named["selfLink"].endswith(path)
    assert named["targetLink"].endswith(f"/{CLUSTER}/nodePools/slice-a")
    assert named["location"] == named["zone"] == ZONE
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", named["endTime"])
    assert "error" not in named
    assert (numbered["status"], numbered["operationType"]) == (3, 7)


def test_operations_are_listed_per_location_or_everywhere(gke, clock):
    first = create_running(gke, clock)
    other = f"projects/{PROJECT}/locations/{OTHER_ZONE}/clusters/serve"
    second = gke.create_node_pool(parent=other, node_pool=tpu_pool())

    here = gke.list_operations(parent=f"projects/{PROJECT}/locations/{ZONE}")
    every = gke.list_operations(parent=f"projects/{PROJECT}/locations/-")

    assert [o.name for o in here.operations] == [first.name]
    assert [o.name for o in every.operations] == [first.name, second.name]
    with pytest.raises(gexc.NotFound):
        gke.get_operation(name=op_path(second, ZONE))


def test_the_operation_history_keeps_simulated_start_and_end_times(gke, clock, state):
    started = clock.time()
    create_running(gke, clock)
    gke.delete_node_pool(name=pool_path())
    clock.advance(60)

    history = state.operations()

    assert [(o.operation_type, o.status) for o in history] == [
        ("CREATE_NODE_POOL", "DONE"), ("DELETE_NODE_POOL", "DONE")]
    assert history[0].start_time == pytest.approx(started, abs=1)
    assert history[0].end_time == pytest.approx(history[0].start_time + 180)
    assert history[1].end_time == pytest.approx(history[1].start_time + 60)


# ---------------------------------------------------------------------- faults


def test_an_injected_429_makes_the_client_raise_too_many_requests_and_changes_nothing(
    gke, server
):
    server.faults.fail_next(1, "RESOURCE_EXHAUSTED", 429)

    with pytest.raises(gexc.TooManyRequests) as excinfo:
        gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool())
    op = gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool())

    assert error_of(excinfo)["status"] == "RESOURCE_EXHAUSTED"
    assert op.status == Operation.Status.RUNNING
    assert server.faults.injected == 1


def test_fail_for_answers_errors_until_the_simulated_duration_has_passed(gke, clock, server):
    server.faults.fail_for(300)  # "GKE answers 429 for the next 5 simulated minutes"

    with pytest.raises(gexc.TooManyRequests):
        gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool())
    clock.advance(299)
    assert gke.list_node_pools(parent=CLUSTER).node_pools == []  # GETs pass
    with pytest.raises(gexc.TooManyRequests):
        gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool())
    clock.advance(2)

    assert gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool()).name


def test_a_single_503_on_delete_is_retried_by_the_client_and_the_delete_goes_through(
    gke, clock, server
):
    create_running(gke, clock)
    server.faults.fail_next(1, "UNAVAILABLE", methods=["DELETE"])

    op = gke.delete_node_pool(name=pool_path())

    assert op.operation_type == Operation.Type.DELETE_NODE_POOL
    assert [r.status for r in server.request_log if r.method == "DELETE"] == [503, 200]


def test_a_pool_error_ends_the_operation_done_with_an_error_and_the_pool_in_error(
    gke, clock, server, events
):
    server.faults.fail_next_create_with_pool_error()

    op = gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool())
    clock.advance(180)
    done = gke.get_operation(name=op_path(op))
    pool = gke.get_node_pool(name=pool_path())

    assert done.status == Operation.Status.DONE
    assert done.error.code == 8  # RESOURCE_EXHAUSTED
    assert "GCE_STOCKOUT" in done.error.message
    assert pool.status == NodePool.Status.ERROR
    assert "GCE_STOCKOUT" in pool.status_message
    assert gke.get_cluster(name=CLUSTER).current_node_count == 0
    assert [(e, p["nodeCount"]) for e, _, p in events] == [(POOL_ERROR, 0)]
    # A pool in ERROR can still be deleted (the way out).
    gke.delete_node_pool(name=pool_path())
    clock.advance(60)
    assert gke.list_node_pools(parent=CLUSTER).node_pools == []


# ---------------------------------------------------------------------- control surface


def test_faults_are_armed_and_cleared_over_http(gke, server):
    code, armed = http(server, "POST", "/sandbox/v1/faults",
                       {"status": "UNAVAILABLE", "http_code": 503, "count": 2,
                        "methods": ["POST"]})
    with pytest.raises(gexc.ServiceUnavailable):
        gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool())
    _, cleared = http(server, "DELETE", "/sandbox/v1/faults")

    assert code == 200
    assert armed["faults"][0]["remaining"] == 2
    assert cleared["faults"] == []
    assert gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool()).name


def test_a_timed_fault_is_armed_over_http_for_simulated_seconds(gke, clock, server):
    http(server, "POST", "/sandbox/v1/faults", {"for_seconds": 60, "http_code": 429})

    with pytest.raises(gexc.TooManyRequests):
        gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool())
    clock.advance(61)

    assert gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool()).name


def test_a_pool_error_is_armed_over_http(gke, clock, server):
    code, _ = http(server, "POST", "/sandbox/v1/pool-error", {"message": "no capacity"})

    create_running(gke, clock)

    assert code == 200
    assert gke.get_node_pool(name=pool_path()).status_message == "no capacity"


def test_a_spot_vm_preemption_is_injected_over_http_and_told_to_the_cluster(
    gke, clock, server, events
):
    spot = tpu_pool("spot-a")
    spot.config.spot = True
    create_running(gke, clock, spot)

    code, answer = http(server, "POST", "/sandbox/v1/faults",
                        {"kind": "preemption", "pool": "spot-a", "node": "gke-tpu-spot-a-1",
                         "for_seconds": 120})

    assert code == 200
    assert answer["disruption"] == {"cluster": CLUSTER, "pool": "spot-a", "kind": "preemption",
                                    "seconds": 120.0, "node": "gke-tpu-spot-a-1"}
    event, cluster, pool = events[-1]
    assert (event, cluster, pool["name"]) == (POOL_DISRUPTED, CLUSTER, "spot-a")
    assert pool["disruption"] == {"kind": "preemption", "seconds": 120.0,
                                  "node": "gke-tpu-spot-a-1"}


def test_a_maintenance_event_lasts_600_simulated_seconds_unless_told_otherwise(
    gke, clock, server, events
):
    create_running(gke, clock)

    code, answer = http(server, "POST", "/sandbox/v1/faults",
                        {"kind": "maintenance", "pool": "slice-a"})

    assert code == 200
    assert answer["disruption"]["seconds"] == 600.0
    assert events[-1][0] == POOL_DISRUPTED


def test_preempting_an_on_demand_pool_or_naming_no_pool_is_refused_over_http(
    gke, clock, server, events
):
    create_running(gke, clock)

    code, refused = http(server, "POST", "/sandbox/v1/faults",
                         {"kind": "preemption", "pool": "slice-a"})

    assert code == 400
    assert refused["error"]["status"] == "FAILED_PRECONDITION"
    assert "Spot or preemptible" in refused["error"]["message"]
    assert http(server, "POST", "/sandbox/v1/faults", {"kind": "maintenance"})[0] == 400
    assert http(server, "POST", "/sandbox/v1/faults",
                {"kind": "maintenance", "pool": "nowhere"})[0] == 404
    assert POOL_DISRUPTED not in [event for event, _, _ in events]


def test_the_clock_is_read_sped_up_and_advanced_over_http(gke, clock, server):
    op = gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool())

    _, before = http(server, "GET", "/sandbox/v1/clock")
    _, faster = http(server, "POST", "/sandbox/v1/clock", {"speed": 2.0})
    _, later = http(server, "POST", "/sandbox/v1/clock", {"advance": 180})

    assert before["speed"] == 1.0
    assert faster["speed"] == clock.speed == 2.0
    assert later["time"] - before["time"] >= 180
    assert later["now"].endswith("Z")
    assert gke.get_operation(name=op_path(op)).status == Operation.Status.DONE


def test_an_unknown_control_endpoint_or_bad_body_is_an_error(server):
    assert http(server, "GET", "/sandbox/v1/nothing")[0] == 404
    assert http(server, "POST", "/sandbox/v1/faults", {"status": "NO_SUCH_STATUS"})[0] == 400


def test_the_request_log_records_every_api_call_but_not_control_calls(gke, clock, server):
    gke.get_cluster(name=CLUSTER)
    with pytest.raises(gexc.NotFound):
        gke.get_node_pool(name=pool_path("missing"))
    gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool())
    http(server, "GET", "/sandbox/v1/clock")

    log = server.request_log.entries()
    _, remote = http(server, "GET", "/sandbox/v1/requests")

    assert [(r.method, r.status) for r in log] == [("GET", 200), ("GET", 404), ("POST", 200)]
    assert log[2].path == f"/v1/{CLUSTER}/nodePools"
    assert log[0].time <= log[2].time <= clock.time()
    assert server.request_log.count("POST", "/nodePools") == 1
    assert len(remote["requests"]) == 3


# ---------------------------------------------------------------------- persistence


def test_pools_and_operations_survive_a_restart_through_the_state_file(
    tmp_path: Path, clock: SimClock
):
    state_file = tmp_path / "gke-state.json"
    first = GkeState(clock)
    first.add_cluster(PROJECT, ZONE, "tpu", KUBE_URL)
    with start_gke_api(first, state_file=state_file) as server:
        gke = client_for(server)
        create_running(gke, clock)
        pending = gke.set_node_pool_size(request={"name": pool_path(), "node_count": 0})

    second = GkeState(clock)
    with start_gke_api(second, state_file=state_file) as server:
        gke = client_for(server)
        cluster = gke.get_cluster(name=CLUSTER)
        assert cluster.endpoint == KUBE_URL
        assert gke.get_node_pool(name=pool_path()).status == NodePool.Status.RECONCILING
        clock.advance(60)
        assert gke.get_operation(name=op_path(pending)).status == Operation.Status.DONE
        assert len(gke.list_operations(parent=f"projects/{PROJECT}/locations/-").operations) == 2
        assert [(path, p["nodeCount"]) for path, p in second.pools()] == [(CLUSTER, 0)]


def test_stopping_the_server_is_prompt_and_closes_its_port(state):
    server = start_gke_api(state)
    client_for(server).get_cluster(name=CLUSTER)  # a kept-alive connection is open

    started = time.monotonic()
    server.stop()

    assert time.monotonic() - started < 1.0
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(server.url + f"/v1/{CLUSTER}", timeout=1)
