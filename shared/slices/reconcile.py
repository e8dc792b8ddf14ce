"""One reconcile_slices run: observe, plan, start GKE operations, record.

Never waits for GKE: operations are started, recorded, and observed by later runs.
GKE runs node-pool operations on different pools in parallel, so a run starts up
to ``slices.max_concurrent_operations`` (operations still in flight count), one
per pool. GKE's "operation in progress" and quota answers set a cluster-wide
exponential backoff instead of failing the run; a create that GKE refuses or whose
operation ends in an error (a stockout, say) sets a backoff for that JobSet alone,
reported on the JobSet. An unreachable API raises TransientError so Pub/Sub
redelivers.

Each run also reports the job lifecycle transitions it observed (Kueue's admission,
slices requested, ready and deleted, pods running, the JobSet finished or deleted):
one message on the metrics topic, published and awaited before the record marking
them reported is saved (:mod:`shared.slices.reporting`). When Pub/Sub cannot take it
the run raises TransientError after saving the rest of the record, and the next run
reports the same transitions, under the same keys.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

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
from shared.jobspec.labels import JOBSET_NAME_LABEL, NODEPOOL_LABEL
from shared.kube import JOBSETS, NODES, PODS, WORKLOADS, KubeClient, get_client
from shared.log import get_logger
from shared.nodepools import OperationInfo
from shared.slices.lifecycle import JobState, job_states
from shared.slices.model import Action, CreatePool, Observed, Plan, SliceFailure
from shared.slices.observe import build_observed
from shared.slices.plan import plan_slices
from shared.slices.record import SliceRecord, load_record, save_if_changed, save_record
from shared.slices.reporting import report, reporting_elsewhere, slice_operation
from shared.slices.surface import clear_failure, report_failure

__all__ = ["ReconcileReport", "observe", "reconcile"]

log = get_logger("accelops.slices")

# An intent recorded without an operation name (the run died between the two
# writes) is forgotten after this long; the next plan sees the pool either way.
# Long by the cluster's clock and by this machine's: a run lasts real seconds, and
# the cluster's clock may run faster (the sandbox's simulated one).
STALE_INTENT_SECONDS = 120.0


@dataclass(frozen=True, slots=True)
class ReconcileReport:
    plan: Plan
    observed: Observed
    started: tuple[tuple[Action, str], ...] = ()  # (action, operation name)
    blocked: str | None = None  # why (more) was not started although the plan had actions
    failed: tuple[str, ...] = ()  # JobSets whose pool create failed, seen in this run
    events: int = 0  # lifecycle transitions published by this run

    def summary(self) -> str:
        parts = [f"started {action.kind} of node pool {action.pool} ({action.reason}); "
                 f"operation {operation}" for action, operation in self.started]
        if self.blocked:
            parts.append(f"{'nothing' if not self.started else 'nothing more'} started: "
                         f"{self.blocked}")
        if self.events:
            parts.append(f"{self.events} lifecycle event(s) published")
        return "; ".join(parts) or "nothing to do"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One run's view: the planner's, and the jobs' lifecycle states."""

    observed: Observed
    jobs: dict[str, JobState]


def _workloads(kube: KubeClient) -> list[dict[str, Any]]:
    """Kueue's Workloads; none where Kueue is not installed. Listed after the JobSets:
    a JobSet seen admitted then has its Workload's Admitted condition in this list."""
    try:
        return kube.list(WORKLOADS)
    except NotFoundError:
        return []


def observe(kube: KubeClient, settings: Settings, config: AccelopsConfig) -> Snapshot:
    """Five list calls: JobSets, their pods, Kueue's Workloads, the nodes of node
    pools, the node pools."""
    jobsets = kube.list(JOBSETS)
    pods = kube.list(PODS, label_selector=JOBSET_NAME_LABEL)
    workloads = _workloads(kube)
    nodes = kube.list(NODES, label_selector=NODEPOOL_LABEL)
    pools = gke.list_node_pools(settings)
    return Snapshot(build_observed(jobsets, pods, nodes, pools, config.slices),
                    job_states(jobsets, pods, workloads, config.teams))


def _delay(attempts: int, config: AccelopsConfig) -> float:
    return float(min(config.slices.backoff_initial_seconds * 2 ** (attempts - 1),
                     config.slices.backoff_max_seconds))


def _fail_create(record: SliceRecord, config: AccelopsConfig, now: float, jobset: str,
                 pool: str, capacity: str, reason: str, started: float) -> SliceFailure:
    """Count a failed create against its JobSet: its next attempt waits, doubling.

    A create started before the JobSet's last failure was seen (``started``) is a
    slice of that same attempt: counting each slice would double the backoff once
    per slice and skip attempt numbers in the Events.
    """
    previous = record.failure_views().get(jobset)
    if previous is not None and previous.covers(started):
        log.info(f"creating node pool {pool} for {jobset} failed too (attempt "
                 f"{previous.attempts}): {reason}", pool=pool, jobset=jobset)
        return previous
    attempts = (previous.attempts if previous else 0) + 1
    failure = SliceFailure(attempts=attempts, next_attempt=now + _delay(attempts, config),
                           reason=reason, capacity=capacity, pool=pool, seen=now)
    record.failures = {**record.failures, jobset: dict(failure.as_dict())}
    log.warning(f"creating node pool {pool} for {jobset} failed (attempt {attempts}, "
                f"{capacity}); next attempt in {failure.next_attempt - now:.0f}s: {reason}",
                pool=pool, jobset=jobset, attempts=attempts)
    return failure


def _check_operations(record: SliceRecord, settings: Settings, config: AccelopsConfig,
                      now: float) -> tuple[str | None, dict[str, SliceFailure]]:
    """Update the record from the operations in flight; those on slices that ended
    wait in ``record.ended`` until their lifecycle transitions are published.

    Returns why this run must not act at all (another run is starting operations or
    publishing lifecycle transitions), and the JobSets whose create ended in an
    error just now.
    """
    still: list[dict[str, Any]] = []
    busy_run: str | None = None
    if reporting_elsewhere(record):
        busy_run = "another run is publishing lifecycle transitions"
    failed: dict[str, SliceFailure] = {}
    for inflight in record.operations:
        name = inflight.get("operation")
        if not name:
            if (now - float(inflight.get("started", 0)) < STALE_INTENT_SECONDS
                    or time.time() - float(inflight.get("wall", 0)) < STALE_INTENT_SECONDS):
                busy_run = f"another run is starting the {inflight['action']} of {inflight['pool']}"
                still.append(inflight)
            continue
        operation = gke.get_operation(settings, name)
        if not operation.done:
            still.append(inflight)
            continue
        outcome = f"failed: {operation.error}" if operation.error else "done"
        log.info(f"{inflight['action']} of node pool {inflight['pool']} {outcome}",
                 operation=name, pool=inflight["pool"], jobset=inflight.get("jobset"))
        record.remember({**inflight, "finished": now, "result": outcome})
        if (ended := slice_operation(inflight, operation, now)) is not None:
            record.ended = [*record.ended, ended]
        if operation.error and inflight["action"] == "create" and inflight.get("jobset"):
            failed[inflight["jobset"]] = _fail_create(
                record, config, now, inflight["jobset"], inflight["pool"],
                str(inflight.get("capacity") or ""), operation.error,
                float(inflight.get("started") or now))
    record.operations = still
    return busy_run, failed


def _backoff(record: SliceRecord, config: AccelopsConfig, now: float, reason: str) -> None:
    record.backoff_attempts += 1
    delay = _delay(record.backoff_attempts, config)
    record.backoff_until = now + delay
    record.backoff_reason = reason
    log.warning(f"GKE is busy; next attempt in {delay:.0f}s: {reason}",
                attempts=record.backoff_attempts)


def _start(action: Action, settings: Settings) -> OperationInfo:
    if isinstance(action, CreatePool):
        return gke.start_node_pool_create(settings, action.spec)
    return gke.start_node_pool_delete(settings, action.pool)


def _capacity(action: Action) -> str | None:
    if not isinstance(action, CreatePool):
        return None
    spec = action.spec
    if spec.reservation:
        return f"reservation/{spec.reservation}"
    return "spot" if spec.spot else "on-demand"


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
    busy_run, failed = _check_operations(record, settings, config, now)
    waiting_on = busy_run
    snapshot = observe(kube, settings, config)
    observed = snapshot.observed
    known_failures = set(record.failures)
    plan = plan_slices(observed, config.slices, now, record.idle_since,
                       record.failure_views(),
                       inflight={op["pool"] for op in record.operations})
    record.idle_since = dict(plan.idle_since)
    record.set_failures(plan.failures)
    if dry_run:
        return ReconcileReport(plan, observed, blocked="dry run" if plan.start else None,
                               failed=tuple(failed))
    for jobset, failure in failed.items():
        report_failure(kube, jobset, failure, now)
    existing = {j.key for j in observed.jobsets}
    for jobset in sorted((known_failures - set(plan.failures)) & existing):
        clear_failure(kube, jobset)
    if waiting_on is None and plan.start and now < record.backoff_until:
        until = time.strftime("%H:%M:%S", time.gmtime(record.backoff_until))
        waiting_on = f"backing off until {until} UTC after: {record.backoff_reason}"
    if busy_run:
        # Another run is starting operations or publishing transitions and writes the
        # record when it has: a write from here would make its write fail and lose
        # what it did. It, or the next run, sees what this one saw.
        return ReconcileReport(plan, observed, blocked=busy_run if plan.actions else None,
                               failed=tuple(failed))
    if not plan.start or waiting_on is not None:
        events = report(record, snapshot.jobs, observed.pools, kube, settings, config, now,
                        claimed=False)
        save_if_changed(kube, namespace, record)
        if plan.actions and waiting_on is None:
            waiting_on = (f"{len(record.operations)} operation(s) in flight; "
                          f"limit {config.slices.max_concurrent_operations}")
        return ReconcileReport(plan, observed, blocked=waiting_on if plan.actions else None,
                               failed=tuple(failed), events=events)
    return _act(plan, snapshot, record, kube, settings, config, now, tuple(failed))


def _slice_of(action: Action, observed: Observed) -> int | None:
    if isinstance(action, CreatePool):
        return action.slice_index
    return next((p.slice_index for p in observed.pools if p.name == action.pool), None)


def _act(plan: Plan, snapshot: Snapshot, record: SliceRecord, kube: KubeClient,
         settings: Settings, config: AccelopsConfig, now: float,
         failed: tuple[str, ...]) -> ReconcileReport:
    namespace = config.slices.state_namespace
    observed = snapshot.observed
    intents = {action.pool: {"action": action.kind, "pool": action.pool,
                             "jobset": action.jobset, "slice": _slice_of(action, observed),
                             "reason": action.reason, "capacity": _capacity(action),
                             "started": now, "wall": time.time(), "operation": None}
               for action in plan.start}
    settled = list(record.operations)
    record.operations = [*settled, *intents.values()]
    try:
        save_record(kube, namespace, record)  # the lock: a concurrent run gets 409 here
    except ConflictError:
        return ReconcileReport(plan, observed, blocked="a concurrent run is acting",
                               failed=failed)
    started: list[tuple[Action, str]] = []
    blocked: str | None = None
    busy = False

    def keep_started() -> None:
        record.operations = [*settled, *(intents[a.pool] for a, _ in started)]

    for action in plan.start:
        if isinstance(action, CreatePool) and action.jobset in failed:
            continue  # its other slices would be refused the same way; it backs off
        try:
            operation = _start(action, settings)
        except (OperationInProgressError, RateLimitedError) as exc:
            # Cluster-wide: an upgrade holds the cluster or the limit is reached; the
            # rest of this run's operations would get the same answer.
            _backoff(record, config, now, exc.message)
            busy, blocked = True, f"GKE is busy: {exc.message}"
            break
        except (ConflictError, NotFoundError) as exc:
            # The pool exists already (create) or is gone already (delete): nothing to do.
            blocked = exc.message
            continue
        except PermanentError as exc:
            log.error(f"GKE refused the {action.kind} of node pool {action.pool}: "
                      f"{exc.message}", pool=action.pool, jobset=action.jobset)
            blocked = f"GKE refused: {exc.message}"
            if isinstance(action, CreatePool):
                # This JobSet's request (shape, reservation) is refused: it backs off
                # alone, the other JobSets go on.
                failure = _fail_create(record, config, now, action.jobset, action.pool,
                                       _capacity(action) or "", exc.message, now)
                report_failure(kube, action.jobset, failure, now)
                failed = (*failed, action.jobset)
                continue
            _backoff(record, config, now, exc.message)
            busy = True
            break
        except TransientError:
            keep_started()
            save_if_changed(kube, namespace, record)
            raise
        intents[action.pool]["operation"] = operation.name
        intents[action.pool]["op_started"] = operation.start_time
        started.append((action, operation.name))
        record.remember(dict(intents[action.pool]))
        log.info(f"started {action.kind} of node pool {action.pool}: {action.reason}",
                 operation=operation.name, pool=action.pool, jobset=action.jobset)
    keep_started()
    if started and not busy:
        record.backoff_attempts, record.backoff_until, record.backoff_reason = 0, 0.0, ""
    # The record was written under the lock above: this run's view is the latest.
    events = report(record, snapshot.jobs, observed.pools, kube, settings, config, now,
                    claimed=True)
    save_if_changed(kube, namespace, record)
    return ReconcileReport(plan, observed, started=tuple(started), blocked=blocked,
                           failed=failed, events=events)
