"""Deciding which node pools to create and delete (pure: no I/O, no clock).

Rules, for pools labelled as accelops' and JobSets that want TPU slices:

* create one pool per slice of every admitted (unsuspended), unfinished JobSet
  that has no pool for that slice yet, with the shape from the catalogue;
* delete a pool whose JobSet finished, no longer exists, is being deleted, was
  suspended again, or no longer has that slice, once the grace period has passed
  since that became true; delete a pool in ERROR with no nodes at once;
* never delete a pool with running pods on it, nor a pool with nodes while its
  JobSet has running pods anywhere;
* in cleanup-only mode, only delete.

Every action due now is returned, deletions first, then the longest waiting; the
reconciler starts only the first one per run because GKE runs one operation per
cluster at a time.
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.config import SliceConfig
from shared.names import pool_name
from shared.slices.labels import pool_labels
from shared.slices.model import (
    Action,
    CreatePool,
    DeletePool,
    JobSetView,
    Observed,
    Plan,
    PoolSpec,
    PoolView,
)

__all__ = ["plan_slices", "pool_spec"]

_BUSY = ("PROVISIONING", "RECONCILING", "STOPPING")


def pool_spec(jobset: JobSetView, slice_index: int, settings: SliceConfig) -> PoolSpec:
    """The node pool for one slice of a JobSet."""
    shape = jobset.shape
    assert shape is not None
    reservation = None
    if jobset.capacity.startswith("reservation/"):
        reservation = jobset.capacity.partition("/")[2]
    return PoolSpec(
        name=pool_name(jobset.namespace, jobset.name, slice_index),
        machine_type=shape.machine_type,
        node_count=shape.vms,
        topology=shape.topology if shape.multi_host else None,
        labels=pool_labels(jobset.namespace, jobset.name, slice_index),
        spot=jobset.capacity == "spot",
        reservation=reservation,
        service_account=settings.node_service_account,
        network_tags=settings.network_tags,
        zone=settings.zone,
    )


def _creates(observed: Observed, settings: SliceConfig) -> list[Action]:
    have = {(p.jobset_key, p.slice_index) for p in observed.pools if p.managed}
    actions: list[Action] = []
    for jobset in sorted(observed.jobsets, key=lambda j: (j.created_at, j.key)):
        if not jobset.wants_slices:
            continue
        for index in range(jobset.slices):
            if (jobset.key, index) in have:
                continue
            actions.append(CreatePool(
                spec=pool_spec(jobset, index, settings), jobset=jobset.key, slice_index=index,
                due=jobset.created_at,
                reason=f"slice {index + 1}/{jobset.slices} of {jobset.key} has no node pool"))
    return actions


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
                idle_since: Mapping[str, float]) -> Plan:
    """The plan for one reconcile run.

    ``idle_since`` remembers, from earlier runs, when a pool was first seen
    unneeded for a reason that carries no timestamp of its own; the plan returns
    the updated map.
    """
    jobsets = {j.key: j for j in observed.jobsets}
    actions: list[Action] = [] if settings.cleanup_only else _creates(observed, settings)
    waiting: list[str] = []
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
    actions.sort(key=lambda a: (a.kind != "delete", a.due, a.pool))
    return Plan(actions=tuple(actions), waiting=tuple(waiting), idle_since=idle)
