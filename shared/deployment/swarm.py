"""A test for the load generator deployed on the cluster, in its master's web API's terms.

The master (``shared.deployment.locust``: ``locust-master``, not headless) starts a
test from ``POST /swarm``, the form its web UI posts (``locust/web.py`` at the pinned
Locust, 2.47): ``user_count``, ``spawn_rate``, ``host``, ``run_time``, and any other
field named after one of the master's parsed options sets that option — this is how
the load generator's own options (test id, model, server, SLOs, ...) reach every
worker with the test. ``GET /stats/requests`` reports the master's state, its workers
and its merged statistics; ``POST /stop`` stops the test.

Everything is reached through the Kubernetes API server's service proxy
(``services/locust-master:8089/proxy/...``), which the API server authorizes
(``services/proxy``): the web UI has no authentication of its own and its Service is
ClusterIP only. Pure: forms, paths and the parsing of the master's answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.deployment.locust import LOCUST_MASTER, WEB_PORT
from shared.metrics.loadtest.locust_stats import LocustAggregate

__all__ = ["MASTER_WEB", "MasterStats", "SwarmTest", "master_stats", "swarm_form",
           "swarm_refusal"]

# The master's web port through the service proxy: the name RBAC's resourceNames sees.
MASTER_WEB = f"{LOCUST_MASTER}:{WEB_PORT}"
# Locust's runner states (locust.runners.STATE_*).
RUNNING, STOPPED, READY, MISSING = "running", "stopped", "ready", "missing"


@dataclass(frozen=True, slots=True)
class SwarmTest:
    """What one test asks of the master: the same users, spawn rate, run time and test
    id reach every worker."""

    test_id: str
    host: str
    model: str
    server: str = "triton"
    users: int = 4
    spawn_rate: float | None = None  # default: all users in the first second
    duration_s: int = 10
    accelerator: str = "cpu"
    max_tokens: int = 16
    bad_request_ratio: float = 0.0
    stream: bool = False
    # SLOs in ms by option name (slo_ttft_ms, slo_tpot_ms, slo_latency_ms).
    slos: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if self.users < 1:
            raise ValueError(f"users must be at least 1, not {self.users}")
        if self.duration_s < 1:
            raise ValueError(f"duration must be at least 1 s, not {self.duration_s}")


def swarm_form(test: SwarmTest) -> list[tuple[str, str]]:
    """The ``POST /swarm`` form for ``test``: Locust's own fields, then the load
    generator's options by their option names (a bool as ``true``/``false``, which is
    how the master's form handling reads one)."""
    rate = test.spawn_rate if test.spawn_rate is not None else float(test.users)
    form = [("user_count", str(test.users)), ("spawn_rate", f"{rate:g}"),
            ("host", test.host), ("run_time", f"{test.duration_s}s"),
            ("test_id", test.test_id), ("model", test.model), ("server", test.server),
            ("accelerator", test.accelerator), ("max_tokens", str(test.max_tokens)),
            ("bad_request_ratio", f"{test.bad_request_ratio:g}"),
            ("stream", "true" if test.stream else "false")]
    form += [(name, f"{value:g}") for name, value in test.slos]
    return form


def swarm_refusal(answer: Any) -> str | None:
    """Why the master did not start the test (its ``message``), None when it did."""
    if isinstance(answer, Mapping) and answer.get("success") is True:
        return None
    if isinstance(answer, Mapping):
        return str(answer.get("message") or "no reason given")
    return f"unexpected answer {answer!r:.200}"


@dataclass(frozen=True, slots=True)
class MasterStats:
    """What ``GET /stats/requests`` says: the runner's state, its workers by id and
    state, the users running, and the "Aggregated" row."""

    state: str
    workers: Mapping[str, str]
    users: int
    aggregate: LocustAggregate

    def connected(self) -> int:
        """Workers the master counts on (not ``missing``: those stopped heartbeating)."""
        return sum(1 for state in self.workers.values() if state != MISSING)


def master_stats(answer: Mapping[str, Any]) -> MasterStats:
    """Parse ``/stats/requests``. Its "Aggregated" row (the last of ``stats``) carries
    the median and the 99th percentile, not the 90th (``PERCENTILES_TO_STATISTICS``).

    Raises KeyError, TypeError or ValueError for an answer that is not Locust's.
    """
    rows = list(answer.get("stats") or [])
    total = rows[-1] if rows else {}
    requests = int(total.get("num_requests") or 0)

    def ms(key: str) -> float | None:
        value = total.get(key)
        return float(value) if requests and value is not None else None

    aggregate = LocustAggregate(requests, int(total.get("num_failures") or 0),
                                {"p50": ms("median_response_time"), "p90": None,
                                 "p99": ms("response_time_percentile_0.99")})
    workers = {str(item["id"]): str(item.get("state") or "")
               for item in answer.get("workers") or []}
    return MasterStats(str(answer["state"]), workers, int(answer.get("user_count") or 0),
                       aggregate)
