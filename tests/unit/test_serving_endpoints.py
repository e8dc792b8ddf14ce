"""Where a load test reaches a deployed model: what Kubernetes reports, or a client's own
resolution (the sandbox's loopback proxies)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sandbox.cluster.objects import ANNOTATION_HOST_PORTS, loopback_url
from shared.errors import NotFoundError
from shared.serving.endpoints import service_url

PORTS = [{"name": "http", "port": 8000}, {"name": "grpc", "port": 8001},
         {"name": "metrics", "port": 8002}]


def service(*, ingress: list[dict[str, Any]] | None = None,
            annotations: dict[str, str] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": "toy-lm", "namespace": "serving"},
                            "spec": {"ports": PORTS}}
    if annotations:
        body["metadata"]["annotations"] = annotations
    if ingress is not None:
        body["spec"]["type"] = "LoadBalancer"
        body["status"] = {"loadBalancer": {"ingress": ingress}}
    return body


def test_a_load_balancer_is_reached_at_its_address_on_the_services_own_port():
    assert service_url(service(ingress=[{"ip": "10.128.0.7"}])) == "http://10.128.0.7:8000"
    assert service_url(service(ingress=[{"hostname": "lb.example.com"}]), "metrics") \
        == "http://lb.example.com:8002"


def test_a_load_balancer_that_reports_port_numbers_is_reached_on_those():
    ingress = [{"ip": "127.0.0.1", "ports": [{"port": 40100, "protocol": "TCP"},
                                             {"port": 40101, "protocol": "TCP"},
                                             {"port": 40102, "protocol": "TCP"}]}]

    assert service_url(service(ingress=ingress), "grpc") == "http://127.0.0.1:40101"


def test_a_cluster_ip_service_has_no_outside_address_and_the_error_says_how_to_get_one():
    with pytest.raises(NotFoundError, match="kubectl port-forward svc/toy-lm"):
        service_url(service())


def test_annotations_do_not_give_a_cluster_ip_service_an_outside_address():
    annotated = service(annotations={ANNOTATION_HOST_PORTS: json.dumps({"http": 40123})})

    with pytest.raises(NotFoundError):
        service_url(annotated)


def test_a_port_the_service_does_not_have_is_not_found():
    with pytest.raises(NotFoundError, match="no port named 'admin'"):
        service_url(service(ingress=[{"ip": "10.128.0.7"}]), "admin")


def test_the_sandbox_reaches_any_proxied_service_on_its_loopback_port():
    annotated = service(annotations={ANNOTATION_HOST_PORTS: json.dumps(
        {"http": 40123, "grpc": 40124, "metrics": 40125})})

    assert loopback_url(annotated) == "http://127.0.0.1:40123"
    assert loopback_url(annotated, "metrics") == "http://127.0.0.1:40125"
    with pytest.raises(NotFoundError):
        loopback_url(service())
