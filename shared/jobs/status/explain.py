"""Why a job is where it is, in words a user acts on (pure: no I/O, no clock).

A job's state is read from its JobSet and its Kueue Workload alone, so ``jobs list``
needs two list calls however many jobs there are:

* ``cancelling`` — the JobSet is being deleted;
* ``succeeded`` / ``failed`` — its ``Completed`` / ``Failed`` condition;
* ``queued`` — Kueue has not admitted its Workload (the JobSet stays suspended),
  also after Kueue preempted it for a higher-priority job;
* ``running`` — every slice's Job has all its pods ready (JobSet's
  ``replicatedJobsStatus``); ``provisioning`` — admitted, not yet all running (node
  pools being created, pods being scheduled);
* ``rejected`` — no JobSet: submit_job refused the request (:func:`explain_rejection`).

``jobs status`` adds what explains that state (:class:`Observation`): for a queued job
the ClusterQueue, chips requested versus available and the workloads ahead
(:mod:`shared.jobs.status.queue`); while provisioning each slice's node pool and GKE
operation and a failed create (stockout, quota) with the next attempt; while running
the pods per slice and restarts; once finished the JobSet condition's reason and the
failed pod's termination message (:mod:`shared.jobs.status.parts`). What the JobSet
itself says (team, shape, slices, restarts) is read by :mod:`shared.jobs.status.facts`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from shared.jobs.status.facts import (
    Facts,
    Obj,
    clock,
    jobset_ref,
    meta,
    parse_time,
    read_facts,
    ready_slices,
    restarts_line,
    short,
    true_condition,
    when,
)
from shared.jobs.status.model import JobState, JobStatus, JobSummary, RejectionInfo
from shared.jobs.status.parts import (
    current_pods,
    ending,
    ending_lines,
    failure_lines,
    leader_or_failed_pod,
    slice_failure,
    slice_infos,
    slice_line,
)
from shared.jobs.status.queue import (
    is_admitted,
    pending_message,
    preempted_message,
    queue_view,
    workload_chips,
)
from shared.jobspec.labels import LABEL_PRIORITY
from shared.slices.model import SliceFailure

__all__ = ["Observation", "explain", "explain_rejection", "job_state", "jobset_ref",
           "leader_or_failed_pod", "summarize"]


def job_state(jobset: Obj, workload: Obj | None) -> JobState:
    """The state of a job from its JobSet and Workload (see the module docstring)."""
    if meta(jobset).get("deletionTimestamp"):
        return "cancelling"
    ended = true_condition(jobset, "Completed", "Failed")
    if ended is not None:
        return "succeeded" if ended["type"] == "Completed" else "failed"
    suspended = bool((jobset.get("spec") or {}).get("suspend"))
    if suspended or (workload is not None and not is_admitted(workload)):
        return "queued"
    slices = read_facts(jobset, {}).slices or 0
    return "running" if slices and ready_slices(jobset) >= slices else "provisioning"


# -------------------------------------------------------------------- slice failure
# --------------------------------------------------------------------------- summary
def _summary_line(state: JobState, jobset: Obj, workload: Obj | None,
                  facts: Facts) -> str:
    if state == "cancelling":
        return "being deleted: its pods stop and its slices are reaped"
    if state in ("succeeded", "failed"):
        ended = true_condition(jobset, "Completed", "Failed") or {}
        detail = ended.get("message") or ended.get("reason") or ""
        return short(f"{state}" + (f": {detail}" if detail else ""))
    if state == "queued":
        message = pending_message(workload) if workload else None
        again = " again after being preempted" if workload and preempted_message(workload) \
            else ""
        return short(f"queued{again}: " + (message or "waiting for Kueue to admit it"))
    failure = slice_failure(jobset, None)
    if state == "provisioning" and failure is not None:
        return short(f"provisioning: {failure.kind} creating {failure.pool}, attempt "
                      f"{failure.attempts}, next at {clock(failure.next_attempt)}")
    ready = ready_slices(jobset)
    text = f"{state}: {ready} of {facts.slices} slice(s) ready"
    return text + (f", {facts.restarts} restart(s)" if facts.restarts else "")


def summarize(jobset: Obj, workload: Obj | None, teams: Mapping[str, str]) -> JobSummary:
    """One line of ``jobs list`` (``teams``: namespace → team)."""
    facts = read_facts(jobset, teams)
    state = job_state(jobset, workload)
    return JobSummary(request_id=facts.request_id, jobset=jobset_ref(jobset), team=facts.team,
                      state=state, tpu_type=facts.tpu_type, slices=facts.slices,
                      created_at=facts.created_at,
                      summary=_summary_line(state, jobset, workload, facts))


# --------------------------------------------------------------------------- explain
@dataclass(frozen=True)
class Observation:
    """Everything ``jobs status`` read about one job (raw API objects)."""

    jobset: Obj
    now: float  # the cluster's clock, epoch seconds
    workload: Obj | None = None
    pods: Sequence[Obj] = ()
    teams: Mapping[str, str] = field(default_factory=dict)  # namespace -> team
    # Read only while queued:
    local_queue: Obj | None = None
    cluster_queue: Obj | None = None
    local_queues: Sequence[Obj] = ()
    workloads: Sequence[Obj] = ()
    # Read only while provisioning or running (None: not read or not readable):
    pools: Mapping[str, str] | None = None  # node pool -> GKE status
    operations: Sequence[Obj] = ()  # reconcile_slices' operations in flight
    failure: SliceFailure | None = None  # reconcile_slices' failed-create streak
    slices_enabled: bool = True
    notes: tuple[str, ...] = ()  # what could not be read, said in the explanation


def explain(seen: Observation) -> JobStatus:
    """The status of the job ``seen.jobset`` stands for, explained."""
    jobset, workload = seen.jobset, seen.workload
    facts = read_facts(jobset, seen.teams)
    state = job_state(jobset, workload)
    summary = summarize(jobset, workload, seen.teams)
    lines: list[str] = []
    parts: dict[str, Any] = {}
    pools_read = seen.pools is not None
    if state == "cancelling":
        lines.append("Cancelled: the JobSet is being deleted. Kubernetes stops its pods; "
                     "reconcile_slices deletes its node pools.")
    elif state in ("succeeded", "failed"):
        info = ending(jobset, current_pods(seen.pods, facts.restarts))
        parts["finished"] = info
        lines += ending_lines(info, facts, facts.request_id)
    elif state == "queued":
        chips = workload_chips(workload) if workload else 0
        if not chips and facts.shape and facts.slices:
            chips = facts.shape.chips * facts.slices
        view = queue_view(workload, namespace=facts.namespace, queue=facts.queue or "",
                          chips=chips, accelerator=facts.shape.accelerator if facts.shape
                          else None, local_queue=seen.local_queue,
                          cluster_queue=seen.cluster_queue, local_queues=seen.local_queues,
                          workloads=seen.workloads, teams=seen.teams,
                          priority_class=(meta(jobset).get("labels") or {}).get(LABEL_PRIORITY))
        parts["queue"] = view.info
        lines.append("Queued: Kueue has not admitted it, so its JobSet stays suspended; no "
                     "pod runs and no TPU slice is made for it yet.")
        lines += view.lines
    else:
        slices = slice_infos(facts, seen.pods, pools=seen.pools, operations=seen.operations,
                             slices_enabled=seen.slices_enabled)
        parts["slice_status"] = slices
        running = sum(s.pods_running for s in slices)
        total = sum(s.pods_total for s in slices)
        admitted_in = ((workload or {}).get("status") or {}).get("admission", {}).get(
            "clusterQueue")
        if state == "running":
            lines.append(f"Running: {len(slices)} of {len(slices)} slice(s), {running} of "
                         f"{total} pods running.")
        else:
            lines.append("Provisioning: admitted by Kueue"
                         + (f" in ClusterQueue {admitted_in}" if admitted_in else "")
                         + f"; waiting for its TPU slices ({ready_slices(jobset)} of "
                         f"{facts.slices} ready, {running} of {total} pods running).")
        lines += [slice_line(s, pools_read) for s in slices]
        failure = slice_failure(jobset, seen.failure) if state == "provisioning" else None
        if failure is not None:
            parts["slice_failure"] = failure
            lines += failure_lines(failure, seen.now)
        restarted = restarts_line(facts)
        if restarted:
            lines.append(restarted)
        if state == "running":
            lines.append(f"Its log: accelops jobs logs {facts.request_id}")
    lines += list(seen.notes)
    return JobStatus(**summary.model_dump(), explanation=lines, **parts)


# ------------------------------------------------------------------------- rejected
def explain_rejection(row: Mapping[str, Any]) -> JobStatus:
    """The status of a request submit_job refused, from its ``job_events`` row."""
    at = row.get("at")
    moment = at if isinstance(at, datetime) else when(parse_time(str(at)) if at else None)
    if moment is not None and moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    reason = str(row.get("reason") or "no reason recorded")
    field_name, rule = row.get("field"), row.get("rule")
    lines = [f"Rejected at {clock(moment)} by submit_job: {reason}"]
    if field_name:
        lines.append(f"The field {field_name} broke the rule "
                     f"{rule or '(not named)'}.")
    if field_name == "request_id":
        # The id is another job's, or is not a valid id: it cannot be used again.
        lines.append("Nothing was created for it. Publish it again under a new request id.")
    else:
        # Only a JobSet holds a request id, and none was made: the id is still free.
        lines.append("Nothing was created for it, so its request id is still free: once "
                     "what refused it is fixed, publish the request again, under the same "
                     "request id or a new one.")
    tpu_type = row.get("tpu_type")
    return JobStatus(
        request_id=str(row.get("request_id", "")), jobset=None, team=row.get("team"),
        state="rejected", tpu_type=str(tpu_type) if tpu_type else None,
        slices=int(row["slices"]) if row.get("slices") is not None else None,
        created_at=moment, summary=short(f"rejected: {reason}"), explanation=lines,
        rejection=RejectionInfo(reason=reason, field=str(field_name) if field_name else None,
                                rule=str(rule) if rule else None, at=moment))
