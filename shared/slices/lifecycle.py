"""What a reconcile_slices run sees of each job's life, read from the cluster (pure).

The lifecycle transitions reconcile_slices reports (:mod:`shared.slices.events`) are
dated by what the cluster recorded, read here from the objects one run lists anyway,
plus Kueue's Workloads (one more list call):

* admitted: the Workload's ``Admitted`` condition, the Workload found by its owner
  reference to the JobSet or Kueue's ``kueue.x-k8s.io/job-uid`` label;
* running: every pod of the JobSet running, i.e. the latest of its pods' container
  starts (each container counted from its first start, so a restart does not move it);
* finished: the JobSet's ``Completed`` / ``Failed`` condition, its time and message;
* being deleted: the JobSet's ``deletionTimestamp``.

Only JobSets accelops submitted (its request-id annotation) have a lifecycle here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.config import TeamPolicy
from shared.jobspec.labels import JOBSET_NAME_LABEL, KUEUE_JOB_UID_LABEL
from shared.metrics.job_event import Outcome
from shared.safetext import clean
from shared.slices.observe import parse_time
from shared.telemetry.events import JobFacts, job_facts

__all__ = ["JobState", "job_states", "pod_started_at", "running_at"]

# The bound of a record's reason (shared.metrics.job_event).
_REASON_CHARS = 1024


@dataclass(frozen=True, slots=True)
class JobState:
    """What one run sees of one accelops JobSet (times in epoch seconds)."""

    facts: JobFacts
    admitted_at: float | None = None  # the Workload's Admitted condition
    unsuspended: bool = False  # admitted although no Workload says when
    running_at: float | None = None  # every pod's containers started, the last of them
    finished_at: float | None = None  # the Completed / Failed condition's time
    outcome: Outcome | None = None  # succeeded | failed, once finished
    reason: str | None = None
    deleting_at: float | None = None  # deletionTimestamp


def pod_started_at(pod: Mapping[str, Any]) -> float | None:
    """When every container of the pod had started (the first start of each, then the
    latest of those); None while one has not."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    if not statuses:
        return None
    latest = 0.0
    for status in statuses:
        starts = [parse_time(((status.get(where) or {}).get(state) or {}).get("startedAt"))
                  for where in ("state", "lastState") for state in ("running", "terminated")]
        known = [s for s in starts if s is not None]
        if not known:
            return None
        latest = max(latest, min(known))
    return latest


def running_at(pods: Iterable[Mapping[str, Any]], expected: int) -> float | None:
    """When ``expected`` pods of a JobSet (all of them) were running: the latest
    container start among the first that many to start (pods of a restarted JobSet
    may be listed with their predecessors); None until that many have started."""
    starts = sorted(s for s in (pod_started_at(p) for p in pods) if s is not None)
    if expected <= 0 or len(starts) < expected:
        return None
    return starts[expected - 1]


def _admitted(workload: Mapping[str, Any]) -> float | None:
    for condition in (workload.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Admitted" and condition.get("status") == "True":
            return parse_time(condition.get("lastTransitionTime"))
    return None


def _workload_owners(workloads: Iterable[Mapping[str, Any]]) -> dict[str, float | None]:
    """JobSet uid -> when its Workload was admitted (None: not admitted)."""
    owners: dict[str, float | None] = {}
    for workload in workloads:
        meta = workload.get("metadata") or {}
        uids = {ref.get("uid") for ref in meta.get("ownerReferences") or []
                if ref.get("kind") == "JobSet"}
        uids.add((meta.get("labels") or {}).get(KUEUE_JOB_UID_LABEL))
        admitted = _admitted(workload)
        for uid in uids - {None, ""}:
            owners[str(uid)] = admitted if owners.get(str(uid)) is None else owners[str(uid)]
    return owners


def _finish(jobset: Mapping[str, Any]) -> tuple[float | None, Outcome | None, str | None]:
    for condition in (jobset.get("status") or {}).get("conditions") or []:
        kind = condition.get("type")
        if kind in ("Completed", "Failed") and condition.get("status") == "True":
            message = condition.get("message")
            return (parse_time(condition.get("lastTransitionTime")),
                    "succeeded" if kind == "Completed" else "failed",
                    clean(message, _REASON_CHARS).text if isinstance(message, str) and message
                    else None)
    return None, None, None


def _expected_pods(jobset: Mapping[str, Any]) -> int:
    total = 0
    for replicated in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        job = (replicated.get("template") or {}).get("spec") or {}
        parallelism = job.get("parallelism")
        total += int(replicated.get("replicas", 1)) * int(1 if parallelism is None
                                                          else parallelism)
    return total


def job_states(jobsets: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]],
               workloads: Iterable[Mapping[str, Any]],
               teams: Mapping[str, TeamPolicy]) -> dict[str, JobState]:
    """The state of every JobSet accelops submitted (those with its request-id
    annotation), keyed ``namespace/name``. A JobSet's Workload is found by its owner
    reference to the JobSet or Kueue's job-uid label."""
    by_jobset: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        owner = (meta.get("labels") or {}).get(JOBSET_NAME_LABEL)
        if owner:
            by_jobset.setdefault(f"{meta.get('namespace')}/{owner}", []).append(pod)
    admitted = _workload_owners(workloads)
    states: dict[str, JobState] = {}
    for jobset in jobsets:
        facts = job_facts(jobset, teams)
        if facts is None:
            continue
        meta = jobset.get("metadata") or {}
        done_at, outcome, reason = _finish(jobset)
        states[facts.jobset] = JobState(
            facts=facts, admitted_at=admitted.get(str(meta.get("uid"))),
            unsuspended=not (jobset.get("spec") or {}).get("suspend", False),
            running_at=running_at(by_jobset.get(facts.jobset, []), _expected_pods(jobset)),
            finished_at=done_at, outcome=outcome, reason=reason,
            deleting_at=parse_time(meta.get("deletionTimestamp")))
    return states
