"""GKE faults on a running sandbox, what its GKE API recorded, and reconcile_slices'
backoff schedule: shared by the slices e2e tests and the slices benchmark. A Spot
VM's preemption is injected the same way: :func:`preempt`.

Counts come from the sandbox GKE API's own records (every Container API request with
the simulated time it arrived, every operation with its simulated start and end), read
through its control surface, which is never recorded itself, so reading them changes
no count.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from sandbox.gke.state import Delays
from sandbox.supervisor.runner import Sandbox
from shared.config import SliceConfig

__all__ = ["SANDBOX_DELAYS", "attempts_of", "backoff_delay", "busy_attempts", "control",
           "create_requests", "operations", "preempt", "reconcile_runs",
           "stockout_attempts"]

_POOLS = "/nodePools"
# The sandbox GKE API's operation times (the sandbox runs with the defaults).
SANDBOX_DELAYS = Delays()


def control(sandbox: Sandbox, path: str, body: dict[str, Any] | None = None, *,
            method: str | None = None) -> Any:
    """GET (no body) or POST the sandbox GKE API's control endpoint ``/sandbox/v1/<path>``
    (``method`` for another, e.g. DELETE faults)."""
    request = urllib.request.Request(
        f"{sandbox.gke_url}/sandbox/v1/{path}",
        method=method or ("POST" if body is not None else "GET"),
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def preempt(sandbox: Sandbox, pool: str, node: str | None = None,
            for_seconds: float | None = None) -> dict[str, Any]:
    """Compute Engine reclaims a Spot VM of ``pool`` (``node``, else one running pods);
    it is recreated ``for_seconds`` simulated seconds later. Returns the disruption."""
    body: dict[str, Any] = {"kind": "preemption", "pool": pool}
    if node is not None:
        body["node"] = node
    if for_seconds is not None:
        body["for_seconds"] = for_seconds
    return dict(control(sandbox, "faults", body)["disruption"])


def _requests(sandbox: Sandbox, method: str, since: float, until: float) -> list[dict[str, Any]]:
    return [r for r in control(sandbox, "requests")["requests"]
            if r["method"] == method and r["path"].endswith(_POOLS)
            and since <= r["time"] < until]


def create_requests(sandbox: Sandbox, since: float, until: float) -> list[dict[str, Any]]:
    """Node-pool create requests that arrived in [since, until) (simulated), any answer."""
    return _requests(sandbox, "POST", since, until)


def reconcile_runs(sandbox: Sandbox, since: float, until: float) -> int:
    """reconcile_slices runs in [since, until): each lists the node pools once, and
    nothing else in the sandbox's jobs part does."""
    return len(_requests(sandbox, "GET", since, until))


def operations(sandbox: Sandbox, kind: str = "CREATE_NODE_POOL") -> list[dict[str, Any]]:
    """The GKE operations of one type, oldest first, with simulated start and end times."""
    return [op for op in control(sandbox, "operations")["operations"]
            if op["operation_type"] == kind]


def attempts_of(creates: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Create operations grouped into attempts: a create started before any create of
    the attempt before it ended belongs to that attempt (the next attempt can only
    start once a failure was seen)."""
    groups: list[list[dict[str, Any]]] = []
    for op in sorted(creates, key=lambda o: o["start_time"]):
        if groups and op["start_time"] < min(o["end_time"] or op["start_time"] + 1
                                             for o in groups[-1]):
            groups[-1].append(op)
        else:
            groups.append([op])
    return groups


def backoff_delay(attempt: int, settings: SliceConfig) -> float:
    """The wait after the ``attempt``-th failure in a row: doubling, capped."""
    return float(min(settings.backoff_initial_seconds * 2 ** (attempt - 1),
                     settings.backoff_max_seconds))


def stockout_attempts(window: float, settings: SliceConfig,
                      delays: Delays = SANDBOX_DELAYS) -> int:
    """At most how many create attempts one multi-host JobSet starts in a stockout window.

    Each attempt's creates are accepted and fail when their operation ends; the next
    attempt waits for its backoff, and for the pools in ERROR to be deleted (a new pool
    takes the same name), whichever is longer. Reconcile ticks only add to the waits.
    """
    start, attempts = 0.0, 0
    while start < window:
        attempts += 1
        start += delays.create_multi_host + max(backoff_delay(attempts, settings),
                                                delays.delete)
    return attempts


def busy_attempts(window: float, settings: SliceConfig) -> int:
    """At most how many runs try GKE while it answers "busy" for ``window`` seconds:
    each refusal sets the cluster-wide backoff, so the attempts follow its doubling."""
    start, attempts = 0.0, 0
    while start < window:
        attempts += 1
        start += backoff_delay(attempts, settings)
    return attempts
