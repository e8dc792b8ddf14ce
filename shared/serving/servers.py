"""A serving Saxml version's model servers: what they went through, decided purely.

``reconcile_models`` follows the model servers of every model's current Saxml
version, not only rollouts in progress: each tick it reads the version's JobSet
and its pods and :func:`follow` compares them with what the ledger remembers
(:class:`Servers`, one per version). Out come

- **crashes** — a container restart (``restartCount`` went up; the kubelet's
  ``lastState.terminated`` says when, with which exit code and reason) or a pod that
  failed (``phase: Failed``: a disruption such as a spot preemption or maintenance,
  with the ``DisruptionTarget`` condition's reason, or an eviction). Counted once: the
  record keeps, per pod uid, the crashes already counted, so a tick that sees the same
  pods again counts nothing, and several restarts between two ticks are one entry
  that stands for all of them (only the last one's details are still there);
- a **loss** — the JobSet the servers ran in failed or completed (servers that
  end never come back by themselves: ``reconcile_slices`` then deletes their
  slice), is being deleted, is gone, or was replaced by another. Keyed by the lost
  JobSet's uid, so it is recorded once however often it is seen;
- what to **do** about a loss: delete the finished JobSet and create the model
  servers again, for the same version and snapshot. The version stays published
  in the Sax cell (the admin unassigns servers that die and assigns new ones that
  join), so once the new servers have loaded it, it serves again without a
  rollout.

Pods created before their JobSet belong to an earlier JobSet of the same name (a
recreated one) and are left out; so are pods being deleted.

History is bounded, the ledger being one ConfigMap (1 MiB): the last
:data:`MAX_CRASHES` crashes and :data:`MAX_LOSSES` losses with their details (at
most :data:`MAX_MESSAGE` characters of a message), totals for everything, and the
counted restarts of the pods that exist now.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shared.jobspec.labels import JOBSET_NAME_LABEL
from shared.serving.logtail import essence

__all__ = [
    "MAX_CRASHES",
    "MAX_LOSSES",
    "MAX_MESSAGE",
    "Crash",
    "Follow",
    "JobSetState",
    "Loss",
    "PodState",
    "Servers",
    "describe_crash",
    "follow",
    "read_jobset",
    "read_pods",
]

MAX_CRASHES = 10
MAX_LOSSES = 5
MAX_MESSAGE = 300


class Crash(BaseModel):
    """One crash of a model server (or several seen at once: ``count``)."""

    model_config = ConfigDict(extra="ignore")

    at: float | None = None  # when it ended, by the cluster's clock
    pod: str
    container: str | None = None
    exit_code: int | None = None
    reason: str | None = None  # Error, OOMKilled...; a failed pod's disruption or reason
    message: str | None = None
    count: int = 1  # crashes this entry stands for (only the last one's details remain)


class Loss(BaseModel):
    """The model servers' JobSet ended or went away."""

    model_config = ConfigDict(extra="ignore")

    at: float  # when it was noticed, by the cluster's clock
    jobset: str
    reason: str
    recreated: float | None = None  # when the JobSet made again was first seen


class Servers(BaseModel):
    """What ``reconcile_models`` knows about one version's model servers."""

    model_config = ConfigDict(extra="ignore")

    jobset: str | None = None  # the JobSet's name
    uid: str | None = None  # the JobSet followed; another uid is another set of servers
    expected: int = 0
    running: int = 0
    ready: int = 0
    suspended: bool = False  # Kueue took the quota back: the servers wait to be readmitted
    since: float | None = None  # when the counts above last changed
    restarts: int = 0  # the JobSet's own restarts (each recreates every server)
    crashes: int = 0
    recent_crashes: list[Crash] = Field(default_factory=list)  # newest last
    counted: dict[str, int] = Field(default_factory=dict)  # pod uid -> crashes counted
    losses: int = 0
    recent_losses: list[Loss] = Field(default_factory=list)  # newest last
    lost_key: str | None = None  # the uid (or "-": none seen) whose loss was recorded

    @property
    def lost(self) -> bool:
        """The servers followed last are lost and none made since were seen yet."""
        return self.lost_key is not None and self.lost_key == (self.uid or "-")

    @property
    def last_crash(self) -> Crash | None:
        return self.recent_crashes[-1] if self.recent_crashes else None

    @property
    def last_loss(self) -> Loss | None:
        return self.recent_losses[-1] if self.recent_losses else None


def describe_crash(crash: Crash) -> str:
    """``pod P container C exited with code 1 (Error): message``, in one line."""
    where = f"pod {crash.pod}" + (f" container {crash.container}" if crash.container else "")
    how = (f"exited with code {crash.exit_code}" if crash.exit_code is not None
           else "failed")
    why = f" ({crash.reason})" if crash.reason else ""
    said = f": {crash.message}" if crash.message else ""
    times = f"{crash.count} crashes, the last: " if crash.count > 1 else ""
    return f"{times}{where} {how}{why}{said}"


# ---------------------------------------------------------------------------- reading
@dataclass(frozen=True, slots=True)
class Termination:
    at: float | None
    container: str | None
    exit_code: int | None
    reason: str | None
    message: str | None


@dataclass(frozen=True, slots=True)
class PodState:
    uid: str
    name: str
    phase: str
    ready: bool
    restarts: int  # container restarts, summed over the pod's containers
    last: Termination | None  # the latest termination: a restart's, or the pod's failure

    @property
    def crashes(self) -> int:
        """Restarts, plus one when the pod itself failed."""
        return self.restarts + (1 if self.phase == "Failed" else 0)


@dataclass(frozen=True, slots=True)
class JobSetState:
    name: str
    uid: str
    resource_version: str | None
    created: float | None
    ended: str | None  # why it finished (Failed or Completed), None while it runs
    deleting: bool
    suspended: bool
    restarts: int
    expected: int


def _time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _short(text: Any) -> str | None:
    if not isinstance(text, str) or not text.strip():
        return None
    return essence(text, MAX_MESSAGE) or None


def _true(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition  # type: ignore[no-any-return]
    return None


def read_jobset(obj: Mapping[str, Any]) -> JobSetState:
    """The parts of a JobSet (``jobset.x-k8s.io/v1alpha2``) that say whether its servers
    can still run."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ended = None
    for kind in ("Failed", "Completed"):
        condition = _true(obj, kind)
        if condition is not None:
            detail = ": ".join(str(part) for part in (condition.get("reason"),
                                                       condition.get("message")) if part)
            ended = f"JobSet {kind.lower()}" + (f" ({detail})" if detail else "")
            break
    expected = 0
    for rjob in spec.get("replicatedJobs") or []:
        job = (rjob.get("template") or {}).get("spec") or {}
        expected += int(rjob.get("replicas") or 1) * int(job.get("parallelism") or 1)
    return JobSetState(
        name=str(meta.get("name", "")), uid=str(meta.get("uid", "")),
        resource_version=meta.get("resourceVersion"),
        created=_time(meta.get("creationTimestamp")), ended=ended,
        deleting=bool(meta.get("deletionTimestamp")), suspended=bool(spec.get("suspend")),
        restarts=int(status.get("restarts") or 0), expected=expected)


def _termination(status: Mapping[str, Any], pod: Mapping[str, Any]) -> Termination | None:
    """The latest termination of a pod: its failure if it failed, else the last restart
    of the container that restarted last."""
    statuses = list(status.get("containerStatuses") or [])
    if status.get("phase") == "Failed":
        # A disruption (preemption, maintenance, eviction) says why better than the
        # container's exit, which is only how it was stopped.
        disruption: Mapping[str, Any] = _true(pod, "DisruptionTarget") or {}
        ended = [s for s in statuses if (s.get("state") or {}).get("terminated")]
        container = ended[0].get("name") if ended else None
        terminated: Mapping[str, Any] = ended[0]["state"]["terminated"] if ended else {}
        reason = disruption.get("reason") or status.get("reason") or terminated.get("reason")
        message = disruption.get("message") or status.get("message") \
            or terminated.get("message")
        at = _time(terminated.get("finishedAt")) or _time(disruption.get("lastTransitionTime"))
        code = terminated.get("exitCode")
        return Termination(at, container, code if isinstance(code, int) else None,
                           str(reason) if reason else None, _short(message))
    latest: tuple[float, Termination] | None = None
    for entry in statuses:
        last = (entry.get("lastState") or {}).get("terminated")
        if not last:
            continue
        at = _time(last.get("finishedAt"))
        code = last.get("exitCode")
        found = Termination(at, entry.get("name"), code if isinstance(code, int) else None,
                            last.get("reason"), _short(last.get("message")))
        if latest is None or (at or 0.0) >= latest[0]:
            latest = (at or 0.0, found)
    return latest[1] if latest else None


def read_pods(objects: Iterable[Mapping[str, Any]], jobset: JobSetState) -> list[PodState]:
    """The model-server pods of ``jobset`` among ``objects`` (pods labelled with its
    name): not being deleted, and created no earlier than the JobSet itself."""
    pods = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        if (meta.get("labels") or {}).get(JOBSET_NAME_LABEL) != jobset.name \
                or meta.get("deletionTimestamp"):
            continue
        created = _time(meta.get("creationTimestamp"))
        if created is not None and jobset.created is not None and created < jobset.created:
            continue
        status = obj.get("status") or {}
        restarts = sum(int(s.get("restartCount") or 0)
                       for key in ("initContainerStatuses", "containerStatuses")
                       for s in status.get(key) or [])
        pods.append(PodState(
            uid=str(meta.get("uid") or meta.get("name", "")), name=str(meta.get("name", "")),
            phase=str(status.get("phase") or "Pending"), ready=_true(obj, "Ready") is not None,
            restarts=restarts, last=_termination(status, obj)))
    return pods


# ---------------------------------------------------------------------------- deciding
@dataclass
class Follow:
    """What one look at the servers found, and what to do."""

    servers: Servers  # the record to keep
    crashes: list[Crash] = field(default_factory=list)  # seen for the first time
    loss: Loss | None = None  # seen for the first time
    delete: JobSetState | None = None  # a finished JobSet to delete before creating anew
    create: bool = False  # create the model servers (again)
    lost: bool = False  # the servers' JobSet has ended or is going: they are not coming back


def _loss(record: Servers, key: str, jobset: str, reason: str, now: float) -> Loss | None:
    if record.lost_key == key:
        return None
    return Loss(at=now, jobset=jobset, reason=reason)


def _crashes(record: Servers, pods: list[PodState]) -> tuple[list[Crash], dict[str, int]]:
    seen: list[Crash] = []
    counted: dict[str, int] = {}
    for pod in pods:
        before = record.counted.get(pod.uid, 0)
        counted[pod.uid] = max(before, pod.crashes)
        if pod.crashes <= before:
            continue
        last = pod.last or Termination(None, None, None, None, None)
        seen.append(Crash(at=last.at, pod=pod.name, container=last.container,
                          exit_code=last.exit_code, reason=last.reason, message=last.message,
                          count=pod.crashes - before))
    seen.sort(key=lambda crash: crash.at or 0.0)
    return seen, counted


def follow(previous: Servers | None, name: str, jobset: JobSetState | None,
           pods: list[PodState], now: float) -> Follow:
    """Compare what the cluster shows for the servers named ``name`` with the record.

    ``jobset`` is None when no model-server JobSet of the version exists; ``pods`` are
    :func:`read_pods` of it; ``now`` is the cluster's time.
    """
    record = previous.model_copy(deep=True) if previous is not None else Servers()
    loss: Loss | None = None
    delete: JobSetState | None = None
    create = False
    if jobset is None:
        # The uid stays: seen again, the same absence is the same loss.
        key = record.uid or "-"
        loss = _loss(record, key, record.jobset or name,
                     f"JobSet {record.jobset or name} is gone (deleted)", now)
        create = True
        record.lost_key = key
        pods = []
    elif jobset.ended is not None or jobset.deleting:
        reason = jobset.ended or f"JobSet {jobset.name} is being deleted"
        loss = _loss(record, jobset.uid, jobset.name, reason, now)
        record.lost_key = jobset.uid
        record.uid = jobset.uid
        if not jobset.deleting:
            delete, create = jobset, True
    elif record.uid != jobset.uid:
        if record.lost:
            # The servers made again after the loss recorded last.
            if record.recent_losses and record.recent_losses[-1].recreated is None:
                record.recent_losses[-1].recreated = now
        elif record.uid is not None:
            loss = _loss(record, record.uid, record.jobset or jobset.name,
                         f"JobSet {record.jobset or jobset.name} was replaced by another "
                         f"(uid {jobset.uid})", now)
            record.lost_key = record.uid
        record.uid = jobset.uid
    crashes, record.counted = _crashes(record, pods)
    record.jobset = jobset.name if jobset is not None else record.jobset or name
    counts = (sum(1 for p in pods if p.phase == "Running"), sum(1 for p in pods if p.ready),
              jobset.expected if jobset is not None else record.expected,
              bool(jobset and jobset.suspended))
    if counts != (record.running, record.ready, record.expected, record.suspended):
        record.running, record.ready, record.expected, record.suspended = counts
        record.since = now
    if jobset is not None and jobset.ended is None and not jobset.deleting:
        record.restarts = jobset.restarts
    if crashes:
        record.crashes += sum(crash.count for crash in crashes)
        record.recent_crashes = (record.recent_crashes + crashes)[-MAX_CRASHES:]
    if loss is not None:
        record.losses += 1
        record.recent_losses = [*record.recent_losses, loss][-MAX_LOSSES:]
    lost = jobset is None or jobset.ended is not None or jobset.deleting
    return Follow(record, crashes, loss, delete, create, lost)
