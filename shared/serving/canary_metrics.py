"""PROVISIONAL until the Prometheus adapter lands."""

from __future__ import annotations

from shared.config import ServingConfig, Settings
from shared.errors import TransientError
from shared.serving.canary import ReleaseFigures

__all__ = ["prometheus_metrics"]


def prometheus_metrics(settings: Settings, config: ServingConfig, model: str):  # type: ignore[no-untyped-def]
    def figures(release: str, window: float) -> ReleaseFigures:
        raise TransientError("no Prometheus yet")
    return figures
