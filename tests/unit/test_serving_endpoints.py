"""Where a load test reaches a deployed model: the address the serving Gateway reports,
or a client's own resolution (the sandbox's loopback proxies)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sandbox.cluster.objects import ANNOTATION_HOST_PORTS, loopback_url
from shared.config import ServingConfig
from shared.errors import NotFoundError
from shared.serving.endpoints import gateway_url
from shared.serving.gateway import render_gateway


def gateway(*, addresses: list[dict[str, Any]] | None = None,
            annotations: dict[str, str] | None = None) -> dict[str, Any]:
    body = render_gateway(ServingConfig(), {})
    if annotations:
        body["metadata"]["annotations"] = annotations
    if addresses is not None:
        body["status"] = {"addresses": addresses}
    return body


def test_the_gateway_is_reached_at_its_reported_address_on_its_listener_port():
    reported = gateway(addresses=[{"type": "IPAddress", "value": "10.128.0.9"}])
    assert gateway_url(reported) == "http://10.128.0.9:80"


def test_a_gateway_without_an_address_yet_says_its_load_balancer_is_being_programmed():
    with pytest.raises(NotFoundError, match="Gateway models has no address yet"):
        gateway_url(gateway())
    with pytest.raises(NotFoundError, match="no listener named 'https'"):
        gateway_url(gateway(addresses=[{"value": "10.128.0.9"}]), "https")


def test_the_sandbox_reaches_the_gateway_through_its_loopback_listener():
    annotated = gateway(annotations={ANNOTATION_HOST_PORTS: json.dumps({"http": 40100})})
    assert loopback_url(annotated, "http") == "http://127.0.0.1:40100"
    with pytest.raises(NotFoundError):
        loopback_url(gateway(), "http")
