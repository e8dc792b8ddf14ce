"""The sandbox's stand-in for Managed Service for Prometheus: a real Prometheus fed by
managed collection's decisions (``collection``, pure; ``prometheus``, the server;
``python -m sandbox.monitoring`` runs both)."""

from __future__ import annotations

from sandbox.monitoring.collection import ScrapeJob, Site, scrape_jobs, selector_matches
from sandbox.monitoring.prometheus import (
    PrometheusNotInstalledError,
    config_text,
    find_prometheus,
    prometheus_command,
)

__all__ = [
    "PrometheusNotInstalledError",
    "ScrapeJob",
    "Site",
    "config_text",
    "find_prometheus",
    "prometheus_command",
    "scrape_jobs",
    "selector_matches",
]
