"""Process-wide clients built once per key, and built outside the cache's lock
(shared/clients.py): pool_schedule builds one Kubernetes client per cluster on
parallel threads, each waiting for a Container API get_cluster call."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from shared.clients import ClientCache

WAIT = 5.0  # seconds; only reached when the behaviour under test is broken


def test_a_slow_build_for_one_cluster_does_not_hold_up_another_clusters_client() -> None:
    cache: ClientCache[str] = ClientCache()
    release = threading.Event()

    def slow() -> str:
        assert release.wait(WAIT)
        return "client-a"

    with ThreadPoolExecutor(1) as pool:
        building = pool.submit(cache.get, "cluster-a", slow)
        try:
            # Before the fix this blocked behind cluster-a's build (the cache's lock
            # was held while building) until the wait ran out.
            assert cache.get("cluster-b", lambda: "client-b") == "client-b"
            assert not building.done()
        finally:
            release.set()
        assert building.result(WAIT) == "client-a"


def test_threads_wanting_one_clusters_client_share_a_single_build() -> None:
    cache: ClientCache[object] = ClientCache()
    builds = 0
    start = threading.Barrier(8)

    def build() -> object:
        nonlocal builds
        builds += 1
        return object()

    def get() -> object:
        start.wait(WAIT)
        return cache.get("cluster-a", build)

    with ThreadPoolExecutor(8) as pool:
        clients = list(pool.map(lambda _: get(), range(8)))

    assert builds == 1
    assert all(client is clients[0] for client in clients)


def test_a_failed_build_reaches_its_caller_and_the_next_get_builds_again() -> None:
    cache: ClientCache[str] = ClientCache()

    def broken() -> str:
        raise ConnectionError("get_cluster failed")

    with pytest.raises(ConnectionError):
        cache.get("cluster-a", broken)

    assert cache.get("cluster-a", lambda: "client-a") == "client-a"
    assert cache.get("cluster-a", broken) == "client-a"


def test_past_its_size_the_least_recently_used_client_is_dropped() -> None:
    cache: ClientCache[str] = ClientCache(max_entries=2)
    cache.get("a", lambda: "a1")
    cache.get("b", lambda: "b1")
    cache.get("a", lambda: "a2")  # a is now the most recent
    cache.get("c", lambda: "c1")

    assert cache.get("a", lambda: "a3") == "a1"
    assert cache.get("b", lambda: "b2") == "b2"
