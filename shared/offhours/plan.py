"""What one tick does to each scheduled pool (pure).

Level-triggered: the decision depends only on the time (through :class:`Desired`),
the pool as it is now and the state saved when it was removed — never on what
earlier ticks did — so a missed or repeated tick changes nothing. Each tick starts
at most one GKE operation per pool (GKE refuses a second one on the same pool); a
pool that needs two (autoscaling, then size) gets the second on a later tick.

Off-hours: an autoscaled or single-host pool is scaled to zero (autoscaling
minimum 0, then size 0); a multi-host TPU slice, which cannot be resized, is
deleted. Either way its spec, size and autoscaling are saved first. A pool with
running pods or admitted workloads is skipped (and reported) until it is idle,
unless forced. On-hours: the saved sizes and autoscaling are put back, a deleted
pool is created again from its saved spec; the saved state is forgotten once the
pool is back as it was.

Audit rows: a removal or restore is reported once its first operation has
started; the saved state then records when (``removed_at``,
``restore_started_at``), which is written only after the row is stored — so a
tick that dies in between reports it again on the next tick, with the same row key.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from shared.config.offhours import Schedule
from shared.jobspec.labels import LABEL_TEAM
from shared.offhours.model import Audit, PoolPlan, PoolView, SavedPool, Step, autoscaling_minimum
from shared.offhours.windows import Desired, desired_state

__all__ = ["OUTPUT_ONLY", "creatable", "plan_cluster", "plan_pool", "saved_for", "zeroed"]

# Output-only NodePool fields: the API sets them, a create request must not carry them.
OUTPUT_ONLY = ("self_link", "instance_group_urls", "status", "status_message", "conditions",
               "pod_ipv4_cidr_size", "update_info", "etag")


def zeroed(autoscaling: dict[str, Any]) -> dict[str, Any]:
    """The autoscaling with its minimums at zero (the maximums kept)."""
    out = dict(autoscaling)
    out["min_node_count"] = 0
    if "total_min_node_count" in out:
        out["total_min_node_count"] = 0
    return out


def creatable(spec: dict[str, Any]) -> dict[str, Any]:
    """A saved NodePool as a create request: the same, without output-only fields."""
    return {k: v for k, v in spec.items() if k not in OUTPUT_ONLY}


def saved_for(pool: PoolView, desired: Desired) -> SavedPool:
    """What must be kept before a pool is removed."""
    return SavedPool(
        cluster=pool.cluster, pool=pool.name,
        method="delete" if pool.multi_host else "resize",
        schedule=pool.schedule,
        nodes_per_zone=max(1, -(-pool.size // max(pool.zones, 1))),
        autoscaling=dict(pool.autoscaling) if pool.autoscaling else None,
        spec=dict(pool.spec), accelerator_type=pool.accelerator_type,
        accelerator_count=pool.accelerator_count, team=pool.labels.get(LABEL_TEAM),
        period=desired.period)


def _audit(saved: SavedPool, action: str, desired: Desired, forced: bool) -> Audit:
    method = saved.method if action == "remove" else (
        "recreate" if saved.method == "delete" else "resize")
    return Audit(action=action, method=method, cluster=saved.cluster,  # type: ignore[arg-type]
                 pool=saved.pool,
                 period=saved.period if action == "remove" else desired.period,
                 reason=desired.reason, accelerator_type=saved.accelerator_type,
                 accelerator_count=saved.accelerator_count, schedule=saved.schedule,
                 team=saved.team, forced=forced)


def _skip(pool: PoolView, desired: Desired) -> PoolPlan:
    reason = "; ".join(pool.busy)
    audit = Audit(action="skip", method=None, cluster=pool.cluster, pool=pool.name,
                  period=desired.period, reason=f"busy: {reason}",
                  accelerator_type=pool.accelerator_type,
                  accelerator_count=pool.accelerator_count, schedule=pool.schedule,
                  team=pool.labels.get(LABEL_TEAM))
    return PoolPlan(pool.cluster, pool.name,
                    f"skipped, busy ({reason}); removed once idle", audit=audit, skipped=True)


def _wait(cluster: str, name: str, status: str) -> PoolPlan:
    return PoolPlan(cluster, name, f"waiting: the pool is {status} (an operation runs)")


def _remove(pool: PoolView, saved: SavedPool | None, desired: Desired, now: str,
            force: bool) -> PoolPlan:
    """Off-hours, the pool exists and is RUNNING."""
    fresh = saved is None
    if fresh and not pool.up:
        return PoolPlan(pool.cluster, pool.name, "off-hours: already at zero nodes")
    keep = saved if saved is not None else saved_for(pool, desired)
    operation: Step | None = None
    if keep.method == "delete":
        operation = Step("delete", pool.cluster, pool.name)
    elif autoscaling_minimum(pool.autoscaling) > 0:
        assert pool.autoscaling is not None
        operation = Step("set_autoscaling", pool.cluster, pool.name,
                         autoscaling=zeroed(pool.autoscaling))
    elif pool.nodes > 0:
        operation = Step("set_size", pool.cluster, pool.name, size=0)
    if operation is not None and pool.busy and not force:
        return _skip(pool, desired)
    steps = [Step("save", pool.cluster, pool.name, saved=keep)] if fresh else []
    if operation is not None:
        steps.append(operation)
    audit = after = None
    if keep.removed_at is None:
        audit = _audit(keep, "remove", desired, force)
        after = keep.with_changes(removed_at=now)
    forced = " (forced)" if force and pool.busy else ""
    note = (f"off-hours: {steps[-1].describe()}{forced}" if steps and steps[-1].operation
            else "off-hours: removed")
    return PoolPlan(pool.cluster, pool.name, note, tuple(steps), audit, after)


def _restore_started(saved: SavedPool, desired: Desired, now: str,
                     force: bool) -> tuple[Audit | None, SavedPool | None]:
    if saved.removed_at is None or saved.restore_started_at is not None:
        return None, None
    return (_audit(saved, "restore", desired, force),
            saved.with_changes(restore_started_at=now, restore_period=desired.period))


def _forget(saved: SavedPool, note: str) -> PoolPlan:
    return PoolPlan(saved.cluster, saved.pool, note,
                    (Step("forget", saved.cluster, saved.pool, saved=saved),))


def _restore(pool: PoolView | None, saved: SavedPool, desired: Desired, now: str,
             force: bool) -> PoolPlan:
    """On-hours (or opted out) with a saved state: put the pool back as it was."""
    audit, after = _restore_started(saved, desired, now, force)
    if saved.method == "delete":
        if pool is None:
            assert saved.spec is not None
            return PoolPlan(saved.cluster, saved.pool,
                            "on-hours: recreate from the saved spec",
                            (Step("create", saved.cluster, saved.pool,
                                  spec=creatable(saved.spec)),), audit, after)
        if pool.status == "ERROR":
            return PoolPlan(saved.cluster, saved.pool,
                            "the recreated pool failed; deleting it to create it again",
                            (Step("delete", saved.cluster, saved.pool),))
        if pool.status != "RUNNING":
            return PoolPlan(saved.cluster, saved.pool,
                            f"on-hours: the pool is {pool.status}", (), audit, after)
        if audit is not None:  # running again, its restore not reported yet
            return PoolPlan(saved.cluster, saved.pool, "on-hours: recreated", (), audit, after)
        return _forget(saved, "on-hours: recreated and running")
    if pool is None:
        return _forget(saved, "the pool was deleted by someone else; its saved size dropped")
    if pool.status != "RUNNING":
        return _wait(pool.cluster, pool.name, pool.status)
    if pool.nodes < saved.nodes_per_zone * max(pool.zones, 1):
        step = Step("set_size", pool.cluster, pool.name, size=saved.nodes_per_zone)
    elif saved.autoscaling and pool.autoscaling != saved.autoscaling:
        step = Step("set_autoscaling", pool.cluster, pool.name, autoscaling=saved.autoscaling)
    elif audit is not None:
        return PoolPlan(pool.cluster, pool.name, "on-hours: restored", (), audit, after)
    else:
        return _forget(saved, "on-hours: back to its saved size")
    return PoolPlan(pool.cluster, pool.name, f"on-hours: {step.describe()}", (step,), audit,
                    after)


def plan_pool(pool: PoolView | None, saved: SavedPool | None, desired: Desired,
              now: dt.datetime, *, force: bool = False) -> PoolPlan | None:
    """The tick's plan for one pool (None: nothing to say about it).

    ``desired.on`` is True during on-hours and also when the pool opted out (keep)
    or left its schedule: a pool that was removed comes back.
    """
    stamp = now.isoformat()
    if pool is not None and pool.managed:
        return None
    if desired.on:
        if saved is None:
            return None
        return _restore(pool, saved, desired, stamp, force)
    if pool is None:
        if saved is not None and saved.removed_at is None:  # deleted, not yet reported
            return PoolPlan(saved.cluster, saved.pool, "off-hours: deleted", (),
                            _audit(saved, "remove", desired, force),
                            saved.with_changes(removed_at=stamp))
        return None if saved is None else PoolPlan(saved.cluster, saved.pool,
                                                   "off-hours: deleted")
    if pool.status != "RUNNING":
        if saved is not None and saved.removed_at is None and pool.status in (
                "STOPPING", "RECONCILING"):
            return PoolPlan(pool.cluster, pool.name, f"off-hours: the pool is {pool.status}",
                            (), _audit(saved, "remove", desired, force),
                            saved.with_changes(removed_at=stamp))
        return _wait(pool.cluster, pool.name, pool.status)
    return _remove(pool, saved, desired, stamp, force)


def _standing(on: bool, period: str, reason: str) -> Desired:
    return Desired(on, period, None, None, reason)


def plan_cluster(pools: list[PoolView], saved: dict[str, SavedPool],
                 schedules: dict[str, Schedule], lead_minutes: int, now: dt.datetime, *,
                 force: bool = False, max_operations: int = 4) -> list[PoolPlan]:
    """Every scheduled (or saved) pool of one cluster, planned at ``now`` (aware), with
    at most ``max_operations`` node-pool operations running in the cluster."""
    desired: dict[str, Desired] = {}
    urgency: dict[str, int] = {}

    def state_of(name: str) -> Desired:
        if name not in desired:
            schedule = schedules[name]
            lead = (schedule.lead_time_minutes if schedule.lead_time_minutes is not None
                    else lead_minutes)
            desired[name] = desired_state(schedule, name, now, lead)
        return desired[name]

    plans: list[PoolPlan] = []
    by_name = {pool.name: pool for pool in pools}
    for name in sorted(set(by_name) | set(saved)):
        pool, kept = by_name.get(name), saved.get(name)
        if pool is not None and pool.managed:
            continue
        schedule = pool.schedule if pool is not None else (kept.schedule if kept else None)
        if pool is not None and pool.keep:
            want = _standing(True, "keep", "kept up: accelops.dev/keep=true")
        elif schedule is None:
            if kept is None:
                continue
            want = _standing(True, "unscheduled", "no longer on a schedule")
        elif schedule not in schedules:
            if kept is None:
                assert pool is not None
                plans.append(PoolPlan(pool.cluster, name, f"schedule {schedule!r} is not in "
                                      "the configuration; left as it is"))
                continue
            want = _standing(True, "unscheduled", f"schedule {schedule!r} is not in the "
                             "configuration any more")
        else:
            want = state_of(schedule)
        plan = plan_pool(pool, kept, want, now, force=force)
        if plan is not None:
            plans.append(plan)
            urgency[plan.pool] = 0 if want.on and any(
                s.kind == "create" for s in plan.steps) else (1 if want.on else 2)
    in_flight = sum(1 for pool in pools if pool.status in _OPERATING)
    return _within(plans, urgency, max(0, max_operations - in_flight), max_operations)


# A pool in one of these states has an operation running (any operation: GKE counts
# those of reconcile_slices' pools against the same limit).
_OPERATING = ("PROVISIONING", "RECONCILING", "STOPPING")


def _within(plans: list[PoolPlan], urgency: dict[str, int], free: int,
            limit: int) -> list[PoolPlan]:
    """The plans, with operations only for as many pools as the cluster has free
    operation slots: GKE refuses more with 429, and a refused request only costs a
    call. Recreating slices goes first (the slowest to be ready), then other restores,
    then removals; the rest wait for a later tick, in the same order."""
    ranked = sorted((p for p in plans if any(s.operation for s in p.steps)),
                    key=lambda p: (urgency.get(p.pool, 2), p.pool))
    waiting = {p.pool for p in ranked[free:]}
    out = []
    for plan in plans:
        if plan.pool in waiting:
            plan = PoolPlan(plan.cluster, plan.pool,
                            f"{plan.note}: waiting for a free operation slot (at most "
                            f"{limit} at once in the cluster)")
        out.append(plan)
    return out
