"""How a model's requests reach its releases: one Gateway API route per model (pure).

Every release of a Triton model runs behind a Service of its own (named by
:func:`shared.serving.triton.release_name`). The model's ``HTTPRoute``
(``gateway.networking.k8s.io/v1``) attaches to the serving Gateway (``serving.gateway``,
created by the deployment definition) and sends every request under
``/v2/models/<model>`` to those Services, each with a weight: the Gateway picks a
backend per request with probability weight / sum of weights, so shifting weights from
the current release to a canary moves that share of requests, not of connections or
pods.

**One prefix per model.** Triton's KServe v2 HTTP paths for a model all start with
``/v2/models/<model>`` (``/infer``, ``/generate``, ``/generate_stream``, ``/ready``,
``/versions/<n>/infer``, the metadata at the prefix itself). A ``PathPrefix`` match is on
whole path elements, so ``/v2/models/toy`` never takes ``/v2/models/toy2/infer``: each
model's route is independent of every other's on the same Gateway.

**Health as the load balancer sees it.** GKE's Gateway programs a Google Cloud load
balancer that probes each backend's pods itself, and without a ``HealthCheckPolicy``
it asks for ``/`` on the serving port (the policy CRD's ``requestPath`` default), which
Triton does not answer 200 (it serves only ``/v2/...``): every backend would be
unhealthy and the route would answer nothing. :func:`render_health_check` points the
probe at ``/v2/health/ready``, which a Triton started with ``--strict-readiness``
answers 200 only once its model is loaded.

**Limits of the API.** A weight is 0..1,000,000 and a rule has at most 16 backendRefs
(the v1.2.1 CRD); :class:`Backend` and :func:`render_route` refuse more before the
API server would.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.config import ServingConfig
from shared.jobspec.labels import LABEL_MANAGED_BY, MANAGED_BY
from shared.serving.ledger import LABEL_MODEL
from shared.serving.triton import LABEL_INSTANCE, LABEL_SERVER, MODELS_PORT

__all__ = [
    "GATEWAY_GROUP",
    "LISTENER",
    "LISTENER_PORT",
    "MAX_BACKENDS",
    "MAX_WEIGHT",
    "ROUTE_PORT",
    "Backend",
    "model_path",
    "render_gateway",
    "render_health_check",
    "render_route",
    "route_weights",
]

GATEWAY_GROUP = "gateway.networking.k8s.io"
# HTTPRoute's backendRef.weight: "minimum: 0, maximum: 1000000"; rules[].backendRefs
# "maxItems: 16" (gateway-api v1.2.1 config/crd/standard).
MAX_WEIGHT = 1_000_000
MAX_BACKENDS = 16
# Triton's HTTP port on every release Service: the KServe v2 REST API the route carries.
ROUTE_PORT = MODELS_PORT
HEALTH_PATH = "/v2/health/ready"
# The serving Gateway's one listener: plain HTTP on port 80 of its internal address
# (inside the VPC; TLS would need a certificate accelops does not manage).
LISTENER = "http"
LISTENER_PORT = 80
_NAME_MAX = 63
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class Backend:
    """One release Service a route sends requests to, and its weight."""

    service: str
    weight: int

    def __post_init__(self) -> None:
        if not _DNS_1035.match(self.service) or len(self.service) > _NAME_MAX:
            raise ValueError(f"backend service {self.service!r} is not a DNS-1035 label")
        if isinstance(self.weight, bool) or not 0 <= self.weight <= MAX_WEIGHT:
            raise ValueError(f"backend weight {self.weight!r} is outside 0..{MAX_WEIGHT}")


def render_gateway(config: ServingConfig, labels: Mapping[str, str]) -> dict[str, Any]:
    """The serving Gateway (``serving.gateway`` of class ``serving.gateway_class``): one
    HTTP listener taking HTTPRoutes from the serving namespace only, so a route
    elsewhere in the cluster cannot capture a model's paths."""
    return {
        "apiVersion": f"{GATEWAY_GROUP}/v1", "kind": "Gateway",
        "metadata": {"name": config.gateway, "namespace": config.namespace,
                     "labels": dict(labels)},
        "spec": {
            "gatewayClassName": config.gateway_class,
            "listeners": [{
                "name": LISTENER, "protocol": "HTTP", "port": LISTENER_PORT,
                "allowedRoutes": {"namespaces": {"from": "Same"},
                                  "kinds": [{"group": GATEWAY_GROUP, "kind": "HTTPRoute"}]},
            }],
        },
    }


def model_path(model: str) -> str:
    """The path prefix of every KServe v2 request for ``model``."""
    return f"/v2/models/{model}"


def _labels(deployment: str, model: str) -> dict[str, str]:
    # The same labels as the model's Deployment, Service and HPA (shared/serving/triton.py),
    # so one selector finds every object of a model.
    return {LABEL_SERVER: "triton", LABEL_INSTANCE: deployment, LABEL_MODEL: model,
            LABEL_MANAGED_BY: MANAGED_BY}


def render_route(model: str, deployment: str, backends: Sequence[Backend],
                 config: ServingConfig) -> dict[str, Any]:
    """The model's HTTPRoute: ``/v2/models/<model>`` on the serving Gateway, split
    between ``backends`` by weight (in the order given).

    Raises ValueError for no backends, more than 16, or one Service twice (two refs to
    one Service would only add their weights)."""
    if not backends:
        raise ValueError("a route needs at least one backend")
    if len(backends) > MAX_BACKENDS:
        raise ValueError(f"a route has at most {MAX_BACKENDS} backends, not {len(backends)}")
    services = [b.service for b in backends]
    if len(set(services)) != len(services):
        raise ValueError(f"a Service appears twice among the backends: {services}")
    return {
        "apiVersion": f"{GATEWAY_GROUP}/v1", "kind": "HTTPRoute",
        "metadata": {"name": deployment, "namespace": config.namespace,
                     "labels": _labels(deployment, model)},
        "spec": {
            "parentRefs": [{"group": GATEWAY_GROUP, "kind": "Gateway",
                            "name": config.gateway}],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": model_path(model)}}],
                "backendRefs": [{"group": "", "kind": "Service", "name": b.service,
                                 "port": ROUTE_PORT, "weight": b.weight}
                                for b in backends],
            }],
        },
    }


def render_health_check(service_name: str, config: ServingConfig) -> dict[str, Any]:
    """GKE's HealthCheckPolicy for one release Service: the load balancer probes
    ``/v2/health/ready`` on Triton's HTTP port of each pod (named like the Service; a
    policy must live in the Service's namespace and target it by name)."""
    return {
        "apiVersion": "networking.gke.io/v1", "kind": "HealthCheckPolicy",
        "metadata": {"name": service_name, "namespace": config.namespace,
                     "labels": {LABEL_MANAGED_BY: MANAGED_BY}},
        "spec": {
            "default": {"config": {"type": "HTTP", "httpHealthCheck": {
                "portSpecification": "USE_FIXED_PORT", "port": ROUTE_PORT,
                "requestPath": HEALTH_PATH}}},
            "targetRef": {"group": "", "kind": "Service", "name": service_name},
        },
    }


def route_weights(route: Mapping[str, Any]) -> dict[str, int]:
    """``{service: weight}`` of a route's first rule as stored (weight 1 where the
    API server defaulted it), for reading back what the Gateway is told."""
    rules = (route.get("spec") or {}).get("rules") or [{}]
    return {str(ref["name"]): int(ref.get("weight", 1))
            for ref in rules[0].get("backendRefs") or []}
