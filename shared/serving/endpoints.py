"""Where a deployed model answers, for clients outside the cluster (load tests).

A Triton model answers at the serving Gateway, whose route sends each request to one of
its releases by weight: the Gateway reports its address in ``status.addresses`` once its
load balancer is programmed (:func:`gateway_url`; with the default ``gke-l7-rilb`` class an
address inside the VPC).

A client that reaches the Gateway some other way (a port-forward, a local cluster's
loopback proxies) resolves it itself and passes that resolution to
:func:`shared.serving.operator.load_target`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from shared.errors import NotFoundError

__all__ = ["ServiceUrl", "gateway_url"]

# How a client finds the outside address of a Service's port, or of a Gateway's
# listener: (object, port or listener name) -> URL.
ServiceUrl = Callable[[Mapping[str, Any], str], str]


def gateway_url(gateway: Mapping[str, Any], listener: str = "http") -> str:
    """``http://ADDRESS:PORT`` of a Gateway's listener; NotFoundError while the Gateway
    has no address yet (its load balancer is still being programmed) or no such
    listener."""
    name = (gateway.get("metadata") or {}).get("name", "?")
    listeners = (gateway.get("spec") or {}).get("listeners") or []
    port = next((item.get("port") for item in listeners if item.get("name") == listener),
                None)
    if port is None:
        raise NotFoundError(f"Gateway {name} has no listener named {listener!r}")
    addresses = (gateway.get("status") or {}).get("addresses") or []
    if not addresses or not addresses[0].get("value"):
        raise NotFoundError(f"Gateway {name} has no address yet: GKE programs its load "
                            f"balancer within minutes of its creation (kubectl get gateway "
                            f"{name} -n <serving namespace>)")
    return f"http://{addresses[0]['value']}:{port}"
