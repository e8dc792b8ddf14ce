"""pool_schedule across many clusters: each reached through GKE discovery, once.

The sandbox GKE API hosts the clusters; their endpoints all lead to one sandbox
Kubernetes API (each cluster still gets its own client, keyed by its path), which
is enough to count what a tick asks of the Container API.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

from sandbox.common.clock import SimClock
from sandbox.gke import GkeApiServer, GkeState, start_gke_api
from sandbox.kubeapi import KubeApiServer, install_crds, start_kube_api
from shared import kube
from shared.config import AccelopsConfig, Settings, parse_config
from shared.offhours.tick import run_tick

PROJECT, LOCATION = "acme", "us-central2-b"
# More than the sixteen clients the Kubernetes client cache used to keep.
CLUSTERS = [f"cluster-{i:02d}" for i in range(24)]
AT = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def kube_api() -> Iterator[KubeApiServer]:
    server = start_kube_api()
    install_crds(server.store)
    server.store.create("", "namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "accelops-system"}})
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def gke_api(kube_api: KubeApiServer) -> Iterator[GkeApiServer]:
    state = GkeState(SimClock())
    for name in CLUSTERS:
        state.add_cluster(PROJECT, LOCATION, name, kube_api.url)
    server = start_gke_api(state)
    try:
        yield server
    finally:
        server.stop()
        kube.reset_client()


@pytest.fixture
def settings(gke_api: GkeApiServer) -> Settings:
    kube.reset_client()
    return Settings(config_source=None, project=PROJECT, location=LOCATION,
                    cluster=CLUSTERS[0], kubeconfig=None, gke_endpoint=gke_api.url)


@pytest.fixture
def config() -> AccelopsConfig:
    paths = ", ".join(f"projects/{PROJECT}/locations/{LOCATION}/clusters/{name}"
                      for name in CLUSTERS)
    return parse_config("schedules:\n  office:\n    time_zone: UTC\n"
                        "    on_hours: {weekdays: ['07:00-19:00']}\n"
                        f"pool_schedule:\n  clusters: [{paths}]\n")


def test_every_cluster_is_discovered_once_and_later_ticks_only_list_its_pools(
        settings, config, gke_api, kube_api):
    run_tick(settings, config, at=AT)
    first = gke_api.request_log.entries()
    gke_api.request_log.clear()

    for _ in range(3):
        report = run_tick(settings, config, at=AT)

    later = gke_api.request_log.entries()
    assert sorted(r.path.split("/")[-1] for r in first if r.method == "GET"
                  and not r.path.endswith("/nodePools")) == CLUSTERS
    # Before, past sixteen clusters every tick evicted clients before their next use,
    # and found their endpoints again.
    assert [r for r in later if not r.path.endswith("/nodePools")] == []
    assert len(later) == 3 * len(CLUSTERS)
    assert [c.error for c in report.clusters] == [None] * len(CLUSTERS)
