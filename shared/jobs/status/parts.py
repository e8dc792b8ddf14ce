"""The structured parts of a job's status: its slices, a failed slice create, its pods and
how it ended — each with the lines that explain it (pure)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from shared.jobs.status.facts import (
    Facts,
    Obj,
    clock,
    due_in,
    meta,
    restarts_line,
    true_condition,
    when,
)
from shared.jobs.status.model import FailureKind, FinishedInfo, SliceFailureInfo, SliceInfo
from shared.jobspec.labels import (
    ANNOTATION_SLICE_FAILURE,
    LABEL_COMPLETION_INDEX,
    LABEL_JOB_INDEX,
    LABEL_RESTART_ATTEMPT,
)
from shared.names import pool_name
from shared.slices.model import SliceFailure
from shared.slices.observe import finished_at, parse_time

__all__ = ["current_pods", "ending", "ending_lines", "failure_kind", "failure_lines",
           "leader_or_failed_pod", "slice_failure", "slice_infos", "slice_line"]


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


def slice_failure(jobset: Obj, recorded: SliceFailure | None) -> SliceFailureInfo | None:
    """The job's failed-create streak: reconcile_slices' record, else the JobSet's
    annotation (a copy written for people, readable where the record is not)."""
    if recorded is not None:
        return SliceFailureInfo(kind=failure_kind(recorded.reason), message=recorded.reason,
                                pool=recorded.pool, capacity=recorded.capacity,
                                attempts=recorded.attempts,
                                next_attempt=when(recorded.next_attempt))
    raw = (meta(jobset).get("annotations") or {}).get(ANNOTATION_SLICE_FAILURE)
    if not raw:
        return None
    try:
        data = json.loads(raw)
        return SliceFailureInfo(kind=failure_kind(str(data.get("message", ""))),
                                message=str(data.get("message", "")),
                                pool=str(data.get("pool", "")),
                                capacity=str(data.get("capacity", "")),
                                attempts=int(data.get("attempts") or 1),
                                next_attempt=when(parse_time(data.get("nextAttempt"))))
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


def failure_lines(failure: SliceFailureInfo, now: float) -> list[str]:
    """GKE's message, what kind of failure it is and what to do, and the next attempt."""
    due = failure.next_attempt.timestamp() - now if failure.next_attempt else None
    when = (f"the next attempt is at {clock(failure.next_attempt)} ({due_in(due)})"
            if due is not None else "the next attempt time is unknown")
    return [f"GKE could not create node pool {failure.pool} ({failure.capacity}): "
            f"{failure.message}",
            f"That is a {failure.kind} failure: {_ADVICE[failure.kind]}. Attempt "
            f"{failure.attempts} failed; {when}."]


def _labels(pod: Obj) -> Obj:
    return meta(pod).get("labels") or {}


def current_pods(pods: Sequence[Obj], restarts: int) -> list[Obj]:
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


def slice_infos(facts: Facts, pods: Sequence[Obj], *, pools: Mapping[str, str] | None,
                operations: Sequence[Obj], slices_enabled: bool) -> list[SliceInfo]:
    """Each slice: its node pool (``pools``: GKE's status by pool name, None when not
    read), the operation ``reconcile_slices`` has in flight on it, and its pods."""
    pods = current_pods(pods, facts.restarts)
    by_pool = {str(op.get("pool")): op for op in operations}
    out: list[SliceInfo] = []
    for index in range(facts.slices or 0):
        mine = [p for p in pods if _index(p, LABEL_JOB_INDEX) == index]
        pool = pool_name(facts.namespace, facts.name, index) if slices_enabled else None
        status = (pools or {}).get(pool) if pool else None
        # An operation reconcile_slices has not yet seen finish is done once the pool runs.
        operation = by_pool.get(pool or "") if status != "RUNNING" else None
        described = None
        if operation is not None:
            started = when(float(operation.get("started") or 0) or None)
            described = (f"{operation.get('action', 'change')} "
                         f"{operation.get('operation') or '(being started)'} since "
                         f"{clock(started)}")
        out.append(SliceInfo(
            index=index, pool=pool, pool_status=status, operation=described,
            pods_running=sum(1 for p in mine if (p.get("status") or {}).get("phase")
                             == "Running"),
            pods_total=facts.vms, restarts=sum(_restarts(p) for p in mine)))
    return out


def slice_line(info: SliceInfo, pools_read: bool) -> str:
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


def ending(jobset: Obj, pods: Sequence[Obj]) -> FinishedInfo:
    ended = true_condition(jobset, "Completed", "Failed") or {}
    outcome = "succeeded" if ended.get("type") == "Completed" else "failed"
    failed = _failed_pods(pods) if outcome == "failed" else []
    terminated = _terminated(failed[0]) if failed else {}
    return FinishedInfo(
        outcome=outcome, reason=ended.get("reason"), message=ended.get("message"),
        at=when(finished_at(dict(jobset))),
        failed_pod=str(meta(failed[0]).get("name")) if failed else None,
        exit_code=int(terminated["exitCode"]) if "exitCode" in terminated else None,
        termination_message=(str(terminated.get("message")).strip() or None)
        if terminated.get("message") else None)


def ending_lines(info: FinishedInfo, facts: Facts, request_id: str) -> list[str]:
    word = "Succeeded" if info.outcome == "succeeded" else "Failed"
    lines = [f"{word} at {clock(info.at)}: {info.reason or 'no reason given'}"
             + (f" ({info.message})" if info.message else "") + "."]
    restarted = restarts_line(facts)
    if restarted:
        lines.append(restarted)
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


