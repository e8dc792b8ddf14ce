"""The sandbox GKE API at a benchmark's scale, through the real google-cloud-container
client: ten clusters of twenty pools each, and injected latency on every Container
API call that concurrent calls pay at the same time, as they do against GKE."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from google.cloud import container_v1

from sandbox.common.clock import SimClock
from sandbox.gke import GkeApiServer, GkeState, start_gke_api
from tests.e2e.test_sandbox_gke import KUBE_URL, PROJECT, client_for, http, tpu_pool

pytestmark = pytest.mark.e2e

NodePool = container_v1.NodePool
LOCATIONS = ("us-central2-b", "europe-west4-a")
CLUSTERS = [(LOCATIONS[i % 2], f"cluster-{i:02d}") for i in range(10)]
POOLS_PER_CLUSTER = 20
LATENCY = 0.2


def cluster_path(location: str, name: str) -> str:
    return f"projects/{PROJECT}/locations/{location}/clusters/{name}"


def single_host(name: str) -> NodePool:
    """A v5litepod-8 pool: one VM, ready after 90 simulated seconds."""
    return tpu_pool(name, nodes=1, topology="2x4", machine_type="ct5lp-hightpu-8t")


@pytest.fixture
def clock() -> SimClock:
    return SimClock(speed=1.0)


@pytest.fixture
def server(clock: SimClock) -> Iterator[GkeApiServer]:
    state = GkeState(clock)
    for location, name in CLUSTERS:
        state.add_cluster(PROJECT, location, name, KUBE_URL)
    with start_gke_api(state) as server:
        yield server


@pytest.fixture
def gke(server: GkeApiServer) -> container_v1.ClusterManagerClient:
    return client_for(server)


def timed(call: Callable[[], Any]) -> float:
    started = time.monotonic()
    call()
    return time.monotonic() - started


def in_parallel(calls: list[Callable[[], Any]]) -> tuple[float, list[float]]:
    """Run the calls on one thread each, released together: (total, each call's time)."""
    start = threading.Barrier(len(calls))

    def run(call: Callable[[], Any]) -> float:
        start.wait()
        return timed(call)

    started = time.monotonic()
    with ThreadPoolExecutor(len(calls)) as pool:
        each = list(pool.map(run, calls))
    return time.monotonic() - started, each


# ---------------------------------------------------------------------- ten clusters


def test_ten_clusters_each_list_their_own_twenty_pools(gke, clock):
    # Five operations at a time per cluster (the sandbox's default limit), as a sweep would.
    for first in range(0, POOLS_PER_CLUSTER, 5):
        for location, name in CLUSTERS:
            for index in range(first, first + 5):
                gke.create_node_pool(parent=cluster_path(location, name),
                                     node_pool=single_host(f"{name}-p{index:02d}"))
        clock.advance(90)

    listed = gke.list_clusters(parent=f"projects/{PROJECT}/locations/-").clusters
    assert sorted(c.name for c in listed) == sorted(name for _, name in CLUSTERS)
    for location, name in CLUSTERS:
        pools = gke.list_node_pools(parent=cluster_path(location, name)).node_pools
        assert sorted(p.name for p in pools) \
            == [f"{name}-p{i:02d}" for i in range(POOLS_PER_CLUSTER)]
        assert {p.status for p in pools} == {NodePool.Status.RUNNING}


# ---------------------------------------------------------------------- latency


def test_with_injected_latency_every_container_api_call_takes_at_least_that_long(
        gke, server):
    parent = cluster_path(*CLUSTERS[0])
    assert timed(lambda: gke.list_node_pools(parent=parent)) < LATENCY

    server.faults.set_latency(LATENCY)

    assert timed(lambda: gke.list_node_pools(parent=parent)) >= LATENCY
    assert timed(lambda: gke.create_node_pool(parent=parent,
                                              node_pool=single_host("slow"))) >= LATENCY
    # Control calls are the test's own, not the API's: they never wait.
    assert timed(lambda: http(server, "GET", "/sandbox/v1/clock")) < LATENCY


def test_concurrent_calls_overlap_their_latency_instead_of_queueing(gke, server):
    server.faults.set_latency(LATENCY)
    # Two calls per cluster on one client: more at once than its 10 pooled
    # connections, so new connections arrive in a burst too.
    parents = [cluster_path(*cluster) for cluster in CLUSTERS] * 2

    total, each = in_parallel([lambda parent=parent: gke.list_node_pools(parent=parent)
                               for parent in parents])

    assert min(each) >= LATENCY
    # Twenty calls one after another would take 20 x 0.2 s = 4 s.
    assert total < len(parents) * LATENCY / 4, f"{total:.2f}s: the waits did not overlap"


def test_latency_is_set_shown_and_cleared_over_the_control_surface(gke, server):
    parent = cluster_path(*CLUSTERS[0])
    code, armed = http(server, "POST", "/sandbox/v1/faults",
                       {"kind": "latency", "seconds": LATENCY})
    assert (code, armed["latency"]) == (200, LATENCY)
    assert http(server, "GET", "/sandbox/v1/faults")[1]["latency"] == LATENCY
    assert server.faults.latency == LATENCY
    assert timed(lambda: gke.list_node_pools(parent=parent)) >= LATENCY

    _, cleared = http(server, "DELETE", "/sandbox/v1/faults")

    assert cleared["latency"] == 0.0
    assert timed(lambda: gke.list_node_pools(parent=parent)) < LATENCY


@pytest.mark.parametrize("body", [{"kind": "latency"}, {"kind": "latency", "seconds": -1},
                                  {"kind": "latency", "seconds": "soon"},
                                  {"kind": "latency", "seconds": "nan"}])
def test_a_latency_without_a_non_negative_number_of_seconds_is_refused(server, body):
    code, error = http(server, "POST", "/sandbox/v1/faults", body)
    assert code == 400
    assert error["error"]["status"] == "INVALID_ARGUMENT"
    assert server.faults.latency == 0.0
