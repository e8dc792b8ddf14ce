"""The lifecycle transitions reconcile_slices derives from what one run sees (pure)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.config import TeamPolicy
from shared.metrics.job_event import JobEventRecord
from shared.names import pool_name
from shared.slices.events import SliceOperation, Telemetry, derive_events
from shared.slices.lifecycle import JobState, job_states, pod_started_at, running_at
from shared.slices.model import PoolView
from shared.telemetry.events import JobFacts

KEY = "research/llama-1a2b3c4d"
T0 = 1_795_000_000.0  # 2026-11-18
FACTS = JobFacts(request_id="req-1", jobset=KEY, team="research", tpu_type="v5litepod-16",
                 slices=2, chips_per_slice=16)
TEAMS = {"research": TeamPolicy(namespace="research", queue="research-queue")}


def pool(index: int, status: str = "RUNNING") -> PoolView:
    return PoolView(name=pool_name("research", "llama-1a2b3c4d", index), status=status,
                    machine_type="ct5lp-hightpu-4t", jobset_namespace="research",
                    jobset_name="llama-1a2b3c4d", slice_index=index, nodes=4, active_pods=0)


def op(action: str, index: int, started: float, ended: float | None = None,
       failed: bool = False) -> SliceOperation:
    return SliceOperation(action=action, jobset=KEY, slice_index=index,  # type: ignore[arg-type]
                          pool=pool(index).name, started_at=started, ended_at=ended,
                          failed=failed)


class Runs:
    """Successive runs, each remembering what the one before published."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.done: tuple[str, ...] = ()
        self.published: list[JobEventRecord] = []

    def run(self, states: dict[str, JobState], pools: list[PoolView] = (),  # type: ignore[assignment]
            operations: list[SliceOperation] = (), now: float = T0,  # type: ignore[assignment]
            publish_fails: bool = False) -> Telemetry:
        telemetry = derive_events(states, pools, operations, self.jobs, self.done, now)
        if not publish_fails:
            self.published.extend(telemetry.records)
            self.jobs, self.done = telemetry.jobs, telemetry.done
        return telemetry

    def events(self) -> list[tuple[str, int | None, float]]:
        return [(r.event, r.slice_index, r.at.timestamp()) for r in self.published]


def test_one_job_through_its_whole_life_reports_each_transition_once_at_its_instant():
    runs, state = Runs(), JobState(facts=FACTS)
    runs.run({KEY: state}, now=T0)  # queued: nothing yet
    state = replace(state, admitted_at=T0 + 60, unsuspended=True)
    runs.run({KEY: state}, operations=[op("create", 0, T0 + 61), op("create", 1, T0 + 61.5)],
             now=T0 + 62)
    runs.run({KEY: state}, pools=[pool(0, "PROVISIONING"), pool(1, "PROVISIONING")],
             operations=[op("create", 0, T0 + 61), op("create", 1, T0 + 61.5)], now=T0 + 120)
    runs.run({KEY: state}, pools=[pool(0), pool(1)],
             operations=[op("create", 0, T0 + 61, T0 + 150), op("create", 1, T0 + 61.5, T0 + 155)],
             now=T0 + 180)
    state = replace(state, running_at=T0 + 200)
    runs.run({KEY: state}, pools=[pool(0), pool(1)], now=T0 + 240)
    state = replace(state, finished_at=T0 + 900, outcome="succeeded", reason="done")
    runs.run({KEY: state}, pools=[pool(0), pool(1)], now=T0 + 960)
    runs.run({KEY: state}, pools=[pool(0, "STOPPING"), pool(1, "STOPPING")],
             operations=[op("delete", 0, T0 + 1000), op("delete", 1, T0 + 1000)], now=T0 + 1020)
    runs.run({KEY: state}, operations=[op("delete", 0, T0 + 1000, T0 + 1100),
                                       op("delete", 1, T0 + 1000, T0 + 1110)], now=T0 + 1140)
    runs.run({KEY: state}, now=T0 + 1200)  # nothing left to say

    assert runs.events() == [
        ("admitted", None, T0 + 60),
        ("slice_requested", 0, T0 + 61), ("slice_requested", 1, T0 + 61.5),
        ("slice_ready", 0, T0 + 150), ("slice_ready", 1, T0 + 155),
        ("running", None, T0 + 200),
        ("finished", None, T0 + 900),
        ("slice_deleted", 0, T0 + 1100), ("slice_deleted", 1, T0 + 1110)]
    finished = runs.published[6]
    assert (finished.outcome, finished.reason) == ("succeeded", "done")
    assert runs.published[1].pool == pool(0).name
    assert runs.published[1].event_id == "req-1:slice_requested:0"
    assert all(r.team == "research" and r.chips_per_slice == 16 for r in runs.published)
    assert runs.jobs == {}
    assert runs.done == (KEY,)  # fully reported, still in the cluster


def test_a_fully_reported_jobset_is_forgotten_once_it_is_gone():
    runs = Runs()
    state = JobState(facts=replace(FACTS, slices=1), admitted_at=T0, finished_at=T0 + 5,
                     outcome="failed", reason="pod failed")
    runs.run({KEY: state})
    assert runs.done == (KEY,)

    runs.run({})

    assert (runs.jobs, runs.done) == ({}, ())
    assert [r.event for r in runs.published] == ["admitted", "finished"]


def test_a_failed_publish_leaves_the_transitions_for_the_next_run_under_the_same_keys():
    runs, state = Runs(), JobState(facts=FACTS, admitted_at=T0)

    lost = runs.run({KEY: state}, publish_fails=True)
    again = runs.run({KEY: state}, now=T0 + 60)

    assert [r.event_id for r in lost.records] == ["req-1:admitted"]
    assert [r.model_dump() for r in again.records] == [r.model_dump() for r in lost.records]


def test_a_jobset_deleted_before_it_finished_is_cancelled_then_its_slices_deleted():
    runs, state = Runs(), JobState(facts=FACTS, admitted_at=T0, unsuspended=True)
    runs.run({KEY: state}, pools=[pool(0), pool(1)], now=T0 + 60)

    runs.run({}, pools=[pool(0), pool(1)], now=T0 + 300)  # gone; pools not yet reaped
    runs.run({}, pools=[pool(1, "STOPPING")],
             operations=[op("delete", 0, T0 + 400, T0 + 450), op("delete", 1, T0 + 460)],
             now=T0 + 480)
    runs.run({}, now=T0 + 600)  # the second delete ended unseen (the run died)

    finished = [r for r in runs.published if r.event == "finished"]
    assert [(r.outcome, r.at.timestamp()) for r in finished] == [("cancelled", T0 + 300)]
    deleted = [(r.slice_index, r.at.timestamp()) for r in runs.published
               if r.event == "slice_deleted"]
    assert deleted == [(0, T0 + 450), (1, T0 + 600)]
    assert (runs.jobs, runs.done) == ({}, ())


def test_a_jobset_being_deleted_is_cancelled_at_its_deletion_timestamp():
    runs = Runs()

    runs.run({KEY: JobState(facts=FACTS, deleting_at=T0 + 30)}, now=T0 + 45)

    [record] = runs.published
    assert (record.event, record.outcome, record.at.timestamp()) == (
        "finished", "cancelled", T0 + 30)


def test_a_pool_deleted_while_its_job_lives_is_not_the_end_of_the_slice():
    runs, state = Runs(), JobState(facts=replace(FACTS, slices=1), admitted_at=T0)
    runs.run({KEY: state}, operations=[op("create", 0, T0 + 1, T0 + 50, failed=True)],
             pools=[pool(0, "ERROR")], now=T0 + 60)
    runs.run({KEY: state}, operations=[op("delete", 0, T0 + 61, T0 + 70)], now=T0 + 80)
    runs.run({KEY: state}, operations=[op("create", 0, T0 + 200, T0 + 300)],
             pools=[pool(0)], now=T0 + 320)

    assert [(e, t) for e, _, t in runs.events()] == [
        ("admitted", T0), ("slice_requested", T0 + 1), ("slice_ready", T0 + 300)]


def test_jobsets_accelops_did_not_submit_and_operations_on_other_pools_report_nothing():
    runs = Runs()
    stray = replace(op("create", 0, T0), jobset="other/job")

    telemetry = runs.run({}, pools=[replace(pool(0), jobset_name="other")],
                         operations=[stray])

    assert telemetry.records == ()
    assert (runs.jobs, runs.done) == ({}, ())


# --------------------------------------------------------------- any sequence of runs
STAGES = ("queued", "admitted", "requested", "ready", "running", "finished", "deleting",
          "deleted", "gone")


def world(stage: int, cancelled: bool) -> tuple[dict[str, JobState], list[PoolView],
                                                   list[SliceOperation]]:
    """What a run sees at a stage of the job's life (a cancelled job skips running)."""
    state = JobState(facts=FACTS)
    pools: list[PoolView] = []
    operations: list[SliceOperation] = []
    if stage >= 1:
        state = replace(state, admitted_at=T0 + 1, unsuspended=True)
    if stage == 2:
        operations = [op("create", i, T0 + 2) for i in (0, 1)]
    if stage in (3, 4, 5):
        pools = [pool(0), pool(1)]
    if stage == 3:
        operations = [op("create", i, T0 + 2, T0 + 3) for i in (0, 1)]
    if stage >= 4 and not cancelled:
        state = replace(state, running_at=T0 + 4)
    if stage >= 5:
        state = replace(state, finished_at=T0 + 5, outcome="succeeded") if not cancelled \
            else replace(state, deleting_at=T0 + 5)
    if stage == 6:
        pools = [pool(0, "STOPPING"), pool(1, "STOPPING")]
        operations = [op("delete", i, T0 + 6) for i in (0, 1)]
    if stage == 7:
        operations = [op("delete", i, T0 + 6, T0 + 7) for i in (0, 1)]
    return ({} if stage == 8 else {KEY: state}), pools, operations


@settings(max_examples=300, deadline=None)
@given(stages=st.lists(st.integers(0, len(STAGES) - 1), min_size=1, max_size=20),
       failures=st.lists(st.booleans(), min_size=20, max_size=20),
       cancelled=st.booleans())
def test_every_transition_is_published_at_most_once_across_any_sequence_of_runs(
    stages, failures, cancelled
):
    runs = Runs()
    stages = sorted(stages)  # time only moves forward
    for index, stage in enumerate(stages):
        states, pools, operations = world(stage, cancelled)
        runs.run(states, pools, operations, now=T0 + 10 + index, publish_fails=failures[index])

    counts = Counter(r.event_id for r in runs.published)
    assert all(n == 1 for n in counts.values()), counts
    for record in runs.published:  # each is a valid record, as ingest_metrics reads it
        assert JobEventRecord.model_validate_json(record.model_dump_json()) == record
    seen = any(stage < 8 and not failed for stage, failed in zip(stages, failures, strict=False))
    if seen and stages[-1] == 8 and not failures[len(stages) - 1]:
        assert runs.jobs == {}
        assert "finished" in {r.event for r in runs.published}


# ------------------------------------------------------------------ reading objects
def container(started: str | None = None, restarted_from: str | None = None,
              terminated: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"name": "main", "state": {}}
    if started:
        status["state"] = {"running": {"startedAt": started}}
    if terminated:
        status["state"] = {"terminated": {"startedAt": terminated, "exitCode": 0}}
    if restarted_from:
        status["lastState"] = {"terminated": {"startedAt": restarted_from}}
    return status


def pod(name: str, *containers: dict[str, Any], jobset: str = "llama-1a2b3c4d") -> dict:
    return {"metadata": {"name": name, "namespace": "research",
                         "labels": {"jobset.sigs.k8s.io/jobset-name": jobset}},
            "status": {"containerStatuses": list(containers)}}


def test_a_pod_runs_once_every_container_started_counting_each_from_its_first_start():
    assert pod_started_at(pod("a", container("2026-11-21T10:00:05Z",
                                             restarted_from="2026-11-21T10:00:01Z"),
                              container(terminated="2026-11-21T10:00:03Z"))) == (
        1_795_255_203.0)
    assert pod_started_at(pod("b", container("2026-11-21T10:00:05Z"), container())) is None
    assert pod_started_at(pod("c")) is None


def test_a_job_runs_when_its_last_expected_pod_started():
    pods = [pod(str(i), container(f"2026-11-21T10:00:0{i}Z")) for i in range(4)]

    assert running_at(pods[:3], 4) is None
    assert running_at(pods, 4) == 1_795_255_203.0
    assert running_at([*pods, pod("later", container("2026-11-21T11:00:00Z"))], 4) == (
        1_795_255_203.0)


def jobset(uid: str = "u-1", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "llama-1a2b3c4d", "namespace": "research", "uid": uid,
                         "labels": {"accelops.dev/team": "research"},
                         "annotations": {"accelops.dev/request-id": "req-1",
                                         "accelops.dev/tpu-type": "v5litepod-16"}},
            "spec": {"suspend": False, "replicatedJobs": [
                {"replicas": 2, "template": {"spec": {"parallelism": 4}}}]},
            "status": status}


def workload(admitted: str | None, *, owner: str | None = None,
             label: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "w", "namespace": "research", "labels": {}}
    if owner:
        meta["ownerReferences"] = [{"kind": "JobSet", "uid": owner, "name": "x"}]
    if label:
        meta["labels"]["kueue.x-k8s.io/job-uid"] = label
    conditions = [{"type": "Admitted", "status": "True", "lastTransitionTime": admitted}] \
        if admitted else [{"type": "QuotaReserved", "status": "False"}]
    return {"metadata": meta, "status": {"conditions": conditions}}


def test_a_jobs_workload_is_found_by_its_owner_reference_or_kueues_job_uid_label():
    by_owner = job_states([jobset("u-1")], [], [workload("2026-11-21T10:00:00Z", owner="u-1")],
                          TEAMS)
    by_label = job_states([jobset("u-2")], [], [workload("2026-11-21T10:00:00Z", label="u-2")],
                          TEAMS)
    pending = job_states([jobset("u-3")], [], [workload(None, owner="u-3")], TEAMS)

    assert by_owner[KEY].admitted_at == by_label[KEY].admitted_at == 1_795_255_200.0
    assert pending[KEY].admitted_at is None
    assert by_owner[KEY].facts == FACTS


def test_a_finished_jobset_carries_its_outcome_reason_and_condition_time():
    failed = jobset(conditions=[{"type": "Failed", "status": "True",
                                 "lastTransitionTime": "2026-11-21T10:05:00Z",
                                 "message": "jobset failed: pod exited 1"}])
    pods = [pod(str(i), container(terminated=f"2026-11-21T10:00:0{i % 8}Z"))
            for i in range(8)]

    [state] = job_states([failed], pods, [], TEAMS).values()

    assert (state.outcome, state.reason, state.finished_at) == (
        "failed", "jobset failed: pod exited 1", 1_795_255_500.0)
    assert state.running_at == 1_795_255_207.0  # all 8 pods (2 slices x 4) had started
