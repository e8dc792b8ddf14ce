"""Why a job is where it is, in words a user acts on (pure: no I/O, no clock).

A job's state is read from its JobSet and its Kueue Workload alone, so ``jobs list``
needs two list calls however many jobs there are:

* ``cancelling`` — the JobSet is being deleted;
* ``succeeded`` / ``failed`` — its ``Completed`` / ``Failed`` condition;
* ``queued`` — Kueue has not admitted its Workload (the JobSet stays suspended);
* ``running`` — every slice's Job has all its pods ready (JobSet's
  ``replicatedJobsStatus``); ``provisioning`` — admitted, not yet all running (node
  pools being created, pods being scheduled);
* ``rejected`` — no JobSet: submit_job refused the request (:func:`explain_rejection`).

``jobs status`` adds what explains that state (:class:`Observation`): for a queued job
the ClusterQueue, chips requested versus available and the workloads ahead
(:mod:`shared.jobs.status_queue`); while provisioning each slice's node pool and GKE
operation and a failed create (stockout, quota) with the next attempt; while running
the pods per slice and restarts; once finished the JobSet condition's reason and the
failed pod's termination message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from shared.errors import PermanentError
from shared.jobs.render import (
    ANNOTATION_REQUEST_ID,
    ANNOTATION_TPU_TYPE,
    LABEL_QUEUE,
    LABEL_TEAM,
    REPLICATED_JOB,
)
from shared.jobs.status_model import (
    FailureKind,
    FinishedInfo,
    JobState,
    JobStatus,
    JobSummary,
    RejectionInfo,
    SliceFailureInfo,
    SliceInfo,
)
from shared.jobs.status_queue import is_admitted, pending_message, queue_view, workload_chips
from shared.names import pool_name
from shared.slices.labels import ANNOTATION_SLICE_FAILURE
from shared.slices.model import SliceFailure
from shared.slices.observe import finished_at, parse_time
from shared.tpu import TpuShape, lookup

__all__ = ["LABEL_COMPLETION_INDEX", "LABEL_JOB_INDEX", "LABEL_RESTART_ATTEMPT", "Observation",
           "explain", "explain_rejection", "failure_kind", "job_state", "jobset_ref",
           "leader_or_failed_pod", "summarize"]

# Labels JobSet and the Job controller put on every pod: which slice (Job) of the
# JobSet, which worker of the slice, which restart of the JobSet.
LABEL_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
LABEL_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
LABEL_RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"

Obj = Mapping[str, Any]


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def jobset_ref(jobset: Obj) -> str:
    return f"{_meta(jobset).get('namespace', '')}/{_meta(jobset).get('name', '')}"


def _when(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def _clock(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "an unknown time"


def _in(seconds: float) -> str:
    if seconds <= 0:
        return "due now"
    if seconds < 90:
        return f"in {seconds:.0f} s"
    return f"in {seconds / 60:.0f} min"


# ---------------------------------------------------------------------------- facts
@dataclass(frozen=True, slots=True)
class _Facts:
    """What the JobSet itself says about the job."""

    namespace: str
    name: str
    request_id: str
    team: str | None
    tpu_type: str | None
    shape: TpuShape | None
    slices: int | None
    vms: int
    created_at: datetime | None
    queue: str | None
    restarts: int
    max_restarts: int


def _facts(jobset: Obj, teams: Mapping[str, str]) -> _Facts:
    meta = _meta(jobset)
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    spec = jobset.get("spec") or {}
    replicated = spec.get("replicatedJobs") or []
    job = next((r for r in replicated if r.get("name") == REPLICATED_JOB),
               replicated[0] if replicated else {})
    tpu_type = annotations.get(ANNOTATION_TPU_TYPE)
    shape = None
    if tpu_type:
        try:
            shape = lookup(str(tpu_type))
        except PermanentError:
            shape = None
    parallelism = int(((job.get("template") or {}).get("spec") or {}).get("parallelism") or 1)
    namespace = str(meta.get("namespace", ""))
    return _Facts(
        namespace=namespace, name=str(meta.get("name", "")),
        request_id=str(annotations.get(ANNOTATION_REQUEST_ID) or meta.get("name", "")),
        team=teams.get(namespace) or labels.get(LABEL_TEAM),
        tpu_type=str(tpu_type) if tpu_type else None, shape=shape,
        slices=int(job.get("replicas", 1)) if job else None,
        vms=shape.vms if shape else parallelism,
        created_at=_when(parse_time(meta.get("creationTimestamp"))),
        queue=labels.get(LABEL_QUEUE),
        restarts=int((jobset.get("status") or {}).get("restarts") or 0),
        max_restarts=int((spec.get("failurePolicy") or {}).get("maxRestarts") or 0),
    )


def _condition(obj: Obj, *kinds: str) -> Obj | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") in kinds and condition.get("status") == "True":
            return dict(condition)
    return None


def _ready_slices(jobset: Obj) -> int:
    return sum(int(r.get("ready") or 0) + int(r.get("succeeded") or 0)
               for r in (jobset.get("status") or {}).get("replicatedJobsStatus") or [])


def job_state(jobset: Obj, workload: Obj | None) -> JobState:
    """The state of a job from its JobSet and Workload (see the module docstring)."""
    if _meta(jobset).get("deletionTimestamp"):
        return "cancelling"
    ended = _condition(jobset, "Completed", "Failed")
    if ended is not None:
        return "succeeded" if ended["type"] == "Completed" else "failed"
    suspended = bool((jobset.get("spec") or {}).get("suspend"))
    if suspended or (workload is not None and not is_admitted(workload)):
        return "queued"
    slices = _facts(jobset, {}).slices or 0
    return "running" if slices and _ready_slices(jobset) >= slices else "provisioning"


# -------------------------------------------------------------------- slice failure
def failure_kind(message: str) -> FailureKind:
    """What kind of GKE failure a create's error message describes."""
    upper = message.upper()
    if "STOCKOUT" in upper or "RESOURCE_POOL_EXHAUSTED" in upper or \
            "DOES NOT HAVE ENOUGH RESOURCES" in upper:
        return "stockout"
    if "QUOTA" in upper:
        return "quota"
    if "RESERVATION" in upper:
        return "reservation"
    return "other"


def _failure(jobset: Obj, recorded: SliceFailure | None) -> SliceFailureInfo | None:
    """The job's failed-create streak: reconcile_slices' record, else the JobSet's
    annotation (a copy written for people, readable where the record is not)."""
    if recorded is not None:
        return SliceFailureInfo(kind=failure_kind(recorded.reason), message=recorded.reason,
                                pool=recorded.pool, capacity=recorded.capacity,
                                attempts=recorded.attempts,
                                next_attempt=_when(recorded.next_attempt))
    raw = (_meta(jobset).get("annotations") or {}).get(ANNOTATION_SLICE_FAILURE)
    if not raw:
        return None
    try:
        data = json.loads(raw)
        return SliceFailureInfo(kind=failure_kind(str(data.get("message", ""))),
                                message=str(data.get("message", "")),
                                pool=str(data.get("pool", "")),
                                capacity=str(data.get("capacity", "")),
                                attempts=int(data.get("attempts") or 1),
                                next_attempt=_when(parse_time(data.get("nextAttempt"))))
    except (ValueError, TypeError, AttributeError):
        return None


_ADVICE: dict[str, str] = {
    "stockout": "the zone has no free TPU capacity of this type right now; accelops "
                "retries on its own (a reservation or another capacity type avoids the wait)",
    "quota": "the project's TPU quota is used up: ask for a quota increase, or for fewer "
             "or smaller slices",
    "reservation": "GKE refused the reservation: check that it exists, has room and "
                   "matches the TPU type",
    "other": "accelops retries on its own; if it keeps failing, an operator reads "
             "reconcile_slices' log",
}


def _failure_lines(failure: SliceFailureInfo, now: float) -> list[str]:
    due = failure.next_attempt.timestamp() - now if failure.next_attempt else None
    when = (f"the next attempt is at {_clock(failure.next_attempt)} ({_in(due)})"
            if due is not None else "the next attempt time is unknown")
    return [f"GKE could not create node pool {failure.pool} ({failure.capacity}): "
            f"{failure.message}",
            f"That is a {failure.kind} failure: {_ADVICE[failure.kind]}. Attempt "
            f"{failure.attempts} failed; {when}."]


# --------------------------------------------------------------------------- summary
def _short(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _summary_line(state: JobState, jobset: Obj, workload: Obj | None,
                  facts: _Facts) -> str:
    if state == "cancelling":
        return "being deleted: its pods stop and its slices are reaped"
    if state in ("succeeded", "failed"):
        ended = _condition(jobset, "Completed", "Failed") or {}
        detail = ended.get("message") or ended.get("reason") or ""
        return _short(f"{state}" + (f": {detail}" if detail else ""))
    if state == "queued":
        message = pending_message(workload) if workload else None
        return _short("queued: " + (message or "waiting for Kueue to admit it"))
    failure = _failure(jobset, None)
    if state == "provisioning" and failure is not None:
        return _short(f"provisioning: {failure.kind} creating {failure.pool}, attempt "
                      f"{failure.attempts}, next at {_clock(failure.next_attempt)}")
    ready = _ready_slices(jobset)
    text = f"{state}: {ready} of {facts.slices} slice(s) ready"
    return text + (f", {facts.restarts} restart(s)" if facts.restarts else "")


def summarize(jobset: Obj, workload: Obj | None, teams: Mapping[str, str]) -> JobSummary:
    """One line of ``jobs list`` (``teams``: namespace → team)."""
    facts = _facts(jobset, teams)
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


def _labels(pod: Obj) -> Obj:
    return _meta(pod).get("labels") or {}


def _current_pods(pods: Sequence[Obj], restarts: int) -> list[Obj]:
    """The pods of the JobSet's current attempt (older attempts' pods may linger)."""
    return [p for p in pods if _labels(p).get(LABEL_RESTART_ATTEMPT, str(restarts))
            == str(restarts)]


def _index(pod: Obj, label: str) -> int:
    value = str(_labels(pod).get(label, ""))
    return int(value) if value.isdigit() else 0


def _restarts(pod: Obj) -> int:
    return sum(int(s.get("restartCount") or 0)
               for s in (pod.get("status") or {}).get("containerStatuses") or [])


def _terminated(pod: Obj) -> Obj:
    for entry in (pod.get("status") or {}).get("containerStatuses") or []:
        state = (entry.get("state") or {}).get("terminated") or \
            (entry.get("lastState") or {}).get("terminated")
        if state and int(state.get("exitCode") or 0) != 0:
            return dict(state)
    return {}


def _failed_pods(pods: Sequence[Obj]) -> list[Obj]:
    """Failed pods, the first to fail first (the cause; the others often follow it)."""
    failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
    return sorted(failed, key=lambda p: (str(_terminated(p).get("finishedAt") or "~"),
                                         _index(p, LABEL_JOB_INDEX),
                                         _index(p, LABEL_COMPLETION_INDEX)))


def leader_or_failed_pod(pods: Sequence[Obj]) -> Obj | None:
    """The pod whose log explains the job: the first failed one, else the leader
    (slice 0, worker 0) of the latest attempt."""
    failed = _failed_pods(pods)
    if failed:
        return failed[0]
    latest = max((_index(p, LABEL_RESTART_ATTEMPT) for p in pods), default=0)
    candidates = sorted((p for p in pods if _index(p, LABEL_RESTART_ATTEMPT) == latest),
                        key=lambda p: (_index(p, LABEL_JOB_INDEX),
                                       _index(p, LABEL_COMPLETION_INDEX)))
    return candidates[0] if candidates else None


def _slices(facts: _Facts, seen: Observation) -> list[SliceInfo]:
    pods = _current_pods(seen.pods, facts.restarts)
    operations = {str(op.get("pool")): op for op in seen.operations}
    out: list[SliceInfo] = []
    for index in range(facts.slices or 0):
        mine = [p for p in pods if _index(p, LABEL_JOB_INDEX) == index]
        pool = pool_name(facts.namespace, facts.name, index) if seen.slices_enabled else None
        status = (seen.pools or {}).get(pool) if pool else None
        # An operation reconcile_slices has not yet seen finish is done once the pool runs.
        operation = operations.get(pool or "") if status != "RUNNING" else None
        described = None
        if operation is not None:
            started = _when(float(operation.get("started") or 0) or None)
            described = (f"{operation.get('action', 'change')} "
                         f"{operation.get('operation') or '(being started)'} since "
                         f"{_clock(started)}")
        out.append(SliceInfo(
            index=index, pool=pool, pool_status=status, operation=described,
            pods_running=sum(1 for p in mine if (p.get("status") or {}).get("phase")
                             == "Running"),
            pods_total=facts.vms, restarts=sum(_restarts(p) for p in mine)))
    return out


def _slice_line(info: SliceInfo, pools_read: bool) -> str:
    pods = f"{info.pods_running}/{info.pods_total} pods running"
    if info.pool is None:
        return f"Slice {info.index}: {pods}."
    if info.pool_status is None:
        where = (f"node pool {info.pool} does not exist yet; reconcile_slices requests it"
                 if pools_read else f"node pool {info.pool}")
    else:
        where = f"node pool {info.pool} {info.pool_status}"
    operation = f" (GKE {info.operation})" if info.operation else ""
    restarts = f", {info.restarts} container restart(s)" if info.restarts else ""
    return f"Slice {info.index}: {where}{operation}; {pods}{restarts}."


def _finished(jobset: Obj, pods: Sequence[Obj]) -> FinishedInfo:
    ended = _condition(jobset, "Completed", "Failed") or {}
    outcome = "succeeded" if ended.get("type") == "Completed" else "failed"
    failed = _failed_pods(pods) if outcome == "failed" else []
    terminated = _terminated(failed[0]) if failed else {}
    return FinishedInfo(
        outcome=outcome, reason=ended.get("reason"), message=ended.get("message"),
        at=_when(finished_at(dict(jobset))),
        failed_pod=str(_meta(failed[0]).get("name")) if failed else None,
        exit_code=int(terminated["exitCode"]) if "exitCode" in terminated else None,
        termination_message=(str(terminated.get("message")).strip() or None)
        if terminated.get("message") else None)


def _finished_lines(info: FinishedInfo, facts: _Facts, request_id: str) -> list[str]:
    word = "Succeeded" if info.outcome == "succeeded" else "Failed"
    lines = [f"{word} at {_clock(info.at)}: {info.reason or 'no reason given'}"
             + (f" ({info.message})" if info.message else "") + "."]
    if facts.restarts:
        lines.append(f"The JobSet was restarted {facts.restarts} time(s) "
                     f"(failurePolicy.maxRestarts {facts.max_restarts}).")
    if info.failed_pod:
        code = f" with code {info.exit_code}" if info.exit_code is not None else ""
        said = (f": {info.termination_message}" if info.termination_message
                else " (no termination message)")
        lines.append(f"The first pod to fail was {info.failed_pod}, which exited{code}{said}.")
        lines.append(f"Its log: accelops jobs logs {request_id} --pod {info.failed_pod}")
    elif info.outcome == "failed":
        lines.append("No failed pod is left to read (pods of earlier attempts are deleted "
                     "when the JobSet restarts).")
    lines.append("Its node pools are deleted by reconcile_slices after the grace period.")
    return lines


def explain(seen: Observation) -> JobStatus:
    """The status of the job ``seen.jobset`` stands for, explained."""
    jobset, workload = seen.jobset, seen.workload
    facts = _facts(jobset, seen.teams)
    state = job_state(jobset, workload)
    summary = summarize(jobset, workload, seen.teams)
    lines: list[str] = []
    parts: dict[str, Any] = {}
    pools_read = seen.pools is not None
    if state == "cancelling":
        lines.append("Cancelled: the JobSet is being deleted. Kubernetes stops its pods; "
                     "reconcile_slices deletes its node pools.")
    elif state in ("succeeded", "failed"):
        info = _finished(jobset, _current_pods(seen.pods, facts.restarts))
        parts["finished"] = info
        lines += _finished_lines(info, facts, facts.request_id)
    elif state == "queued":
        chips = workload_chips(workload) if workload else 0
        if not chips and facts.shape and facts.slices:
            chips = facts.shape.chips * facts.slices
        view = queue_view(workload, namespace=facts.namespace, queue=facts.queue or "",
                          chips=chips, accelerator=facts.shape.accelerator if facts.shape
                          else None, local_queue=seen.local_queue,
                          cluster_queue=seen.cluster_queue, local_queues=seen.local_queues,
                          workloads=seen.workloads, teams=seen.teams)
        parts["queue"] = view.info
        lines.append("Queued: Kueue has not admitted it, so its JobSet stays suspended; no "
                     "pod runs and no TPU slice is made for it yet.")
        lines += view.lines
    else:
        slices = _slices(facts, seen)
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
                         + f"; waiting for its TPU slices ({_ready_slices(jobset)} of "
                         f"{facts.slices} ready, {running} of {total} pods running).")
        lines += [_slice_line(s, pools_read) for s in slices]
        failure = _failure(jobset, seen.failure) if state == "provisioning" else None
        if failure is not None:
            parts["slice_failure"] = failure
            lines += _failure_lines(failure, seen.now)
        if facts.restarts:
            lines.append(f"The JobSet was restarted {facts.restarts} time(s) after a failed "
                         f"pod (failurePolicy.maxRestarts {facts.max_restarts}).")
        if state == "running":
            lines.append(f"Its log: accelops jobs logs {facts.request_id}")
    lines += list(seen.notes)
    return JobStatus(**summary.model_dump(), explanation=lines, **parts)


# ------------------------------------------------------------------------- rejected
def explain_rejection(row: Mapping[str, Any]) -> JobStatus:
    """The status of a request submit_job refused, from its ``job_events`` row."""
    at = row.get("at")
    moment = at if isinstance(at, datetime) else _when(parse_time(str(at)) if at else None)
    if moment is not None and moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    reason = str(row.get("reason") or "no reason recorded")
    field_name, rule = row.get("field"), row.get("rule")
    lines = [f"Rejected at {_clock(moment)} by submit_job: {reason}"]
    if field_name:
        lines.append(f"The field {field_name} broke the rule "
                     f"{rule or '(not named)'}.")
    lines.append("Nothing was created for it. Fix the request and publish it again "
                 "(a fixed request needs a new request id).")
    tpu_type = row.get("tpu_type")
    return JobStatus(
        request_id=str(row.get("request_id", "")), jobset=None, team=row.get("team"),
        state="rejected", tpu_type=str(tpu_type) if tpu_type else None,
        slices=int(row["slices"]) if row.get("slices") is not None else None,
        created_at=moment, summary=_short(f"rejected: {reason}"), explanation=lines,
        rejection=RejectionInfo(reason=reason, field=str(field_name) if field_name else None,
                                rule=str(rule) if rule else None, at=moment))
