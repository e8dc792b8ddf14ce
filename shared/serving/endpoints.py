"""Where a deployed model answers, for clients outside the cluster (load tests).

A Service of type LoadBalancer reports its address in ``status.loadBalancer.ingress``
(with per-port numbers when its ``ports`` lists them, else the Service's own ports).
A ClusterIP Service — what ``deploy_model`` renders for Triton — has no outside
address: the error says how to get one. A client that reaches Services some other
way (a port-forward, a local cluster's loopback proxies) resolves them itself and
passes that resolution to :func:`shared.serving.operator.load_target`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from shared.errors import NotFoundError

__all__ = ["ServiceUrl", "service_url"]

# How a client finds a Service's outside address: (Service, port name) -> URL.
ServiceUrl = Callable[[Mapping[str, Any], str], str]


def service_url(service: Mapping[str, Any], port_name: str = "http") -> str:
    """``http://HOST:PORT`` of the Service's port ``port_name``; NotFoundError when it
    has no address reachable from outside the cluster."""
    meta = service.get("metadata") or {}
    name = meta.get("name", "?")
    ports = (service.get("spec") or {}).get("ports") or []
    index = next((i for i, p in enumerate(ports) if p.get("name") == port_name), None)
    if index is None:
        raise NotFoundError(f"Service {name} has no port named {port_name!r}")
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    if ingress:
        host = ingress[0].get("ip") or ingress[0].get("hostname")
        reported = ingress[0].get("ports") or []
        port = reported[index]["port"] if index < len(reported) else ports[index]["port"]
        return f"http://{host}:{port}"
    raise NotFoundError(
        f"Service {name} has no address outside the cluster: expose it (type "
        f"LoadBalancer, or kubectl port-forward svc/{name}) and pass --host")
