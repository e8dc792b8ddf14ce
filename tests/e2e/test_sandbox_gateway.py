"""GKE's Gateway in the sandbox: a model's HTTPRoute splits requests between release
Services by weight, over real sockets.

The sandbox Kubernetes API and the Simulation run in process (as in
test_sandbox_deployments.py); the official kubernetes client creates two releases of a
model — a Deployment and a Service each, pods running the stdlib echo server, which says
which release answered — the Gateway, and the route accelops renders
(shared/serving/gateway.py). Requests go to the Gateway's loopback listener; shares are
counted from what the backends answered (each reply names its release), never from the
Gateway's own bookkeeping.

**Tolerance.** With n requests and a backend of weight share p, the count it gets is
binomial (each request is an independent draw): mean n*p, standard deviation
sigma = sqrt(n*p*(1-p)). The tests accept mean +/- 5 sigma: a correct router fails that
with probability below 6e-7 per check, while a router that ignored weights (50/50 over
two backends) lands 90 sigma away at 95/5 and n = 2,000 (sigma = 9.7 requests, bound
+/- 49).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests
from kubernetes import client, config

from sandbox.cluster import Simulation
from sandbox.cluster.echo import ECHO_IMAGE, ECHO_IMAGE_KEY, EchoLauncher
from sandbox.cluster.objects import loopback_url
from sandbox.common.clock import SimClock
from sandbox.kubeapi import KubeApiServer, ObjectStore, install_crds, start_kube_api
from shared.config import ServingConfig
from shared.serving.gateway import Backend, render_route
from shared.serving.triton import release_name
from tests.e2e.conftest import wait_for

pytestmark = pytest.mark.e2e

CLUSTER = "projects/acme/locations/us-central1-a/clusters/serve"
CONFIG = ServingConfig()
NAMESPACE = CONFIG.namespace
GROUP, VERSION = "gateway.networking.k8s.io", "v1"
MODEL = "toy-lm"
OLD = release_name(MODEL, "r-aaaaaaaaaaaa")
NEW = release_name(MODEL, "r-bbbbbbbbbbbb")
INFER = f"/v2/models/{MODEL}/infer"


def five_sigma(n: int, p: float) -> tuple[float, float]:
    """The closed interval mean +/- 5 sigma for a binomial(n, p) count."""
    sigma = math.sqrt(n * p * (1 - p))
    return n * p - 5 * sigma, n * p + 5 * sigma


# ----------------------------------------------------------------------------- builders


def release(service: str, version: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A release's Deployment (two echo pods) and its Service."""
    labels = {"app": MODEL, "release": service}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": service, "namespace": NAMESPACE},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                     "name": "server", "image": ECHO_IMAGE, "args": [f"--version={version}"],
                     "ports": [{"name": "http", "containerPort": 8000}],
                     "readinessProbe": {"httpGet": {"path": "/v2/health/ready",
                                                    "port": "http"}, "periodSeconds": 1}}]}}},
    }
    service_body = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": service, "namespace": NAMESPACE},
        "spec": {"selector": labels,
                 "ports": [{"name": "http", "port": 8000, "targetPort": "http"}]},
    }
    return deployment, service_body


def gateway() -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Gateway",
            "metadata": {"name": CONFIG.gateway, "namespace": NAMESPACE},
            "spec": {"gatewayClassName": CONFIG.gateway_class,
                     "listeners": [{"name": "http", "protocol": "HTTP", "port": 80,
                                    "allowedRoutes": {"namespaces": {"from": "Same"}}}]}}


class GatewayCluster:
    """Kubernetes API + Simulation, two releases of one model, and the Gateway."""

    def __init__(self, tmp_path: Path) -> None:
        self.clock = SimClock(speed=1e-6, start=datetime(2026, 11, 28, 8, tzinfo=UTC))
        self.store = ObjectStore(clock=self.clock)
        self.kube: KubeApiServer = start_kube_api(clock=self.clock, store=self.store)
        install_crds(self.kube.store)
        self.simulation = Simulation(
            self.store, self.clock, cluster=CLUSTER, tick=0.01,
            launchers={ECHO_IMAGE_KEY: EchoLauncher(tmp_path / "containers")},
            max_processes=4, pod_time_scale=0.05).start()
        self.simulation.on_pool_event("POOL_RUNNING", CLUSTER, {
            "name": "cpu", "nodeCount": 2, "status": "RUNNING",
            "config": {"machineType": "e2-standard-8"}})
        self.api = config.new_client_from_config(
            config_file=str(self.kube.write_kubeconfig(tmp_path / "kubeconfig")))
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.core.create_namespace(client.V1Namespace(
            metadata=client.V1ObjectMeta(name=NAMESPACE)))
        for service, version in ((OLD, "old"), (NEW, "new")):
            deployment, service_body = release(service, version)
            self.apps.create_namespaced_deployment(NAMESPACE, deployment)
            self.core.create_namespaced_service(NAMESPACE, service_body)
        self.custom.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "gateways",
                                                    gateway())
        self.session = requests.Session()

    def close(self) -> None:
        self.session.close()
        self.simulation.stop()
        self.api.close()
        self.kube.stop()

    def ready(self) -> None:
        """Both releases have two ready pods behind their Services."""
        def done() -> bool:
            endpoints = {e.metadata.name: e for e in
                         self.core.list_namespaced_endpoints(NAMESPACE).items}
            return all(s in endpoints and endpoints[s].subsets
                       and len(endpoints[s].subsets[0].addresses or []) == 2
                       for s in (OLD, NEW))
        assert wait_for(done, timeout=30), "the releases' pods never became ready"

    def route(self, *backends: Backend) -> dict[str, Any]:
        body = render_route(MODEL, MODEL, backends, CONFIG)
        try:
            return dict(self.custom.create_namespaced_custom_object(
                GROUP, VERSION, NAMESPACE, "httproutes", body) or {})
        except client.ApiException as exc:
            if exc.status != 409:
                raise
        return dict(self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, "httproutes", MODEL, {"spec": body["spec"]}))

    def read(self, plural: str, name: str) -> dict[str, Any]:
        return dict(self.custom.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE,
                                                             plural, name))

    def url(self, path: str = INFER) -> str:
        found = wait_for(lambda: self._url_or_none(), timeout=10)
        assert found, f"the Gateway never got a listener: {self.read('gateways', 'models')}"
        return found + path

    def _url_or_none(self) -> str | None:
        try:
            return loopback_url(self.read("gateways", CONFIG.gateway), "http")
        except Exception:
            return None

    def send(self, n: int, path: str = INFER) -> Counter[str]:
        """``n`` requests through the Gateway from 4 clients: who answered, or the status."""
        url = self.url(path)

        def one(_: int) -> str:
            reply = requests.post(url, json={"inputs": []}, timeout=10)
            return reply.json()["version"] if reply.status_code == 200 \
                else str(reply.status_code)

        with ThreadPoolExecutor(max_workers=4) as pool:
            return Counter(pool.map(one, range(n)))


def parent_condition(route: dict[str, Any], kind: str) -> dict[str, Any]:
    [parent] = route["status"]["parents"]
    return next(c for c in parent["conditions"] if c["type"] == kind)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayCluster]:
    # One cluster for the module (read-mostly: each test sets the route it needs).
    running = GatewayCluster(tmp_path_factory.mktemp("gateway"))
    try:
        running.ready()
        yield running
    finally:
        running.close()


# ----------------------------------------------------------------------------- tests


def test_gke_gateway_classes_exist_and_the_gateway_is_programmed_on_loopback(cluster):
    classes = cluster.custom.list_cluster_custom_object(GROUP, VERSION, "gatewayclasses")
    names = {c["metadata"]["name"]: c for c in classes["items"]}
    assert {"gke-l7-rilb", "gke-l7-regional-external-managed",
            "gke-l7-global-external-managed"} <= set(names)
    assert names["gke-l7-rilb"]["spec"]["controllerName"] == "networking.gke.io/gateway"
    cluster.route(Backend(OLD, 1))

    def programmed() -> dict[str, Any] | None:
        body = cluster.read("gateways", CONFIG.gateway)
        listeners = (body.get("status") or {}).get("listeners") or []
        return body if listeners and listeners[0]["attachedRoutes"] == 1 else None

    body = wait_for(programmed, timeout=10)
    assert body, cluster.read("gateways", CONFIG.gateway)
    status = body["status"]
    assert status["addresses"] == [{"type": "IPAddress", "value": "127.0.0.1"}]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Accepted": "True", "Programmed": "True"}
    [listener] = status["listeners"]
    assert listener["supportedKinds"] == [{"group": GROUP, "kind": "HTTPRoute"}]
    assert cluster.url().startswith("http://127.0.0.1:")


def test_a_95_5_route_splits_two_thousand_requests_within_five_sigma(cluster):
    cluster.route(Backend(OLD, 95), Backend(NEW, 5))
    n = 2000

    counts = cluster.send(n)

    assert sum(counts.values()) == n
    assert set(counts) <= {"old", "new"}, counts  # every request answered by a release
    low, high = five_sigma(n, 0.05)
    assert low <= counts["new"] <= high, counts
    route = cluster.read("httproutes", MODEL)
    assert parent_condition(route, "Accepted")["status"] == "True"
    assert parent_condition(route, "ResolvedRefs")["reason"] == "ResolvedRefs"


def test_weight_zero_gets_no_request_and_a_patch_applies_to_the_next_request(cluster):
    cluster.route(Backend(OLD, 0), Backend(NEW, 100))

    assert cluster.send(500) == Counter({"new": 500})

    cluster.route(Backend(OLD, 100), Backend(NEW, 0))
    assert cluster.send(1) == Counter({"old": 1})  # the very next request
    cluster.route(Backend(OLD, 1), Backend(NEW, 1))
    counts = cluster.send(600)
    low, high = five_sigma(600, 0.5)
    assert low <= counts["new"] <= high, counts


def test_a_missing_backend_service_gets_its_share_of_500s_and_says_why(cluster):
    missing = release_name(MODEL, "r-cccccccccccc")
    cluster.route(Backend(OLD, 3), Backend(missing, 1))

    def resolved_false() -> dict[str, Any] | None:
        route = cluster.read("httproutes", MODEL)
        parents = (route.get("status") or {}).get("parents") or []
        return route if parents and parent_condition(route, "ResolvedRefs")["status"] \
            == "False" else None

    route = wait_for(resolved_false, timeout=10)
    assert route, cluster.read("httproutes", MODEL)
    refs = parent_condition(route, "ResolvedRefs")
    assert refs["reason"] == "BackendNotFound"
    assert missing in refs["message"]
    assert parent_condition(route, "Accepted")["status"] == "True"
    n = 800
    counts = cluster.send(n)
    assert set(counts) == {"old", "500"}, counts
    low, high = five_sigma(n, 0.25)
    assert low <= counts["500"] <= high, counts

    cluster.route(Backend(missing, 1))
    assert cluster.send(20) == Counter({"500": 20})


def test_paths_outside_the_models_prefix_are_not_found(cluster):
    cluster.route(Backend(OLD, 1))

    # PathPrefix matches whole path elements: toy-lm2 is another model.
    assert cluster.send(3, f"/v2/models/{MODEL}2/infer") == Counter({"404": 3})
    assert cluster.send(3, "/v2/health/ready") == Counter({"404": 3})
    assert cluster.send(3, f"/v2/models/{MODEL}") == Counter({"old": 3})


def test_server_sent_events_stream_through_the_gateway_unbuffered(cluster):
    cluster.route(Backend(OLD, 1))
    url = cluster.url(f"/v2/models/{MODEL}/generate_stream?events=3&interval=0.3")

    with requests.get(url, stream=True, timeout=10) as reply:
        started = time.monotonic()
        lines = reply.iter_lines()
        first = next(line for line in lines if line)
        first_at = time.monotonic() - started
        rest = [line for line in lines if line]
        total = time.monotonic() - started

    assert reply.headers["Content-Type"] == "text/event-stream"
    assert first.startswith(b"data: ")
    assert len(rest) == 2
    # The first event arrived before the server had written the others (0.3 s apart).
    assert first_at < 0.25
    assert total >= 0.5


def test_the_api_server_refuses_a_weight_over_a_million_with_the_crds_words(cluster):
    body = render_route(MODEL, "other-route", [Backend(OLD, 1)], CONFIG)
    body["spec"]["rules"][0]["backendRefs"][0]["weight"] = 1_000_001

    with pytest.raises(client.ApiException) as refused:
        cluster.custom.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE,
                                                       "httproutes", body)

    assert refused.value.status == 422
    assert "should be less than or equal to 1000000" in str(refused.value.body)


def test_a_route_from_another_namespace_is_not_allowed_by_the_listener_and_gets_nothing(
        cluster):
    cluster.route(Backend(OLD, 1))
    cluster.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
        name="elsewhere")))
    body = render_route("intruder", "intruder", [Backend(OLD, 1)],
                        ServingConfig(namespace="elsewhere"))
    body["spec"]["parentRefs"][0]["namespace"] = NAMESPACE
    cluster.custom.create_namespaced_custom_object(GROUP, VERSION, "elsewhere", "httproutes",
                                                   body)

    def refused() -> dict[str, Any] | None:
        route = cluster.custom.get_namespaced_custom_object(GROUP, VERSION, "elsewhere",
                                                            "httproutes", "intruder")
        return route if (route.get("status") or {}).get("parents") else None

    route = wait_for(refused, timeout=10)
    assert route, "the Gateway's controller never wrote the route's status"
    accepted = parent_condition(route, "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "NotAllowedByListeners")
    assert cluster.send(3, "/v2/models/intruder/infer") == Counter({"404": 3})
