"""The sandbox Kubernetes API's ``services/proxy`` and ``deployments/scale`` subresources,
driven through the library's client (shared.kube) over real sockets, with an endpoint
that is a real HTTP server; RBAC as kube-apiserver maps those requests."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from sandbox.cluster.services import pod_address
from sandbox.kubeapi import KubeApiServer, start_kube_api
from sandbox.kubeapi.attributes import attributes_for
from sandbox.kubeapi.authn import UserInfo
from sandbox.kubeapi.rbac import authorize, policy_of
from shared import kube
from shared.errors import NotFoundError, PermanentError, UnavailableError

NS = "inference"
SEEN: list[dict[str, Any]] = []


class _Echo(BaseHTTPRequestHandler):
    """What Locust's web API would get: answers with what it received."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        seen = {"method": self.command, "path": self.path, "body": body,
                "authorization": self.headers.get("Authorization"),
                "content_type": self.headers.get("Content-Type")}
        SEEN.append(seen)
        data = json.dumps(seen).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def endpoint() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KubeApiServer]:
    server = start_kube_api(pod_address=pod_address)
    monkeypatch.setenv("KUBECONFIG", str(server.write_kubeconfig(tmp_path / "kubeconfig")))
    kube.reset_client()
    try:
        yield server
    finally:
        kube.reset_client()
        server.stop()


def _master(api: KubeApiServer, web_host_port: int | None, *, ready: bool = True) -> None:
    """A Service ``locust-master`` (ports master 5557, web 8089), its pod listening on
    ``web_host_port`` for 8089, and the Endpoints the endpoints controller would keep."""
    store = api.store
    store.create("", "namespaces", {"metadata": {"name": NS}})
    store.create("", "services", {"metadata": {"name": "locust-master", "namespace": NS},
                                  "spec": {"selector": {"app": "locust"}, "ports": [
                                      {"name": "master", "port": 5557, "targetPort": 5557},
                                      {"name": "web", "port": 8089, "targetPort": 8089}]}},
                 namespace=NS)
    annotations = ({"sandbox.accelops.dev/host-ports": json.dumps({"8089": web_host_port})}
                   if web_host_port else {})
    store.create("", "pods", {"metadata": {"name": "master-0", "namespace": NS,
                                           "labels": {"app": "locust"},
                                           "annotations": annotations},
                              "spec": {"containers": [{"name": "locust", "image": "x"}]},
                              "status": {"podIP": "10.4.0.7", "podIPs": [{"ip": "10.4.0.7"}]}},
                 namespace=NS)
    address = {"ip": "10.4.0.7", "targetRef": {"kind": "Pod", "name": "master-0",
                                                "namespace": NS}}
    subset = {"ports": [{"name": "master", "port": 5557}, {"name": "web", "port": 8089}],
              ("addresses" if ready else "notReadyAddresses"): [address]}
    store.create("", "endpoints", {"metadata": {"name": "locust-master", "namespace": NS},
                                   "subsets": [subset]}, namespace=NS)


def test_a_form_posted_through_the_service_proxy_reaches_the_pod_without_the_token(
        api: KubeApiServer, endpoint: int) -> None:
    _master(api, endpoint)
    SEEN.clear()

    answer = kube.get_client().service_proxy(
        "POST", NS, "locust-master:8089", "swarm",
        form=[("user_count", "4"), ("spawn_rate", "4"), ("test_id", "lt-1")])

    assert answer["method"] == "POST"
    assert answer["path"] == "/swarm"
    assert parse_qs(answer["body"]) == {"user_count": ["4"], "spawn_rate": ["4"],
                                        "test_id": ["lt-1"]}
    assert answer["content_type"] == "application/x-www-form-urlencoded"
    # The API server's authentication filter removes the caller's credentials.
    assert answer["authorization"] is None


def test_the_port_may_be_named_and_the_query_is_kept(api: KubeApiServer, endpoint: int) -> None:
    _master(api, endpoint)

    answer = kube.get_client().service_proxy("GET", NS, "locust-master:web",
                                             "stats/requests?x=1")

    assert answer["path"] == "/stats/requests?x=1"


@pytest.mark.parametrize(("service", "error", "message"), [
    ("locust-master:9999", UnavailableError, 'no service port 9999 found for service '
                                             '"locust-master"'),
    ("locust-master:nope", UnavailableError, 'no endpoints available for service '
                                             '"locust-master:nope"'),
    ("missing:8089", NotFoundError, 'services "missing" not found'),
    ("ftp:locust-master:8089", PermanentError, 'invalid service request '
                                               '"ftp:locust-master:8089"'),
])
def test_a_port_or_service_that_does_not_exist_gets_the_api_servers_answer(
        api: KubeApiServer, endpoint: int, service: str, error: type[Exception],
        message: str) -> None:
    _master(api, endpoint)

    with pytest.raises(error, match=re.escape(message)):
        kube.get_client().service_proxy("GET", NS, service, "")


def test_a_service_without_ready_endpoints_is_unavailable(api: KubeApiServer,
                                                          endpoint: int) -> None:
    _master(api, endpoint, ready=False)

    with pytest.raises(UnavailableError,
                       match=re.escape(
            '503 no endpoints available for service "locust-master:8089"')):
        kube.get_client().service_proxy("GET", NS, "locust-master:8089", "")


def test_an_endpoint_that_listens_nowhere_cannot_be_reached(api: KubeApiServer) -> None:
    _master(api, None)

    with pytest.raises(UnavailableError, match=re.escape(
            "error trying to reach service: dial tcp 10.4.0.7:8089")):
        kube.get_client().service_proxy("GET", NS, "locust-master:8089", "")


def test_the_scale_subresource_reads_and_sets_a_deployments_replicas(
        api: KubeApiServer) -> None:
    api.store.create("", "namespaces", {"metadata": {"name": NS}})
    api.store.create("apps", "deployments", {
        "metadata": {"name": "locust-worker", "namespace": NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "locust", "c": "w"}},
                 "template": {"metadata": {"labels": {"app": "locust", "c": "w"}},
                              "spec": {"containers": [{"name": "l", "image": "x"}]}}}},
        namespace=NS)
    client = kube.get_client()

    before = client.scale(kube.DEPLOYMENTS, "locust-worker", NS)
    after = client.scale(kube.DEPLOYMENTS, "locust-worker", NS, replicas=3)

    assert before["kind"] == "Scale"
    assert before["apiVersion"] == "autoscaling/v1"
    assert before["spec"]["replicas"] == 1
    assert before["status"]["selector"] == "app=locust,c=w"
    assert after["spec"]["replicas"] == 3
    assert client.get(kube.DEPLOYMENTS, "locust-worker", NS)["spec"]["replicas"] == 3
    with pytest.raises(PermanentError, match=re.escape(
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0")):
        client.scale(kube.DEPLOYMENTS, "locust-worker", NS, replicas=-1)
    with pytest.raises(NotFoundError, match=re.escape('deployments.apps "nope" not found')):
        client.scale(kube.DEPLOYMENTS, "nope", NS)


def test_rbac_sees_a_proxied_post_as_create_on_services_proxy_named_with_its_port() -> None:
    path = f"/api/v1/namespaces/{NS}/services/locust-master:8089/proxy/swarm"
    post, get = attributes_for("POST", path), attributes_for("GET", path)
    role = {"metadata": {"name": "loadtest", "namespace": NS}, "rules": [
        {"apiGroups": [""], "resources": ["services/proxy"], "verbs": ["get", "create"],
         "resourceNames": ["locust-master:8089"]}]}
    by_name_only = {"metadata": {"name": "named", "namespace": NS}, "rules": [
        {"apiGroups": [""], "resources": ["services/proxy"], "verbs": ["get", "create"],
         "resourceNames": ["locust-master"]}]}
    alice = UserInfo("alice", groups=("system:authenticated",))

    def allowed(role_obj: dict[str, Any]) -> tuple[bool, bool]:
        name = role_obj["metadata"]["name"]
        policy = policy_of([], [role_obj], [], [{
            "metadata": {"name": name, "namespace": NS},
            "roleRef": {"kind": "Role", "name": name},
            "subjects": [{"kind": "User", "name": "alice"}]}])
        return authorize(policy, alice, post).allowed, authorize(policy, alice, get).allowed

    assert (post.verb, post.resource, post.subresource, post.name) == (
        "create", "services", "proxy", "locust-master:8089")
    assert get.verb == "get"
    assert allowed(role) == (True, True)
    # The name RBAC sees carries the port: a rule naming the Service alone matches nothing.
    assert allowed(by_name_only) == (False, False)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_the_real_kubectl_scales_through_the_subresource_discovery_lists(
        api: KubeApiServer, tmp_path: Path) -> None:
    api.store.create("", "namespaces", {"metadata": {"name": NS}})
    api.store.create("apps", "deployments", {
        "metadata": {"name": "locust-worker", "namespace": NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"c": "w"}},
                 "template": {"metadata": {"labels": {"c": "w"}},
                              "spec": {"containers": [{"name": "l", "image": "x"}]}}}},
        namespace=NS)
    env = {**os.environ, "KUBECONFIG": str(api.write_kubeconfig(tmp_path / "kubectl")),
           "KUBECACHEDIR": str(tmp_path / "cache")}

    scaled = subprocess.run(["kubectl", "scale", "-n", NS, "deployment/locust-worker",
                             "--replicas=3"], env=env, capture_output=True, text=True,
                            timeout=60, check=False)

    assert scaled.returncode == 0, scaled.stderr
    assert api.store.get("apps", "deployments", "locust-worker", NS)["spec"]["replicas"] == 3
