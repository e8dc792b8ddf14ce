"""Kubernetes access without KUBECONFIG: GKE endpoint discovery through the Container API."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from sandbox.gke import Cluster, GkeApiServer, start_gke_api
from sandbox.kubeapi import KubeApiServer
from sandbox.pubsub import PubSubServer
from shared import gke, kube
from shared.errors import NotFoundError
from shared.gke import TokenSource
from shared.kube import JOBSETS
from tests.functional.conftest import load_event
from tests.jobs_fixtures import METRICS_TOPIC


@pytest.fixture
def gke_api(kube_api: KubeApiServer) -> Iterator[GkeApiServer]:
    server = start_gke_api([Cluster("acme", "us-central2-b", "tpu", kube_api.url)])
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def discovery_env(cluster: kube.KubeClient, gke_api: GkeApiServer, pubsub_api: PubSubServer,
                  monkeypatch: pytest.MonkeyPatch) -> None:
    # submit_job publishes its lifecycle record in the cluster's project.
    pubsub_api.broker.create_topic(f"projects/acme/topics/{METRICS_TOPIC}")
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("ACCELOPS_GKE_ENDPOINT", gke_api.url)
    monkeypatch.setenv("ACCELOPS_PROJECT", "acme")
    monkeypatch.setenv("ACCELOPS_LOCATION", "us-central2-b")
    monkeypatch.setenv("ACCELOPS_CLUSTER", "tpu")
    kube.reset_client()


def test_without_kubeconfig_the_cluster_is_found_through_the_container_api(
    app_client, discovery_env, kube_api
):
    response = app_client.post("/", json=load_event("pubsub_push_job_request.json"))

    assert response.status_code == 200
    assert kube.get_client().host == kube_api.url
    assert len(kube.get_client().list(JOBSETS)) == 1


def test_an_unknown_cluster_is_reported_as_not_found(discovery_env, monkeypatch):
    monkeypatch.setenv("ACCELOPS_CLUSTER", "missing")
    with pytest.raises(NotFoundError, match="missing"):
        kube.get_client()


class FakeCredentials:
    """Google credentials as google-auth shapes them: token, naive-UTC expiry, refresh()."""

    def __init__(self, expiry: dt.datetime) -> None:
        self.token: str | None = None
        self.expiry: dt.datetime | None = expiry
        self.refreshes = 0

    def refresh(self, request: Any) -> None:
        self.refreshes += 1
        self.token = f"token-{self.refreshes}"


NOW = dt.datetime(2026, 11, 21, 12, 0, 0)


def test_the_token_is_fetched_once_and_reused_while_it_is_fresh():
    creds = FakeCredentials(expiry=NOW + dt.timedelta(hours=1))
    source = TokenSource(creds, request_factory=object, now=lambda: NOW)

    assert [source(), source(), source()] == ["token-1"] * 3
    assert creds.refreshes == 1


def test_the_token_is_refreshed_five_minutes_before_it_expires():
    clock = {"now": NOW}
    creds = FakeCredentials(expiry=NOW + dt.timedelta(minutes=30))
    source = TokenSource(creds, request_factory=object, now=lambda: clock["now"])
    source()

    clock["now"] = NOW + dt.timedelta(minutes=24)
    assert source() == "token-1"
    clock["now"] = NOW + dt.timedelta(minutes=26)
    assert source() == "token-2"


@pytest.fixture
def header_recorder() -> Iterator[tuple[str, list[str]]]:
    """An HTTP endpoint that answers an empty list and records Authorization headers."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization", ""))
            body = b'{"kind": "JobSetList", "items": []}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_each_request_carries_the_current_token_from_the_token_source(header_recorder):
    from kubernetes import client as k8s

    url, seen = header_recorder
    clock = {"now": NOW}
    creds = FakeCredentials(expiry=NOW + dt.timedelta(minutes=30))
    configuration = k8s.Configuration(host=url)
    kube._install_token(configuration, TokenSource(creds, object, now=lambda: clock["now"]))
    client = kube.KubeClient(k8s.ApiClient(configuration))

    client.list(JOBSETS, "research")
    clock["now"] = NOW + dt.timedelta(minutes=29)
    client.list(JOBSETS, "research")

    assert seen == ["Bearer token-1", "Bearer token-2"]


def test_gke_discovery_reuses_one_container_client_per_process(discovery_env):
    from shared.config import Settings

    settings = Settings.from_env()
    assert gke.container_client(settings) is gke.container_client(settings)
