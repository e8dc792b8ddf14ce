"""A job's state and its explanation, from hand-built cluster objects (no I/O)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.jobs.cli import format_jobs, format_status
from shared.jobs.status.explain import (
    Observation,
    explain,
    explain_rejection,
    job_state,
    leader_or_failed_pod,
    summarize,
)
from shared.jobs.status.model import JobStatus
from shared.jobs.status.parts import failure_kind
from shared.jobspec.labels import ANNOTATION_SLICE_FAILURE
from shared.names import pool_name
from shared.slices.model import SliceFailure
from tests.job_objects import (
    admitted,
    cluster_queue,
    finished,
    jobset,
    local_queue,
    pods,
    stamp,
    workload,
)

TEAMS = {"research": "research", "inference": "inference"}
NOW = datetime(2026, 11, 23, 11, 0, tzinfo=UTC).timestamp()
PENDING = ("couldn't assign flavors to pod set slice: insufficient unused quota for "
           "google.com/tpu in flavor tpu-v5-lite-podslice, 16 more needed")
STOCKOUT = ("GCE_STOCKOUT: The zone 'projects/p/zones/us-central2-b' does not have enough "
            "resources available to fulfill the request.")
QUEUES = [local_queue("research", "research-queue", "shared"),
          local_queue("inference", "inference-queue", "shared")]


def queued(js: dict[str, Any], wl: dict[str, Any] | None, workloads: list[dict[str, Any]],
           cq: dict[str, Any] | None = None, **extra: Any) -> JobStatus:
    return explain(Observation(jobset=js, now=NOW, workload=wl, teams=TEAMS,
                               local_queue=QUEUES[0], local_queues=QUEUES,
                               cluster_queue=cq or cluster_queue("shared", 64, reserved=48),
                               workloads=workloads, **extra))


def test_a_suspended_job_whose_workload_kueue_has_not_admitted_is_queued_in_kueues_words():
    js = jobset("q1", slices=2)  # 2 x 16 chips
    wl = workload(js, message=PENDING)

    status = queued(js, wl, [wl])

    assert status.state == "queued"
    assert status.queue is not None
    assert (status.queue.cluster_queue, status.queue.local_queue, status.queue.flavor) == (
        "shared", "research/research-queue", "tpu-v5-lite-podslice")
    assert (status.queue.chips_requested, status.queue.chips_available,
            status.queue.chips_quota) == (32, 16, 64)
    assert status.queue.message == PENDING
    assert f"Kueue: {PENDING}." in status.explanation
    assert status.summary.startswith("queued: couldn't assign flavors")


def test_the_workloads_ahead_are_in_kueues_order_and_those_holding_the_quota_are_named():
    mine = jobset("mine", created=30)
    early_low = jobset("early-low", created=10, uid="u1")
    late_high = jobset("late-high", created=40, uid="u2")
    older_same = jobset("older-same", created=20, uid="u3")
    running = jobset("holds", team="inference", created=0, uid="u4", tpu="v5litepod-16",
                     slices=3)
    elsewhere = jobset("other-queue", created=5, uid="u5")
    workloads = [
        workload(mine, message=PENDING),
        workload(early_low, priority=100, message=PENDING),
        workload(late_high, priority=300, message=PENDING),
        workload(older_same, message=PENDING),
        workload(running, admitted_in="shared"),
        {**workload(elsewhere, message=PENDING), "spec": {
            **workload(elsewhere)["spec"], "queueName": "not-shared"}},
    ]

    status = queued(mine, workloads[0], workloads)

    assert status.queue is not None
    # Higher priority first, whatever its age; then the older of equal priority.
    assert status.queue.ahead == [_ref(late_high), _ref(older_same)]
    assert status.queue.admitted == [_ref(running)]
    assert any("Holding that quota now" in line and "48 chips, team inference" in line
               for line in status.explanation)
    assert any(line.startswith("Ahead of it in the queue (2)") for line in status.explanation)


def _ref(js: dict[str, Any]) -> str:
    meta = workload(js)["metadata"]
    return f"{meta['namespace']}/{meta['name']}"


def test_a_job_larger_than_the_whole_quota_is_told_it_can_never_be_admitted():
    js = jobset("huge", slices=4)  # 64 chips
    wl = workload(js, message="couldn't assign flavors to pod set slice: insufficient "
                              "quota for google.com/tpu in flavor tpu-v5-lite-podslice, "
                              "request > maximum capacity (64 > 32)")

    status = queued(js, wl, [wl], cluster_queue("shared", 32))

    assert any(line.startswith("It can never be admitted: 64 chips exceed the queue's whole "
                               "quota of 32") for line in status.explanation)


def test_under_strict_fifo_a_job_is_told_it_waits_for_those_ahead():
    first, mine = jobset("first", created=1, uid="u1"), jobset("second", created=2)
    workloads = [workload(first, message=PENDING), workload(mine, message=PENDING)]

    status = queued(mine, workloads[1], workloads,
                    cluster_queue("shared", 64, strategy="StrictFIFO"))

    assert any("StrictFIFO" in line and line.startswith("It starts after")
               for line in status.explanation)


def test_a_preempted_job_is_queued_again_and_says_it_was_preempted_in_kueues_words():
    js = jobset("bumped", slices=2)
    text = ("Preempted to accommodate a workload (UID: uid-urgent) due to prioritization "
            "in the ClusterQueue")
    wl = workload(js, message=PENDING)
    wl["status"]["conditions"] += [
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": text},
        {"type": "Preempted", "status": "True", "reason": "InClusterQueue", "message": text},
        {"type": "Requeued", "status": "True", "reason": "Preempted", "message": text}]

    status = queued(js, wl, [wl])

    assert status.state == "queued"
    assert status.queue is not None
    assert status.queue.preempted == text
    assert any(line.startswith(f"Preempted: {text}. Kueue evicted it for a job of higher "
                               "priority") for line in status.explanation)
    assert status.summary.startswith("queued again after being preempted: couldn't assign")


def test_a_job_admitted_again_after_a_preemption_is_no_longer_said_to_be_preempted():
    js = jobset("back", slices=2)
    wl = workload(js, message=PENDING)
    wl["status"]["conditions"].append({
        "type": "Preempted", "status": "False", "reason": "QuotaReserved",
        "message": "Previously: Preempted to accommodate a workload (UID: u) due to "
                   "prioritization in the ClusterQueue"})

    status = queued(js, wl, [wl])

    assert status.queue is not None
    assert status.queue.preempted is None
    assert not any(line.startswith("Preempted:") for line in status.explanation)


def test_a_job_kueue_made_no_workload_for_names_the_priority_class_it_needs():
    js = jobset("no-class")

    status = queued(js, None, [])

    assert any("unless the WorkloadPriorityClass medium its kueue.x-k8s.io/priority-class "
               "label names does not exist" in line for line in status.explanation)


def test_a_missing_local_queue_is_explained_as_a_setup_problem():
    js = jobset("lost")

    status = explain(Observation(jobset=js, now=NOW, workload=None, teams=TEAMS))

    assert status.state == "queued"
    assert status.queue is not None
    assert status.queue.cluster_queue is None
    assert "LocalQueue research/research-queue does not exist" in status.explanation[1]


def test_an_admitted_job_without_ready_slices_is_provisioning_with_each_pool_and_operation():
    js = admitted(jobset("prov", slices=2))
    first, second = (pool_name("research", js["metadata"]["name"], i) for i in (0, 1))

    status = explain(Observation(
        jobset=js, now=NOW, workload=workload(js, admitted_in="shared"), teams=TEAMS,
        pods=pods(js, phase="Pending")[:4],
        pools={first: "RUNNING", second: "PROVISIONING"},
        operations=[{"action": "create", "pool": second, "operation": "operation-7",
                     "started": NOW - 60, "jobset": "research/x"}]))

    assert status.state == "provisioning"
    assert [(s.pool, s.pool_status) for s in status.slice_status] == [
        (first, "RUNNING"), (second, "PROVISIONING")]
    assert status.slice_status[1].operation == (
        "create operation-7 since 2026-11-23 10:59:00 UTC")
    assert status.explanation[0].startswith(
        "Provisioning: admitted by Kueue in ClusterQueue shared; waiting for its TPU slices "
        "(0 of 2 ready, 0 of 8 pods running)")


def test_a_stockout_in_the_slice_record_gives_its_kind_and_when_the_next_attempt_is_due():
    js = admitted(jobset("stock"))
    failure = SliceFailure(attempts=2, next_attempt=NOW + 240, reason=STOCKOUT,
                           capacity="spot", pool="p-s0", seen=NOW - 10)

    status = explain(Observation(jobset=js, now=NOW, workload=workload(js, admitted_in="q"),
                                 teams=TEAMS, pools={}, failure=failure))

    assert status.slice_failure is not None
    assert (status.slice_failure.kind, status.slice_failure.attempts) == ("stockout", 2)
    assert status.slice_failure.next_attempt == datetime(2026, 11, 23, 11, 4, tzinfo=UTC)
    assert ("That is a stockout failure: the zone has no free TPU capacity of this type "
            "right now") in " ".join(status.explanation)
    assert "next attempt is at 2026-11-23 11:04:00 UTC (in 4 min)" in " ".join(
        status.explanation)


def test_without_the_slice_record_the_failure_is_read_from_the_jobsets_annotation():
    js = admitted(jobset("annotated"))
    js["metadata"]["annotations"][ANNOTATION_SLICE_FAILURE] = json.dumps({
        "message": "Insufficient quota to satisfy the request", "pool": "p-s0",
        "capacity": "on-demand", "attempts": 1, "nextAttempt": "2026-11-23T11:00:30Z"})

    status = explain(Observation(jobset=js, now=NOW, teams=TEAMS))
    line = summarize(js, None, TEAMS)

    assert status.slice_failure is not None
    assert (status.slice_failure.kind, status.slice_failure.capacity) == ("quota", "on-demand")
    assert "in 30 s" in " ".join(status.explanation)
    assert line.summary.startswith("provisioning: quota creating p-s0, attempt 1")


@pytest.mark.parametrize(("message", "kind"), [
    (STOCKOUT, "stockout"),
    ("ZONE_RESOURCE_POOL_EXHAUSTED: try again later", "stockout"),
    ("Insufficient quota to satisfy the request: quota exceeded for TPUS", "quota"),
    ("Reservation 'r1' not found", "reservation"),
    ("Internal error", "other"),
])
def test_gke_failures_are_told_apart_by_their_message(message, kind):
    assert failure_kind(message) == kind


def test_a_running_job_counts_the_pods_and_restarts_of_its_current_attempt_only():
    js = admitted(jobset("run", slices=2), ready=2)
    js["status"]["restarts"] = 1
    current = pods(js, attempt=1, restarts=2)
    stale = pods(js, attempt=0, phase="Failed")

    status = explain(Observation(jobset=js, now=NOW, teams=TEAMS, pods=stale + current,
                                 pools={}))

    assert status.state == "running"
    assert [(s.pods_running, s.pods_total, s.restarts) for s in status.slice_status] == [
        (4, 4, 8), (4, 4, 8)]
    assert status.explanation[0] == "Running: 2 of 2 slice(s), 8 of 8 pods running."
    assert any("restarted 1 time(s)" in line for line in status.explanation)


def test_a_failed_job_names_the_first_pod_to_fail_and_its_termination_message():
    js = finished(jobset("boom"), failed=True)
    failed = pods(js, failed=(1, 2), message="CUDA? no: TPU HBM OOM at step 40")

    status = explain(Observation(jobset=js, now=NOW, teams=TEAMS, pods=failed))

    assert status.state == "failed"
    assert status.finished is not None
    assert status.finished.failed_pod == failed[6]["metadata"]["name"]
    assert (status.finished.reason, status.finished.exit_code,
            status.finished.termination_message) == (
        "ReachedMaxRestarts", 1, "CUDA? no: TPU HBM OOM at step 40")
    assert status.explanation[0] == (
        "Failed at 2026-11-23 11:00:00 UTC: ReachedMaxRestarts (jobset failed due to "
        "reaching max number of restarts).")
    assert leader_or_failed_pod(failed) == failed[6]


def test_the_log_to_read_is_the_leaders_of_the_latest_attempt_when_no_pod_failed():
    js = admitted(jobset("lead", slices=2))
    every = pods(js, attempt=0) + list(reversed(pods(js, attempt=1)))

    leader = leader_or_failed_pod(every)

    assert leader is not None
    assert leader["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "1"
    assert leader["metadata"]["name"].endswith("-slice-0-0-a1x")


def test_a_jobset_being_deleted_is_cancelling_whatever_else_it_says():
    js = admitted(jobset("bye"), ready=2)
    js["metadata"]["deletionTimestamp"] = stamp(90)

    assert job_state(js, workload(js, admitted_in="q")) == "cancelling"
    assert explain(Observation(jobset=js, now=NOW)).explanation[0].startswith("Cancelled")


def test_a_rejection_row_is_explained_by_the_field_and_rule_it_broke():
    status = explain_rejection({
        "request_id": "r-1", "team": "research", "reason": "unknown TPU type 'v9-8'",
        "field": "tpu.type", "rule": "tpu.type.known",
        "at": datetime(2026, 11, 23, 9, 0, tzinfo=UTC)})

    assert (status.state, status.jobset) == ("rejected", None)
    assert status.rejection is not None
    assert (status.rejection.field, status.rejection.rule) == ("tpu.type", "tpu.type.known")
    assert status.explanation == [
        "Rejected at 2026-11-23 09:00:00 UTC by submit_job: unknown TPU type 'v9-8'",
        "The field tpu.type broke the rule tpu.type.known.",
        # submit_job made no JobSet, and only a JobSet holds a request id.
        "Nothing was created for it, so its request id is still free: once what refused it "
        "is fixed, publish the request again, under the same request id or a new one."]


def test_a_request_refused_for_its_request_id_is_told_to_use_a_new_one():
    status = explain_rejection({
        "request_id": "rid-42", "team": "research",
        "reason": "request id 'rid-42' was already used for a different request "
                  "(JobSet research/train-6da1625a)",
        "field": "request_id", "rule": "must be unique per distinct request",
        "at": datetime(2026, 11, 23, 9, 0, tzinfo=UTC)})

    assert status.explanation[-1] == ("Nothing was created for it. Publish it again under a "
                                      "new request id.")


def test_list_lines_and_status_agree_and_survive_a_json_round_trip():
    js = finished(jobset("done"))
    status = explain(Observation(jobset=js, now=NOW, teams=TEAMS))
    line = summarize(js, workload(js, admitted_in="q"), TEAMS)

    assert status.summarized() == line
    assert JobStatus.model_validate_json(status.model_dump_json()) == status
    table = format_jobs([line]).splitlines()
    assert table[0].split()[:4] == ["REQUEST", "ID", "JOBSET", "TEAM"]
    assert table[1].split()[:4] == ["done", line.jobset, "research", "succeeded"]
    assert format_status(status).splitlines()[3] == "state       succeeded"


def test_restarts_after_a_disrupted_host_are_told_apart_from_those_that_spent_max_restarts():
    js = admitted(jobset("spot", slices=2), ready=2)
    js["spec"]["failurePolicy"] = {"maxRestarts": 1}
    js["status"].update(restarts=3, restartsCountTowardsMax=1)
    current = pods(js, attempt=3)

    status = explain(Observation(jobset=js, now=NOW, teams=TEAMS, pods=current, pools={}))

    assert ("The JobSet was restarted 3 time(s): 2 after a disrupted host (Spot preemption, "
            "maintenance or a lost node), not counted against failurePolicy.maxRestarts 1, "
            "and 1 after a failed pod, counted.") in status.explanation


def test_a_job_restarted_only_by_disruptions_says_its_max_restarts_are_untouched():
    js = finished(jobset("spot-done"), restarts=1)
    js["spec"]["failurePolicy"] = {"maxRestarts": 0}

    status = explain(Observation(jobset=js, now=NOW, teams=TEAMS, pods=pods(js, attempt=1,
                                                                           phase="Succeeded")))

    assert status.state == "succeeded"
    assert ("The JobSet was restarted 1 time(s) after a disrupted host (Spot preemption, "
            "maintenance or a lost node), which does not count against "
            "failurePolicy.maxRestarts 0.") in status.explanation
