"""The pool schedule's decisions, pool by pool (pure: no clusters, no clock)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.config.offhours import Schedule
from shared.offhours.model import PoolView, SavedPool
from shared.offhours.observe import build_pools
from shared.offhours.plan import OUTPUT_ONLY, plan_cluster, plan_pool, saved_for
from shared.offhours.windows import Desired

CLUSTER = "projects/p/locations/us-central2-b/clusters/c"
NOW = dt.datetime(2026, 11, 23, 18, 5, tzinfo=dt.UTC)
OFF = Desired(False, "off-2026-11-23T18:00:00+00:00", None, None, "off-hours")
ON = Desired(True, "on-2026-11-24T06:00:00+00:00", None, None, "on-hours")
REMOVING = {"delete", "set_size", "set_autoscaling"}


def gpu_spec(name: str = "gpu", nodes: int = 2, auto: tuple[int, int] | None = (1, 4),
             **labels: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name, "initial_node_count": nodes, "status": "RUNNING",
        "self_link": f"https://container.googleapis.com/v1/{CLUSTER}/nodePools/{name}",
        "config": {"machine_type": "g2-standard-8",
                   "labels": {"accelops.dev/schedule": "office", **labels},
                   "accelerators": [{"accelerator_count": "1",
                                     "accelerator_type": "nvidia-l4"}]}}
    if auto:
        spec["autoscaling"] = {"enabled": True, "min_node_count": auto[0],
                               "max_node_count": auto[1]}
    return spec


def slice_spec(name: str = "team-slice") -> dict[str, Any]:
    return {"name": name, "initial_node_count": 4, "status": "RUNNING",
            "config": {"machine_type": "ct5lp-hightpu-4t",
                       "labels": {"accelops.dev/schedule": "office"}},
            "placement_policy": {"type_": "COMPACT", "tpu_topology": "4x4"}}


def nodes_of(pool: str, count: int) -> list[dict[str, Any]]:
    return [{"metadata": {"name": f"{pool}-{i}",
                          "labels": {"cloud.google.com/gke-nodepool": pool}}}
            for i in range(count)]


def pod_on(node: str, phase: str = "Running", daemon: bool = False) -> dict[str, Any]:
    owners = [{"kind": "DaemonSet", "name": "fluentbit"}] if daemon else []
    return {"metadata": {"namespace": "research", "name": f"p-{node}",
                         "ownerReferences": owners},
            "spec": {"nodeName": node}, "status": {"phase": phase}}


def view(spec: dict[str, Any], nodes: int, pods: list[dict[str, Any]] | None = None,
         workloads: list[dict[str, Any]] | None = None) -> PoolView:
    return build_pools(CLUSTER, [spec], nodes_of(spec["name"], nodes), pods or [],
                       workloads or [])[0]


def test_an_autoscaled_gpu_pool_is_saved_then_scaled_to_zero_in_two_ticks() -> None:
    pool = view(gpu_spec(), 2)
    first = plan_pool(pool, None, OFF, NOW)
    assert first is not None
    assert [s.kind for s in first.steps] == ["save", "set_autoscaling"]
    assert first.steps[1].autoscaling == {"enabled": True, "min_node_count": 0,
                                          "max_node_count": 4}
    assert first.audit is not None
    assert (first.audit.action, first.audit.method, first.audit.accelerator_count) == (
        "remove", "resize", 2)
    saved = first.after_audit
    assert saved is not None
    assert saved.removed_at == NOW.isoformat()
    # Next tick: autoscaling minimum is 0, two nodes remain: resize, no second audit row.
    spec = gpu_spec(auto=(0, 4))
    second = plan_pool(view(spec, 2), saved, OFF, NOW + dt.timedelta(minutes=5))
    assert second is not None
    assert [(s.kind, s.size) for s in second.steps] == [("set_size", 0)]
    assert second.audit is None
    assert plan_pool(view(spec, 0), saved, OFF, NOW).steps == ()  # type: ignore[union-attr]


def test_a_pool_resized_since_its_creation_comes_back_at_the_size_it_had() -> None:
    spec = gpu_spec(nodes=3, auto=None)  # created with three nodes, scaled to one by hand
    evening = plan_pool(view(spec, 1), None, OFF, NOW)
    assert evening is not None
    assert evening.audit is not None
    assert evening.audit.accelerator_count == 1  # what the removal saves
    saved = evening.after_audit
    assert saved is not None
    assert saved.nodes_per_zone == 1
    morning = plan_pool(view(spec, 0), saved, ON, NOW)
    assert morning is not None
    assert [(s.kind, s.size) for s in morning.steps] == [("set_size", 1)]


def test_a_multi_host_slice_is_deleted_after_its_whole_spec_is_saved() -> None:
    plan = plan_pool(view(slice_spec(), 4), None, OFF, NOW)
    assert plan is not None
    assert [s.kind for s in plan.steps] == ["save", "delete"]
    saved = plan.steps[0].saved
    assert saved is not None
    assert (saved.method, saved.spec, saved.accelerator_count) == ("delete", slice_spec(), 16)


def test_a_restore_recreates_the_saved_spec_without_output_only_fields() -> None:
    saved = saved_for(view(slice_spec(), 4), OFF).with_changes(removed_at=NOW.isoformat())
    plan = plan_pool(None, saved, ON, NOW)
    assert plan is not None
    assert [s.kind for s in plan.steps] == ["create"]
    expected = {k: v for k, v in slice_spec().items() if k not in OUTPUT_ONLY}
    assert plan.steps[0].spec == expected
    assert plan.audit is not None
    assert (plan.audit.action, plan.audit.method) == ("restore", "recreate")


def test_a_pool_with_a_running_pod_is_skipped_and_reported_but_daemon_pods_do_not_count() -> None:
    busy = view(gpu_spec(), 2, pods=[pod_on("gpu-0"), pod_on("gpu-1", daemon=True)])
    plan = plan_pool(busy, None, OFF, NOW)
    assert plan is not None
    assert plan.skipped
    assert plan.steps == ()
    assert plan.audit is not None
    assert plan.audit.action == "skip"
    assert "1 pod(s) running: research/p-gpu-0" in plan.note
    daemons_only = view(gpu_spec(), 2, pods=[pod_on("gpu-1", daemon=True),
                                             pod_on("gpu-0", phase="Succeeded")])
    assert not plan_pool(daemons_only, None, OFF, NOW).skipped  # type: ignore[union-attr]


def test_forcing_removes_a_busy_pool_and_says_so() -> None:
    busy = view(slice_spec(), 4, pods=[pod_on("team-slice-0")])
    plan = plan_pool(busy, None, OFF, NOW, force=True)
    assert plan is not None
    assert [s.kind for s in plan.steps] == ["save", "delete"]
    assert "(forced)" in plan.note
    assert plan.audit is not None
    assert plan.audit.forced


def test_an_admitted_workload_selecting_the_pool_keeps_it_up() -> None:
    workload = {"metadata": {"namespace": "research", "name": "jobset-train-1"},
                "spec": {"podSets": [{"template": {"spec": {"nodeSelector": {
                    "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
                    "cloud.google.com/gke-tpu-topology": "4x4"}}}}]},
                "status": {"admission": {"clusterQueue": "research"}}}
    pool = view(slice_spec(), 4, workloads=[workload])
    assert pool.busy == ("1 admitted workload(s): research/jobset-train-1",)
    finished = {**workload, "status": {**workload["status"], "conditions": [
        {"type": "Finished", "status": "True"}]}}
    other_shape = {**workload, "spec": {"podSets": [{"template": {"spec": {"nodeSelector": {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice"}}}}]}}
    assert view(slice_spec(), 4, workloads=[finished, other_shape]).busy == ()


def test_pools_made_by_reconcile_slices_are_never_touched() -> None:
    spec = gpu_spec(**{"accelops.dev/managed-by": "accelops"})
    pools = build_pools(CLUSTER, [spec], nodes_of("gpu", 2), [], [])
    office = Schedule(time_zone="UTC", on_hours={"weekdays": ["06:00-18:00"]})
    assert plan_cluster(pools, {}, {"office": office}, 30, NOW) == []


def test_a_kept_pool_is_left_up_and_one_removed_before_it_was_kept_comes_back() -> None:
    office = Schedule(time_zone="UTC", on_hours={"weekdays": ["06:00-18:00"]})
    kept = view(gpu_spec(**{"accelops.dev/keep": "true"}, auto=(0, 4)), 0)
    assert plan_cluster([view(gpu_spec(**{"accelops.dev/keep": "true"}), 2)], {},
                        {"office": office}, 30, NOW) == []
    saved = saved_for(view(gpu_spec(), 2), OFF).with_changes(removed_at="t")
    plans = plan_cluster([kept], {"gpu": saved}, {"office": office}, 30, NOW)
    assert [(p.pool, [s.kind for s in p.steps]) for p in plans] == [("gpu", ["set_size"])]
    assert plans[0].steps[0].size == 2


def test_a_pool_on_an_unknown_schedule_is_reported_and_left_alone() -> None:
    plans = plan_cluster([view(gpu_spec(), 2)], {}, {}, 30, NOW)
    assert len(plans) == 1
    assert plans[0].steps == ()
    assert "'office' is not in the configuration" in plans[0].note


# --- properties ---------------------------------------------------------------------

STATUSES = ("RUNNING", "PROVISIONING", "RECONCILING", "STOPPING", "ERROR")


@st.composite
def pools(draw: st.DrawFn) -> PoolView:
    multi = draw(st.booleans())
    spec = slice_spec() if multi else gpu_spec(
        nodes=draw(st.integers(0, 4)),
        auto=draw(st.one_of(st.none(), st.tuples(st.integers(0, 2), st.integers(3, 6)))))
    spec["status"] = draw(st.sampled_from(STATUSES))
    nodes = draw(st.integers(0, 4))
    pods = [pod_on(f"{spec['name']}-{i}", phase=draw(st.sampled_from(["Running", "Pending"])))
            for i in range(draw(st.integers(0, min(nodes, 2))))]
    return view(spec, nodes, pods)


@st.composite
def saved_states(draw: st.DrawFn, pool: PoolView) -> SavedPool | None:
    if draw(st.booleans()):
        return None
    saved = saved_for(pool, OFF)
    return saved.with_changes(
        removed_at=draw(st.sampled_from([None, "t"])),
        restore_started_at=draw(st.sampled_from([None, "t"])),
        nodes_per_zone=draw(st.integers(1, 4)))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_pool_with_running_pods_is_never_removed_or_resized_to_zero(data: st.DataObject) -> None:
    pool = data.draw(pools())
    saved = data.draw(saved_states(pool))
    desired = data.draw(st.sampled_from([OFF, ON]))
    plan = plan_pool(pool, saved, desired, NOW)
    if plan is None or not pool.busy:
        return
    for step in plan.steps:
        assert step.kind != "delete" or (desired.on and pool.status == "ERROR")
        assert not (step.kind == "set_size" and step.size == 0)
        if step.kind == "set_autoscaling":
            assert (step.autoscaling or {}).get("min_node_count", 0) > 0


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_tick_starts_at_most_one_operation_per_pool_and_saves_before_removing(
        data: st.DataObject) -> None:
    pool = data.draw(pools())
    saved = data.draw(saved_states(pool))
    plan = plan_pool(pool, saved, data.draw(st.sampled_from([OFF, ON])), NOW,
                     force=data.draw(st.booleans()))
    if plan is None:
        return
    assert sum(1 for s in plan.steps if s.operation) <= 1
    if any(s.kind in REMOVING for s in plan.steps) and saved is None:
        assert plan.steps[0].kind == "save"


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_restoring_recreates_exactly_the_spec_that_was_saved(data: st.DataObject) -> None:
    spec = slice_spec(data.draw(st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True)))
    spec["config"]["labels"].update(data.draw(st.dictionaries(
        st.from_regex(r"[a-z]{1,10}", fullmatch=True),
        st.from_regex(r"[a-z0-9]{0,10}", fullmatch=True), max_size=4)))
    spec["locations"] = data.draw(st.lists(st.sampled_from(["us-central2-b", "us-east5-a"]),
                                           min_size=1, max_size=2, unique=True))
    removed = plan_pool(view(spec, 4), None, OFF, NOW)
    assert removed is not None
    assert removed.steps[0].saved is not None
    saved = removed.steps[0].saved.with_changes(removed_at=NOW.isoformat())
    restored = plan_pool(None, saved, ON, NOW + dt.timedelta(hours=12))
    assert restored is not None
    created = restored.steps[0].spec
    assert created == {k: v for k, v in spec.items() if k not in OUTPUT_ONLY}


def test_a_tick_starts_no_more_operations_than_the_cluster_has_free_slots_restores_first(
        ) -> None:
    office = Schedule(time_zone="UTC", on_hours={"weekdays": ["06:00-18:00"]})
    morning = dt.datetime(2026, 11, 24, 5, 45, tzinfo=dt.UTC)  # in the lead time
    evening_pools = [view(gpu_spec(f"gpu-{i}"), 2) for i in range(6)]
    busy = view({**gpu_spec("other"), "status": "RECONCILING"}, 1)
    plans = plan_cluster([*evening_pools, busy], {}, {"office": office}, 30, NOW,
                         max_operations=4)
    started = [p.pool for p in plans if any(s.operation for s in p.steps)]
    assert started == ["gpu-0", "gpu-1", "gpu-2"]  # 4 slots, one taken by "other"
    assert all("waiting for a free operation slot" in p.note
               for p in plans if p.pool in {"gpu-3", "gpu-4", "gpu-5"})
    assert all(p.audit is None for p in plans if p.pool in {"gpu-3", "gpu-4", "gpu-5"})

    removed_slice = saved_for(view(slice_spec("z-slice"), 4), OFF).with_changes(removed_at="t")
    removed_gpu = saved_for(view(gpu_spec("a-gpu"), 2), OFF).with_changes(removed_at="t")
    pools_now = [view(gpu_spec("a-gpu", auto=(0, 4)), 0)]
    plans = plan_cluster(pools_now, {"a-gpu": removed_gpu, "z-slice": removed_slice},
                         {"office": office}, 30, morning, max_operations=1)
    # The slice is the slowest to come back: it is recreated first.
    assert [(p.pool, [s.kind for s in p.steps]) for p in plans] == [
        ("a-gpu", []), ("z-slice", ["create"])]
