"""The GKE operations of the cluster the environment names, through the Container
API client: what the demo's timelines and the off-hours scenario's readiness read."""

from __future__ import annotations

from typing import Any

from shared import gke
from shared.config import Settings

__all__ = ["operations"]


def operations() -> list[dict[str, Any]]:
    """Every GKE operation of the cluster, as Container API JSON."""
    from google.cloud import container_v1  # type: ignore[attr-defined,unused-ignore]


    settings = Settings.from_env()
    response = gke.container_client(settings).list_operations(
        parent=f"projects/{settings.project}/locations/{settings.location}")
    return [container_v1.Operation.to_dict(op, use_integers_for_enums=False,
                                           preserving_proto_field_name=False)
            for op in response.operations]
