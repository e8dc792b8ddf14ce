"""One reconcile_slices run: observe, plan, start at most one GKE operation, record.

Never waits for GKE: an operation is started, recorded, and observed by a later
run. While one is in flight (or GKE asked to back off) nothing new starts. GKE's
"operation in progress" and quota answers set an exponential backoff instead of
failing the run; an unreachable API raises TransientError so Pub/Sub redelivers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from shared import gke
from shared.config import AccelopsConfig, Settings, load_config_or_retry
from shared.errors import (
    ConflictError,
    NotFoundError,
    OperationInProgressError,
    PermanentError,
    RateLimitedError,
    TransientError,
)
from shared.kube import JOBSETS, NODES, PODS, KubeClient, get_client
from shared.log import get_logger
from shared.slices.model import Action, CreatePool, Observed, Plan
from shared.slices.observe import JOBSET_NAME_LABEL, NODEPOOL_LABEL, build_observed
from shared.slices.plan import plan_slices
from shared.slices.record import SliceRecord, load_record, save_record

__all__ = ["ReconcileReport", "observe", "reconcile"]

log = get_logger("accelops.slices")

# An intent recorded without an operation name (the run died between the two
# writes) is forgotten after this long; the next plan sees the pool either way.
STALE_INTENT_SECONDS = 120.0


@dataclass(frozen=True, slots=True)
class ReconcileReport:
    plan: Plan
    observed: Observed
    started: Action | None = None
    operation: str | None = None
    blocked: str | None = None  # why nothing was started although the plan had actions

    def summary(self) -> str:
        if self.started is not None:
            return (f"started {self.started.kind} of node pool {self.started.pool} "
                    f"({self.started.reason}); operation {self.operation}")
        if self.blocked:
            return f"nothing started: {self.blocked}"
        return "nothing to do"


def observe(kube: KubeClient, settings: Settings, config: AccelopsConfig) -> Observed:
    """Four list calls: JobSets, their pods, the nodes of node pools, the node pools."""
    jobsets = kube.list(JOBSETS)
    pods = kube.list(PODS, label_selector=JOBSET_NAME_LABEL)
    nodes = kube.list(NODES, label_selector=NODEPOOL_LABEL)
    pools = gke.list_node_pools(settings)
    return build_observed(jobsets, pods, nodes, pools, config.slices)


def _check_inflight(record: SliceRecord, settings: Settings, now: float) -> str | None:
    """Update the record from the operation in flight; returns why to wait, if we must."""
    inflight = record.inflight
    if inflight is None:
        return None
    name = inflight.get("operation")
    if not name:
        if now - float(inflight.get("started", 0)) < STALE_INTENT_SECONDS:
            return f"another run is starting the {inflight['action']} of {inflight['pool']}"
        record.inflight = None
        return None
    operation = gke.get_operation(settings, name)
    if not operation.done:
        return (f"operation {name} ({inflight['action']} of node pool {inflight['pool']}) "
                f"is {operation.status.lower()}")
    outcome = f"failed: {operation.error}" if operation.error else "done"
    log.info(f"{inflight['action']} of node pool {inflight['pool']} {outcome}",
             operation=name, pool=inflight["pool"], jobset=inflight.get("jobset"))
    record.remember({**inflight, "finished": now, "result": outcome})
    record.inflight = None
    return None


def _save_quietly(kube: KubeClient, namespace: str, record: SliceRecord) -> None:
    """Write the record if this run changed it (most runs change nothing)."""
    if not record.changed:
        return
    try:
        save_record(kube, namespace, record)
    except ConflictError:
        # Another run wrote the record meanwhile; it holds the fresher view.
        log.info("slice record changed by a concurrent run; not overwriting it")


def _backoff(record: SliceRecord, config: AccelopsConfig, now: float, reason: str) -> None:
    record.backoff_attempts += 1
    delay = min(config.slices.backoff_initial_seconds * 2 ** (record.backoff_attempts - 1),
                config.slices.backoff_max_seconds)
    record.backoff_until = now + delay
    record.backoff_reason = reason
    log.warning(f"GKE is busy; next attempt in {delay}s: {reason}",
                attempts=record.backoff_attempts)


def _start(action: Action, settings: Settings) -> str:
    if isinstance(action, CreatePool):
        return gke.create_node_pool(settings, action.spec)
    return gke.delete_node_pool(settings, action.pool)


def reconcile(settings: Settings | None = None, *, dry_run: bool = False,
              cleanup_only: bool | None = None, now: float | None = None) -> ReconcileReport:
    """Run once. Raises TransientError when the cluster or GKE cannot be reached."""
    settings = settings or Settings.from_env()
    config = load_config_or_retry(settings)
    if cleanup_only is not None:
        config = config.model_copy(update={
            "slices": config.slices.model_copy(update={"cleanup_only": cleanup_only})})
    namespace = config.slices.state_namespace
    kube = get_client(settings)
    record = load_record(kube, namespace)
    if now is None:
        # The cluster's clock, not this machine's: grace periods are measured
        # against timestamps the cluster wrote.
        now = kube.server_time() or time.time()
    waiting_on = _check_inflight(record, settings, now)
    observed = observe(kube, settings, config)
    plan = plan_slices(observed, config.slices, now, record.idle_since)
    record.idle_since = dict(plan.idle_since)
    if dry_run:
        return ReconcileReport(plan, observed, blocked="dry run" if plan.actions else None)
    if not plan.actions:
        _save_quietly(kube, namespace, record)
        return ReconcileReport(plan, observed)
    if waiting_on is None and now < record.backoff_until:
        until = time.strftime("%H:%M:%S", time.gmtime(record.backoff_until))
        waiting_on = f"backing off until {until} UTC after: {record.backoff_reason}"
    if waiting_on is not None:
        _save_quietly(kube, namespace, record)
        return ReconcileReport(plan, observed, blocked=waiting_on)
    return _act(plan, observed, record, kube, settings, config, now)


def _act(plan: Plan, observed: Observed, record: SliceRecord, kube: KubeClient,
         settings: Settings, config: AccelopsConfig, now: float) -> ReconcileReport:
    namespace = config.slices.state_namespace
    action = plan.actions[0]
    record.inflight = {"action": action.kind, "pool": action.pool, "jobset": action.jobset,
                       "reason": action.reason, "started": now, "operation": None}
    try:
        save_record(kube, namespace, record)  # the lock: a concurrent run gets 409 here
    except ConflictError:
        return ReconcileReport(plan, observed, blocked="a concurrent run is acting")
    try:
        operation = _start(action, settings)
    except (OperationInProgressError, RateLimitedError) as exc:
        record.inflight = None
        _backoff(record, config, now, exc.message)
        _save_quietly(kube, namespace, record)
        return ReconcileReport(plan, observed, blocked=f"GKE is busy: {exc.message}")
    except (ConflictError, NotFoundError) as exc:
        # The pool exists already (create) or is gone already (delete): nothing to do.
        record.inflight = None
        _save_quietly(kube, namespace, record)
        return ReconcileReport(plan, observed, blocked=exc.message)
    except PermanentError as exc:
        record.inflight = None
        log.error(f"GKE refused the {action.kind} of node pool {action.pool}: {exc.message}",
                  pool=action.pool, jobset=action.jobset)
        _backoff(record, config, now, exc.message)
        _save_quietly(kube, namespace, record)
        return ReconcileReport(plan, observed, blocked=f"GKE refused: {exc.message}")
    except TransientError:
        record.inflight = None
        _save_quietly(kube, namespace, record)
        raise
    record.inflight = {**record.inflight, "operation": operation}
    record.backoff_attempts, record.backoff_until, record.backoff_reason = 0, 0.0, ""
    record.remember(dict(record.inflight))
    _save_quietly(kube, namespace, record)
    log.info(f"started {action.kind} of node pool {action.pool}: {action.reason}",
             operation=operation, pool=action.pool, jobset=action.jobset)
    return ReconcileReport(plan, observed, started=action, operation=operation)


