"""Where a deployed model answers, for clients outside the cluster (load tests).

A Service of type LoadBalancer reports its address in
``status.loadBalancer.ingress`` (with per-port numbers when they differ from
``spec.ports``, as the sandbox's host proxies do); the sandbox also publishes its
loopback ports for ClusterIP Services in an annotation. A ClusterIP Service in a real
cluster has no outside address: the error says how to get one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from shared.errors import NotFoundError

__all__ = ["SANDBOX_HOST_PORTS", "service_url"]

SANDBOX_HOST_PORTS = "sandbox.accelops.dev/host-ports"


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
    try:
        host_ports = json.loads((meta.get("annotations") or {}).get(SANDBOX_HOST_PORTS, "{}"))
    except ValueError:
        host_ports = {}
    if isinstance(host_ports, dict) and port_name in host_ports:
        return f"http://127.0.0.1:{int(host_ports[port_name])}"
    raise NotFoundError(
        f"Service {name} has no address outside the cluster: expose it (type "
        f"LoadBalancer, or kubectl port-forward svc/{name}) and pass --host")
