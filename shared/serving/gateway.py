"""PROVISIONAL: the model's HTTPRoute (replaced by the routing work)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shared.config import ServingConfig

__all__ = ["Backend", "render_route"]

GATEWAY = "accelops-models"


@dataclass(frozen=True, slots=True)
class Backend:
    service: str
    weight: int


def render_route(model: str, deployment: str, backends: Sequence[Backend],
                 config: ServingConfig) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": deployment, "namespace": config.namespace},
        "spec": {"parentRefs": [{"name": GATEWAY}],
                 "rules": [{"matches": [{"path": {"type": "PathPrefix",
                                                  "value": f"/v2/models/{model}"}}],
                            "backendRefs": [{"name": b.service, "port": 8000,
                                             "weight": b.weight} for b in backends]}]},
    }
