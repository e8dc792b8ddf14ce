"""The slice planner on hand-built observed states."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from shared.config import SliceConfig
from shared.jobspec.tpu import lookup
from shared.names import pool_name
from shared.slices.model import (
    CreatePool,
    DeletePool,
    JobSetView,
    Observed,
    PoolView,
    SliceFailure,
)
from shared.slices.plan import next_capacity, plan_slices

NOW = 1_800_000_000.0
SETTINGS = SliceConfig(grace_period_seconds=120, zone="us-central2-b",
                       node_service_account="tpu-nodes@p.iam.gserviceaccount.com",
                       network_tags=("tpu",))


def jobset(name: str = "llama", tpu: str = "v5litepod-16", slices: int = 2,
           **changes) -> JobSetView:
    view = JobSetView(namespace="research", name=name, shape=lookup(tpu), slices=slices,
                      suspended=False, finished_at=None, deleting=False, opted_out=False,
                      capacity="on-demand", created_at=NOW - 60, active_pods=0)
    return replace(view, **changes)


def pool(js: JobSetView, index: int, status: str = "RUNNING", nodes: int | None = None,
         active_pods: int = 0) -> PoolView:
    assert js.shape is not None
    return PoolView(name=pool_name(js.namespace, js.name, index), status=status,
                    machine_type=js.shape.machine_type, jobset_namespace=js.namespace,
                    jobset_name=js.name, slice_index=index,
                    nodes=js.shape.vms if nodes is None else nodes, active_pods=active_pods)


def plan(jobsets=(), pools=(), settings=SETTINGS, now=NOW, idle_since=None, failures=None,
         inflight=()):
    return plan_slices(Observed(tuple(jobsets), tuple(pools)), settings, now, idle_since or {},
                       failures, inflight)


def failed(js: JobSetView, attempts: int = 1, next_attempt: float = NOW + 60,
           capacity: str = "on-demand") -> dict[str, SliceFailure]:
    return {js.key: SliceFailure(attempts=attempts, next_attempt=next_attempt,
                                 reason="GCE_STOCKOUT", capacity=capacity,
                                 pool=pool_name(js.namespace, js.name, 0))}


def test_an_admitted_multi_slice_jobset_gets_one_compact_pool_per_slice():
    result = plan([jobset(slices=2)])

    creates = [a for a in result.actions if isinstance(a, CreatePool)]
    assert [a.slice_index for a in creates] == [0, 1]
    spec = creates[0].spec
    assert (spec.machine_type, spec.node_count, spec.topology) == ("ct5lp-hightpu-4t", 4, "4x4")
    assert spec.labels == {"accelops.dev/jobset": "llama",
                           "accelops.dev/jobset-namespace": "research",
                           "accelops.dev/slice": "0", "accelops.dev/managed-by": "accelops"}
    assert (spec.zone, spec.service_account, spec.network_tags) == (
        "us-central2-b", "tpu-nodes@p.iam.gserviceaccount.com", ("tpu",))
    assert all(len(a.spec.name) <= 40 for a in creates)


def test_a_single_host_shape_gets_a_pool_without_placement_topology():
    [create] = plan([jobset(tpu="v6e-8", slices=1)]).actions

    assert isinstance(create, CreatePool)
    assert (create.spec.node_count, create.spec.topology) == (1, None)
    assert create.spec.machine_type == "ct6e-standard-8t"


def test_capacity_from_the_jobset_reaches_the_pool():
    spot, = plan([jobset(slices=1, capacity="spot")]).actions
    reserved, = plan([jobset(slices=1, capacity="reservation/tpu-res")]).actions

    assert isinstance(spot, CreatePool)
    assert isinstance(reserved, CreatePool)
    assert (spot.spec.spot, spot.spec.reservation) == (True, None)
    assert (reserved.spec.spot, reserved.spec.reservation) == (False, "tpu-res")


def test_a_jobset_held_by_kueue_quota_gets_no_pool():
    assert plan([jobset(suspended=True)]).actions == ()


def test_a_slice_whose_pool_exists_in_any_live_state_is_not_created_again():
    js = jobset(slices=2)
    result = plan([js], [pool(js, 0, status="PROVISIONING", nodes=0), pool(js, 1)])

    assert result.actions == ()


def test_a_restarted_jobset_keeps_its_pools_because_pool_names_are_stable():
    js = jobset(slices=1)
    restarted = replace(js, created_at=NOW - 5, active_pods=0)

    assert pool_name("research", "llama", 0) == pool(js, 0).name
    assert plan([restarted], [pool(js, 0)]).actions == ()


def test_duplicate_triggers_plan_the_same_actions():
    js = jobset(slices=3)
    first, second = plan([js]), plan([js])

    assert first == second
    assert first.actions[0].pool == pool_name("research", "llama", 0)


def test_a_jobset_whose_create_failed_waits_for_its_backoff_and_its_error_pool_goes():
    js = jobset(slices=1)
    broken = pool(js, 0, status="ERROR", nodes=0)

    result = plan([js], [broken], failures=failed(js))
    after_delete = plan([js], [], failures=failed(js))
    later = plan([js], [], failures=failed(js), now=NOW + 61)

    assert [a.kind for a in result.start] == ["delete"]
    assert after_delete.actions == ()
    assert "GCE_STOCKOUT" in after_delete.waiting[0]
    assert "next attempt in 60s" in after_delete.waiting[0]
    assert after_delete.failures == failed(js)
    assert [a.kind for a in later.start] == ["create"]


def test_a_failing_jobset_does_not_hold_up_another():
    stuck = jobset(name="stuck", slices=1, created_at=NOW - 600)
    fresh = jobset(name="fresh", slices=1)

    result = plan([stuck, fresh], failures=failed(stuck))

    assert [a.jobset for a in result.start] == ["research/fresh"]


def test_a_failure_is_forgotten_once_every_slice_runs_or_the_jobset_is_gone():
    js = jobset(slices=2)
    partly = plan([js], [pool(js, 0), pool(js, 1, status="PROVISIONING", nodes=0)],
                  failures=failed(js))
    running = plan([js], [pool(js, 0), pool(js, 1)], failures=failed(js))
    gone = plan([], [], failures=failed(js))

    assert partly.failures == failed(js)
    assert running.failures == {}
    assert gone.failures == {}


def test_successive_attempts_follow_the_capacity_fallback_order():
    settings = SliceConfig(reservation="tpu-res",
                           capacity_fallback=("reservation", "on-demand", "spot"))
    js = jobset(slices=1, capacity="reservation/tpu-res")

    first = next_capacity(js, None, settings)
    second = next_capacity(js, failed(js, capacity=first)[js.key], settings)
    third = next_capacity(js, failed(js, capacity=second)[js.key], settings)
    fourth = next_capacity(js, failed(js, capacity=third)[js.key], settings)

    assert [first, second, third, fourth] == ["reservation/tpu-res", "on-demand", "spot", "spot"]
    [create] = plan([js], settings=settings, now=NOW + 61,
                    failures=failed(js, capacity="on-demand")).start
    assert isinstance(create, CreatePool)
    assert (create.spec.spot, create.spec.reservation) == (True, None)


def test_a_jobset_whose_capacity_is_not_in_the_fallback_order_keeps_it():
    settings = SliceConfig(capacity_fallback=("on-demand", "spot"))
    js = jobset(slices=1, capacity="reservation/team-own")

    assert next_capacity(js, failed(js, capacity="reservation/team-own")[js.key],
                         settings) == "reservation/team-own"
    assert next_capacity(jobset(slices=1), None, SliceConfig()) == "on-demand"


def test_a_finished_jobset_pool_is_deleted_only_after_the_grace_period():
    js = jobset(slices=1, finished_at=NOW - 60)
    early = plan([js], [pool(js, 0)])
    late = plan([replace(js, finished_at=NOW - 121)], [pool(js, 0)])

    assert early.actions == ()
    assert "grace period" in early.waiting[0]
    [delete] = late.actions
    assert isinstance(delete, DeletePool)
    assert delete.reason == "its JobSet finished"


def test_a_deleted_jobset_pool_is_deleted_a_grace_period_after_it_was_first_seen_orphaned():
    js = jobset(slices=1)
    first = plan([], [pool(js, 0)])
    later = plan([], [pool(js, 0)], now=NOW + 121, idle_since=first.idle_since)

    assert first.actions == ()
    assert first.idle_since == {pool(js, 0).name: NOW}
    assert [a.kind for a in later.actions] == ["delete"]


def test_a_pool_in_error_with_no_nodes_is_deleted_at_once_and_recreated_later():
    js = jobset(slices=1)
    broken = pool(js, 0, status="ERROR", nodes=0)

    [delete] = plan([js], [broken]).actions
    [create] = plan([js], []).actions

    assert isinstance(delete, DeletePool)
    assert delete.reason == "pool is in ERROR with no nodes"
    assert isinstance(create, CreatePool)


def test_a_jobset_deleted_while_its_pool_is_being_created_waits_for_the_pool_first():
    js = jobset(slices=1)
    provisioning = plan([], [pool(js, 0, status="PROVISIONING", nodes=0)])
    running = plan([], [pool(js, 0)], now=NOW + 200, idle_since={pool(js, 0).name: NOW})

    assert provisioning.actions == ()
    assert [a.kind for a in running.actions] == ["delete"]


def test_a_pool_with_running_pods_is_not_deleted_even_when_its_jobset_is_gone():
    js = jobset(slices=1)
    result = plan([], [pool(js, 0, active_pods=4)], now=NOW + 10_000,
                  idle_since={pool(js, 0).name: NOW})

    assert result.actions == ()
    assert "still running" in result.waiting[0]


def test_cleanup_only_mode_deletes_but_never_creates():
    done = jobset(name="done", slices=1, finished_at=NOW - 500)
    waiting = jobset(name="new", slices=1)
    settings = SliceConfig(cleanup_only=True)

    result = plan([done, waiting], [pool(done, 0)], settings=settings)

    assert [a.kind for a in result.actions] == ["delete"]


def test_an_opted_out_jobset_gets_no_pools_and_its_pools_are_left_alone():
    js = jobset(slices=1, opted_out=True)
    assert plan([js]).actions == ()
    assert plan([js], [pool(js, 0)], now=NOW + 10_000).actions == ()


def test_pools_not_labelled_by_accelops_are_never_touched():
    foreign = PoolView(name="default-pool", status="ERROR", machine_type="e2-standard-4",
                       jobset_namespace=None, jobset_name=None, slice_index=None, nodes=0,
                       active_pods=0)
    assert plan([], [foreign]).actions == ()


def test_deletions_come_first_then_the_longest_waiting_jobset():
    old = jobset(name="old", slices=1, created_at=NOW - 600)
    new = jobset(name="new", slices=1, created_at=NOW - 10)
    finished = jobset(name="fin", slices=1, finished_at=NOW - 400)

    result = plan([new, old, finished], [pool(finished, 0)])

    assert [a.jobset for a in result.actions] == ["research/fin", "research/old",
                                                  "research/new"]


def test_a_slice_removed_from_the_jobset_frees_its_pool():
    js = jobset(slices=1)
    result = plan([js], [pool(js, 0), pool(js, 1)], now=NOW + 200,
                  idle_since={pool(js, 1).name: NOW})
    assert [(a.kind, a.pool) for a in result.actions] == [("delete", pool(js, 1).name)]


statuses = st.sampled_from(["RUNNING", "PROVISIONING", "RECONCILING", "ERROR", "STOPPING"])


@st.composite
def cluster_states(draw):
    jobsets, pools = [], []
    for i in range(draw(st.integers(0, 4))):
        js = jobset(
            name=f"job-{i}", tpu=draw(st.sampled_from(["v5litepod-16", "v6e-8", "v5p-128"])),
            slices=draw(st.integers(1, 3)), suspended=draw(st.booleans()),
            finished_at=draw(st.none() | st.floats(NOW - 10_000, NOW)),
            deleting=draw(st.booleans()), active_pods=draw(st.integers(0, 8)))
        if draw(st.booleans()):
            jobsets.append(js)
        for index in range(draw(st.integers(0, 4))):
            pools.append(pool(js, index, status=draw(statuses),
                              nodes=draw(st.integers(0, 4)),
                              active_pods=draw(st.integers(0, 4))))
    return jobsets, pools


@given(state=cluster_states(), elapsed=st.floats(0, 100_000),
       settings=st.builds(SliceConfig, grace_period_seconds=st.integers(0, 600),
                          cleanup_only=st.booleans()))
def test_a_pool_whose_jobset_still_has_running_pods_is_never_deleted(state, elapsed, settings):
    jobsets, pools = state
    idle = {p.name: NOW - elapsed for p in pools}
    result = plan(jobsets, pools, settings=settings, now=NOW, idle_since=idle)

    running = {j.key for j in jobsets if j.active_pods}
    by_name = {p.name: p for p in pools}
    for action in result.actions:
        if isinstance(action, DeletePool):
            deleted = by_name[action.pool]
            assert deleted.active_pods == 0
            assert deleted.jobset_key not in running or deleted.nodes == 0


@given(state=cluster_states())
def test_every_planned_pool_name_is_a_valid_gke_name(state):
    jobsets, pools = state
    for action in plan(jobsets, pools).actions:
        assert len(action.pool) <= 40
        assert action.pool[0].isalpha()
        assert all(c.islower() or c.isdigit() or c == "-" for c in action.pool)


@given(state=cluster_states(), limit=st.integers(1, 6),
       inflight=st.sets(st.sampled_from([f"job-{i}" for i in range(4)]), max_size=3),
       elapsed=st.floats(0, 100_000))
def test_the_started_operations_respect_the_limit_the_pools_and_the_order(
    state, limit, inflight, elapsed
):
    jobsets, pools = state
    inflight = {pool_name("research", name, 0) for name in inflight}
    settings = SliceConfig(max_concurrent_operations=limit, grace_period_seconds=0)
    result = plan(jobsets, pools, settings=settings,
                  idle_since={p.name: NOW - elapsed for p in pools}, inflight=inflight)

    busy = inflight | {p.name for p in pools if p.status in ("PROVISIONING", "RECONCILING",
                                                             "STOPPING")}
    started = [a.pool for a in result.start]
    # never more than the limit in flight
    assert len(started) + len(busy) <= max(limit, len(busy))
    assert len(started) <= max(0, limit - len(busy))
    # never two operations on one pool
    assert len(started) == len(set(started))
    assert not set(started) & busy
    # deletes before creates, and no create while a due delete is left unstarted
    kinds = [a.kind for a in result.start]
    assert kinds == sorted(kinds, key=lambda k: k != "delete")
    left = [a for a in result.actions if a not in result.start]
    if any(a.kind == "delete" and a.pool not in busy for a in left):
        assert "create" not in kinds
    # a JobSet's creates start together: every one due, or as many as the limit holds
    for key in {a.jobset for a in result.start if isinstance(a, CreatePool)}:
        due = [a for a in result.actions
               if isinstance(a, CreatePool) and a.jobset == key and a.pool not in busy]
        begun = [a for a in result.start if isinstance(a, CreatePool) and a.jobset == key]
        assert len(begun) == min(len(due), limit)
    # an action left out had no room, its pool is busy, or it is a create waiting
    # (behind) a JobSet whose slices did not all fit
    if len(started) < limit - len(busy):
        waiting = [a for a in left if a.pool not in busy]
        assert all(a.kind == "create" for a in waiting)
        if waiting:
            assert any("start together" in note for note in result.waiting)


@given(state=cluster_states(), elapsed=st.floats(0, 1_000))
def test_a_jobset_in_backoff_is_never_given_a_pool(state, elapsed):
    jobsets, pools = state
    failures = {j.key: SliceFailure(attempts=1, next_attempt=NOW + 1 + elapsed, reason="x",
                                    capacity="on-demand", pool="p") for j in jobsets}
    result = plan(jobsets, pools, failures=failures)

    assert not [a for a in result.actions if isinstance(a, CreatePool)]


def test_the_capacity_fallback_order_is_checked_when_the_config_loads():
    with pytest.raises(ValidationError, match="capacity_fallback entry 'preemptible'"):
        SliceConfig(capacity_fallback=("on-demand", "preemptible"))
    with pytest.raises(ValidationError, match=r"slices\.reservation is not set"):
        SliceConfig(capacity_fallback=("reservation", "spot"))
    assert SliceConfig(reservation="r", capacity_fallback=("reservation", "spot")
                       ).capacities() == ("reservation/r", "spot")
