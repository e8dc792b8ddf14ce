"""The budget check of ``submit_job``: the cached usage read, the rule applied.

``submit_job`` never queries BigQuery: ``team_usage`` (``shared.jobs.budget.usage``) writes
every team's usage to the ConfigMap :data:`~shared.jobs.budget.USAGE_CONFIGMAP` every
five minutes, and this module reads it — one GET, only for a team that has a budget,
and kept in the process for :data:`CACHE_SECONDS` so that a burst of submissions costs
one read. The rule itself is pure (``shared.jobs.budget.model``).

"Now" is the Kubernetes API server's clock (the Date header of the last answer, which
the JobSet list of the same delivery has just refreshed): ``team_usage`` stamps its
snapshot with that same clock, so the snapshot's age never depends on the skew of the
instance's own clock.

Budgets are soft: a cache that cannot be read because of the deployment (no RBAC
grant, unreadable content) admits the request with an ERROR log rather than holding
every submission of the team until an operator acts; a cluster that cannot be reached
is retried like any other Kubernetes failure of the delivery, since the JobSet could
not be created either.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

from pydantic import ValidationError

from shared.config import AccelopsConfig
from shared.errors import NotFoundError, PermissionDeniedError
from shared.jobs.budget.model import (
    USAGE_CONFIGMAP,
    USAGE_KEY,
    UsageSnapshot,
    check_budget,
    has_budget,
)
from shared.kube import CONFIG_MAPS, KubeClient
from shared.log import get_logger

__all__ = ["CACHE_SECONDS", "enforce_budget", "read_usage", "reset_usage_cache"]

log = get_logger("accelops.budget")

# Short against team_usage's five-minute tick: a refusal lifted by a new snapshot (or a
# new day) is seen within seconds of it.
CACHE_SECONDS = 10.0

_cache: dict[tuple[str, str], tuple[float, UsageSnapshot | None]] = {}
_cache_lock = threading.Lock()


def enforce_budget(kube: KubeClient, config: AccelopsConfig, team: str) -> None:
    """Return when ``team`` may start a job; raise PermanentError (field ``team``, rule
    ``budget``) when it has reached a budget. A team without a budget costs no call.

    Raises TransientError when the Kubernetes API cannot be reached.
    """
    policy = config.teams.get(team)
    if policy is None or not has_budget(policy.budget):
        return
    snapshot = _cached_usage(kube, config.slices.state_namespace)
    now = datetime.fromtimestamp(kube.server_time() or time.time(), UTC)
    decision = check_budget(team, policy.budget, snapshot, now)
    if decision.warning is not None:
        log.warning(decision.warning, team=team)


def read_usage(kube: KubeClient, namespace: str) -> UsageSnapshot | None:
    """The snapshot in the usage ConfigMap; None when there is none or it cannot be read
    (logged). Raises TransientError when the Kubernetes API cannot be reached."""
    try:
        configmap = kube.get(CONFIG_MAPS, USAGE_CONFIGMAP, namespace)
    except NotFoundError:
        return None
    except PermissionDeniedError as exc:
        log.error(f"team usage cannot be read, budgets are not enforced: {exc.message}",
                  **exc.as_fields())
        return None
    raw = (configmap.get("data") or {}).get(USAGE_KEY)
    try:
        return UsageSnapshot.model_validate_json(raw or "")
    except ValidationError as exc:
        log.error(f"ConfigMap {namespace}/{USAGE_CONFIGMAP} holds no readable usage, budgets "
                  f"are not enforced: {exc.error_count()} errors", error=str(exc)[:500])
        return None


def _cached_usage(kube: KubeClient, namespace: str) -> UsageSnapshot | None:
    key = (kube.host, namespace)
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and now - hit[0] < CACHE_SECONDS:
        return hit[1]
    snapshot = read_usage(kube, namespace)
    with _cache_lock:
        _cache[key] = (now, snapshot)
    return snapshot


def reset_usage_cache() -> None:
    """Forget the cached snapshots (tests that rewrite the ConfigMap)."""
    with _cache_lock:
        _cache.clear()
