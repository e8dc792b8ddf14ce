"""Deciding which node pools to create and delete (pure: no I/O, no clock).

Rules, for pools labelled as accelops' and JobSets that want TPU slices:

* create one pool per slice of every admitted (unsuspended), unfinished JobSet
  that has no pool for that slice yet, with the shape from the catalogue;
* delete a pool whose JobSet finished, no longer exists, is being deleted, was
  suspended again, or no longer has that slice, once the grace period has passed
  since that became true; delete a pool in ERROR with no nodes at once;
* never delete a pool with running pods on it, nor a pool with nodes while its
  JobSet has running pods anywhere;
* a JobSet whose last pool create failed (stockout, quota, reservation) gets no
  new pool until its backoff expires; the next attempt takes the next capacity
  of ``capacity_fallback``;
* in cleanup-only mode, only delete.

Every action due now is returned, deletions first, then the longest waiting. Of
those, ``start`` holds what this run starts: GKE runs node-pool operations on
different pools in parallel, so up to ``max_concurrent_operations`` may be in
flight (those already running count), never two on one pool. All slices of a
multi-slice JobSet are adjacent in the order and start in the same run: when the
free slots cannot hold them all, they wait for slots rather than start some slices
minutes before the others, and younger JobSets that fit may go first for a while.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping

from shared.config import SliceConfig
from shared.jobspec.labels import pool_labels
from shared.names import pool_name
from shared.nodepools import PoolSpec
from shared.slices.model import (
    Action,
    CreatePool,
    DeletePool,
    JobSetView,
    Observed,
    Plan,
    PoolView,
    SliceFailure,
)

__all__ = ["BACKFILL_SECONDS", "next_capacity", "plan_slices", "pool_spec"]

_BUSY = ("PROVISIONING", "RECONCILING", "STOPPING")
# A JobSet waiting for enough free operation slots for all its slices lets younger
# JobSets' creates use the free ones until it has been due this long (a few node-pool
# creates); from then on it holds them back, so a stream of small JobSets cannot keep
# it waiting for ever.
BACKFILL_SECONDS = 600.0


def next_capacity(jobset: JobSetView, failure: SliceFailure | None,
                  settings: SliceConfig) -> str:
    """The capacity of the JobSet's next create attempt.

    The first attempt uses the JobSet's own capacity. After a failed attempt whose
    capacity is in ``capacity_fallback``, the next one uses the entry after it
    (staying on the last). A JobSet whose capacity is not in the order (a specific
    reservation of its own, say) keeps it.
    """
    order = settings.capacities()
    if failure is None or jobset.capacity not in order or failure.capacity not in order:
        return jobset.capacity
    return order[min(order.index(failure.capacity) + 1, len(order) - 1)]


def pool_spec(jobset: JobSetView, slice_index: int, settings: SliceConfig,
              capacity: str | None = None) -> PoolSpec:
    """The node pool for one slice of a JobSet (``capacity``: default the JobSet's)."""
    shape = jobset.shape
    assert shape is not None
    capacity = capacity or jobset.capacity
    reservation = None
    if capacity.startswith("reservation/"):
        reservation = capacity.partition("/")[2]
    return PoolSpec(
        name=pool_name(jobset.namespace, jobset.name, slice_index),
        machine_type=shape.machine_type,
        node_count=shape.vms,
        topology=shape.topology if shape.multi_host else None,
        labels=pool_labels(jobset.namespace, jobset.name, slice_index),
        spot=capacity == "spot",
        reservation=reservation,
        service_account=settings.node_service_account,
        network_tags=settings.network_tags,
        zone=settings.zone,
    )


def _creates(observed: Observed, settings: SliceConfig, now: float,
             failures: Mapping[str, SliceFailure], waiting: list[str]) -> list[Action]:
    have = {(p.jobset_key, p.slice_index) for p in observed.pools if p.managed}
    actions: list[Action] = []
    for jobset in sorted(observed.jobsets, key=lambda j: (j.created_at, j.key)):
        if not jobset.wants_slices:
            continue
        missing = [i for i in range(jobset.slices) if (jobset.key, i) not in have]
        if not missing:
            continue
        failure = failures.get(jobset.key)
        if failure is not None and now < failure.next_attempt:
            waiting.append(f"{jobset.key}: creating {failure.pool} failed "
                           f"(attempt {failure.attempts}, {failure.capacity}): {failure.reason}; "
                           f"next attempt in {failure.next_attempt - now:.0f}s")
            continue
        capacity = next_capacity(jobset, failure, settings)
        for index in missing:
            actions.append(CreatePool(
                spec=pool_spec(jobset, index, settings, capacity), jobset=jobset.key,
                slice_index=index, due=jobset.created_at,
                reason=f"slice {index + 1}/{jobset.slices} of {jobset.key} has no node pool"))
    return actions


def _live_failures(observed: Observed,
                   failures: Mapping[str, SliceFailure]) -> dict[str, SliceFailure]:
    """The failure streaks still worth remembering: the JobSet still wants slices and
    not all of them run yet."""
    running = {(p.jobset_key, p.slice_index) for p in observed.pools
               if p.managed and p.status == "RUNNING"}
    jobsets = {j.key: j for j in observed.jobsets}
    kept: dict[str, SliceFailure] = {}
    for key, failure in failures.items():
        jobset = jobsets.get(key)
        if jobset is None or not jobset.wants_slices:
            continue
        if all((key, i) in running for i in range(jobset.slices)):
            continue
        kept[key] = failure
    return kept


def _select(actions: list[Action], observed: Observed, settings: SliceConfig,
            inflight: Collection[str], now: float) -> tuple[tuple[Action, ...], list[str]]:
    """The actions to start now: in order, up to the free slots, one per pool.

    A JobSet's creates start together or wait together: its pods run only once
    every slice is there, so a slice created alone would sit idle (and billed) for
    a whole create of its siblings. When the free slots cannot hold all its missing
    slices (or, for a JobSet with more slices than the limit, every slot), its
    creates wait; younger JobSets whose slices fit may use the free slots meanwhile,
    until it has been due for BACKFILL_SECONDS. Returns the actions and why JobSets
    wait.
    """
    limit = settings.max_concurrent_operations
    busy = set(inflight) | {p.name for p in observed.pools if p.managed and p.status in _BUSY}
    slots = limit - len(busy)
    wanted = Counter(a.jobset for a in actions if isinstance(a, CreatePool)
                     and a.pool not in busy)
    chosen: list[Action] = []
    starting: set[str] = set()  # JobSets whose creates start in this run
    waiting: dict[str, str] = {}  # JobSets whose creates wait for room, and why
    holding = False  # a JobSet waiting for room holds back every younger one
    for action in actions:
        if len(chosen) >= slots:
            break
        if action.pool in busy:
            continue
        if isinstance(action, CreatePool) and action.jobset not in starting:
            if holding or action.jobset in waiting:
                continue
            together = min(wanted[action.jobset], limit)
            free = slots - len(chosen)
            if free < together:
                holding = now - action.due >= BACKFILL_SECONDS
                waiting[action.jobset] = (
                    f"{action.jobset}: its {together} slice creates start together, when "
                    f"{together} of {limit} operation slots are free ({free} now)"
                    + ("; younger JobSets wait behind it" if holding else ""))
                continue
            starting.add(action.jobset)
        busy.add(action.pool)
        chosen.append(action)
    return tuple(chosen), list(waiting.values())


def _why_idle(pool: PoolView, jobset: JobSetView | None) -> tuple[str, float | None] | None:
    """Why a pool is no longer needed, and since when if that is known; None: in use."""
    if jobset is None:
        return "its JobSet no longer exists", None
    if jobset.opted_out:
        return None
    if jobset.deleting:
        return "its JobSet is being deleted", None
    if jobset.finished_at is not None:
        return "its JobSet finished", jobset.finished_at
    if jobset.suspended:
        return "its JobSet is suspended (not admitted)", None
    if pool.slice_index is not None and pool.slice_index >= jobset.slices:
        return "its JobSet no longer has this slice", None
    return None


def plan_slices(observed: Observed, settings: SliceConfig, now: float,
                idle_since: Mapping[str, float],
                failures: Mapping[str, SliceFailure] | None = None,
                inflight: Collection[str] = ()) -> Plan:
    """The plan for one reconcile run.

    ``idle_since`` remembers, from earlier runs, when a pool was first seen
    unneeded for a reason that carries no timestamp of its own; ``failures`` the
    JobSets whose last pool create failed; ``inflight`` the pools with an operation
    started and not yet seen done. The plan returns the updated maps.
    """
    jobsets = {j.key: j for j in observed.jobsets}
    failures = _live_failures(observed, failures or {})
    waiting: list[str] = []
    actions: list[Action] = [] if settings.cleanup_only else _creates(
        observed, settings, now, failures, waiting)
    idle: dict[str, float] = {}
    for pool in sorted(observed.pools, key=lambda p: p.name):
        if not pool.managed or pool.status in _BUSY:
            continue
        jobset = jobsets.get(pool.jobset_key)
        if pool.status == "ERROR" and pool.nodes == 0 and pool.active_pods == 0:
            actions.append(DeletePool(pool.name, pool.jobset_key, due=0.0,
                                      reason="pool is in ERROR with no nodes"))
            continue
        why = _why_idle(pool, jobset)
        if why is None:
            continue
        reason, since = why
        if since is None:
            since = idle_since.get(pool.name, now)
            idle[pool.name] = since
        running_elsewhere = jobset.active_pods if jobset is not None and pool.nodes else 0
        if pool.active_pods or running_elsewhere:
            waiting.append(f"{pool.name}: {reason}, but {pool.active_pods or running_elsewhere}"
                           " of its pods are still running")
            continue
        due = since + settings.grace_period_seconds
        if now < due:
            waiting.append(f"{pool.name}: {reason}; deleting after the grace period, "
                           f"in {due - now:.0f}s")
            continue
        actions.append(DeletePool(pool.name, pool.jobset_key, due=due, reason=reason))
    # Deletes first: an idle slice costs money by the minute, and freeing it can free
    # quota for the next job; then the work that has waited longest.
    # A JobSet's slices stay adjacent, so they start together when the limit allows.
    actions.sort(key=lambda a: (a.kind != "delete", a.due, a.jobset or "", a.pool))
    start, held = _select(actions, observed, settings, inflight, now)
    waiting.extend(held)
    return Plan(actions=tuple(actions), waiting=tuple(waiting), idle_since=idle,
                start=start, failures=failures)
