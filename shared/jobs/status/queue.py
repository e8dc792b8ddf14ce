"""What a queued job waits for in Kueue, read from Kueue's own objects (pure).

Kueue keeps a JobSet suspended until its Workload fits the unreserved quota of the
ClusterQueue its LocalQueue feeds. The words a user needs are all in Kueue's
objects: the Workload's ``QuotaReserved`` condition (Kueue's reason, e.g.
``insufficient unused quota for google.com/tpu in flavor X, 4 more needed``), the
ClusterQueue's nominal quota per flavor (``spec.resourceGroups``) and what admitted
workloads reserve of it (``status.flavorsReservation``, Kueue's own sum), and the
pending Workloads of the same ClusterQueue in the order Kueue considers them:
priority first, then creation time. Under ``BestEffortFIFO`` (accelops' default) a
workload that does not fit lets smaller ones behind it go first; under ``StrictFIFO``
nothing passes the head of the queue.

A job Kueue preempted (its Workload's ``Preempted`` condition is True until it is
admitted again) is queued like any other, and said to have been preempted, in
Kueue's words. A JobSet without a Workload waits for Kueue to make one, which Kueue
never does while the WorkloadPriorityClass its label names does not exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.jobs.status.model import QueueInfo
from shared.jobspec.render import TPU_RESOURCE

__all__ = ["QueueView", "is_admitted", "is_finished", "pending_message",
           "preempted_message", "queue_view", "workload_chips"]

# At most this many workloads are named in an explanation line; the rest are counted.
NAMED = 5

Obj = Mapping[str, Any]


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _ref(obj: Obj) -> str:
    return f"{_meta(obj).get('namespace', '')}/{_meta(obj).get('name', '')}"


def _condition(obj: Obj, kind: str) -> Obj | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return None


def _true(obj: Obj, kind: str) -> bool:
    condition = _condition(obj, kind)
    return condition is not None and condition.get("status") == "True"


def is_admitted(workload: Obj) -> bool:
    """Kueue reserved quota for it and admitted it (its job may run)."""
    admission = (workload.get("status") or {}).get("admission")
    return bool(admission) and (_true(workload, "Admitted") or _true(workload, "QuotaReserved"))


def is_finished(workload: Obj) -> bool:
    return _true(workload, "Finished")


def preempted_message(workload: Obj) -> str | None:
    """Kueue's reason for preempting it, while it waits to be admitted again."""
    condition = _condition(workload, "Preempted")
    if condition is None or condition.get("status") != "True":
        return None
    return str(condition.get("message") or condition.get("reason") or "") or None


def pending_message(workload: Obj) -> str | None:
    """Kueue's reason for not admitting it (the QuotaReserved=False message)."""
    condition = _condition(workload, "QuotaReserved")
    if condition is None or condition.get("status") == "True":
        return None
    return str(condition.get("message") or condition.get("reason") or "") or None


def _quantity(value: Any) -> int:
    """A chip count as Kubernetes writes quantities ("16", 16, "1k")."""
    text = str(value or "0").strip()
    scale = {"k": 1000, "M": 1000**2, "G": 1000**3}.get(text[-1:], 1)
    try:
        return round(float(text[:-1] if scale > 1 else text) * scale)
    except ValueError:
        return 0


def _pod_chips(template: Obj) -> int:
    total = 0
    for container in (template.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        amount = (resources.get("limits") or {}).get(TPU_RESOURCE) or \
            (resources.get("requests") or {}).get(TPU_RESOURCE)
        total += _quantity(amount)
    return total


def workload_chips(workload: Obj) -> int:
    """TPU chips the Workload holds (admitted) or asks for (pending)."""
    admission = (workload.get("status") or {}).get("admission") or {}
    usage = [a.get("resourceUsage") or {} for a in admission.get("podSetAssignments") or []]
    if any(TPU_RESOURCE in u for u in usage):
        return sum(_quantity(u.get(TPU_RESOURCE)) for u in usage)
    return sum(int(p.get("count") or 0) * _pod_chips(p.get("template") or {})
               for p in (workload.get("spec") or {}).get("podSets") or [])


def _flavor_of(workload: Obj) -> set[str]:
    admission = (workload.get("status") or {}).get("admission") or {}
    return {str((a.get("flavors") or {}).get(TPU_RESOURCE))
            for a in admission.get("podSetAssignments") or []
            if (a.get("flavors") or {}).get(TPU_RESOURCE)}


def _tpu_flavors(cluster_queue: Obj) -> list[tuple[str, int]]:
    flavors: list[tuple[str, int]] = []
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        for entry in group.get("flavors") or []:
            quota = [r for r in entry.get("resources") or [] if r.get("name") == TPU_RESOURCE]
            if quota:
                flavors.append((str(entry.get("name", "")),
                                sum(_quantity(r.get("nominalQuota")) for r in quota)))
    return flavors


def _reserved(cluster_queue: Obj) -> dict[str, int]:
    status = cluster_queue.get("status") or {}
    entries = status.get("flavorsReservation") or status.get("flavorsUsage") or []
    return {str(entry.get("name", "")): sum(_quantity(r.get("total"))
                                           for r in entry.get("resources") or []
                                           if r.get("name") == TPU_RESOURCE)
            for entry in entries}


def _order(workload: Obj) -> tuple[int, str, str]:
    """Kueue's queue order: higher priority first, then older first."""
    return (-int((workload.get("spec") or {}).get("priority") or 0),
            str(_meta(workload).get("creationTimestamp", "")), _ref(workload))


@dataclass(frozen=True, slots=True)
class QueueView:
    """The structured part and the explanation lines of a queued job."""

    info: QueueInfo
    lines: tuple[str, ...]


def _named(workloads: Sequence[Obj], teams: Mapping[str, str]) -> str:
    def one(workload: Obj) -> str:
        team = teams.get(str(_meta(workload).get("namespace", "")))
        return (f"{_ref(workload)} ({workload_chips(workload)} chips"
                f"{', team ' + team if team else ''})")

    shown = ", ".join(one(w) for w in workloads[:NAMED])
    more = len(workloads) - NAMED
    return shown + (f" and {more} more" if more > 0 else "")


def queue_view(workload: Obj | None, *, namespace: str, queue: str, chips: int,
               accelerator: str | None, local_queue: Obj | None, cluster_queue: Obj | None,
               local_queues: Iterable[Obj], workloads: Iterable[Obj],
               teams: Mapping[str, str], priority_class: str | None = None) -> QueueView:
    """Why the job (its Workload, None when Kueue has not made one yet) is not admitted.

    ``workloads`` are the cluster's Workloads and ``local_queues`` its LocalQueues (to
    find which pending Workloads share the ClusterQueue); ``teams`` maps namespaces to
    team names; ``priority_class``: the WorkloadPriorityClass the JobSet names.
    """
    lq_ref = f"{namespace}/{queue}"
    lines: list[str] = []
    if local_queue is None:
        info = QueueInfo(cluster_queue=None, local_queue=lq_ref, chips_requested=chips,
                         message=pending_message(workload) if workload else None)
        return QueueView(info, (f"Its LocalQueue {lq_ref} does not exist, so Kueue cannot "
                                "admit it: the team's queues are not set up on this cluster "
                                "(an operator runs `accelops doctor`).",))
    cq_name = str((local_queue.get("spec") or {}).get("clusterQueue") or "") or None
    message = pending_message(workload) if workload else None
    if cluster_queue is None:
        info = QueueInfo(cluster_queue=cq_name, local_queue=lq_ref, chips_requested=chips,
                         message=message)
        return QueueView(info, (f"Its LocalQueue {lq_ref} feeds ClusterQueue {cq_name}, "
                                "which does not exist: nothing can be admitted from it.",))
    strategy = str((cluster_queue.get("spec") or {}).get("queueingStrategy")
                   or "BestEffortFIFO")
    flavors = _tpu_flavors(cluster_queue)
    named = [f for f in flavors if f[0] == accelerator] or (flavors[:1] if len(flavors) == 1
                                                             else [])
    flavor, quota = named[0] if named else (None, None)
    reserved = _reserved(cluster_queue)
    available = None if flavor is None or quota is None else max(
        quota - reserved.get(flavor, 0), 0)

    feeds = {(str(_meta(q).get("namespace", "")), str(_meta(q).get("name", ""))):
             str((q.get("spec") or {}).get("clusterQueue") or "") for q in local_queues}
    own = _ref(workload) if workload else None
    live = [w for w in workloads if not is_finished(w) and not _meta(w).get("deletionTimestamp")
            and _ref(w) != own]
    holders = sorted((w for w in live if is_admitted(w)
                      and ((w.get("status") or {}).get("admission") or {}).get(
                          "clusterQueue") == cq_name
                      and (flavor is None or flavor in _flavor_of(w))), key=_order)
    pending = [w for w in live if not is_admitted(w)
               and (w.get("spec") or {}).get("active") is not False
               and feeds.get((str(_meta(w).get("namespace", "")),
                              str((w.get("spec") or {}).get("queueName", "")))) == cq_name]
    mine = workload or {"metadata": {"namespace": namespace, "name": "~",
                                     "creationTimestamp": "~"}}
    ahead = sorted((w for w in pending if _order(w) < _order(mine)), key=_order)

    where = f"ClusterQueue {cq_name} (LocalQueue {lq_ref}, {strategy})"
    if flavor is not None and quota is not None:
        lines.append(f"It asks for {chips} TPU chips of {flavor}; {where} has "
                     f"{available} of its {quota} available.")
    else:
        lines.append(f"It asks for {chips} TPU chips from {where}.")
    preempted = preempted_message(workload) if workload else None
    if workload is None:
        lines.append("Kueue has not created its Workload yet; it does within seconds of the "
                     "JobSet being created"
                     + (f", unless the WorkloadPriorityClass {priority_class} its "
                        "kueue.x-k8s.io/priority-class label names does not exist: Kueue "
                        "then never creates one and the JobSet stays suspended (an "
                        "operator runs `accelops doctor`)." if priority_class else "."))
    elif message:
        lines.append(f"Kueue: {message}.")
    if preempted:
        lines.append(f"Preempted: {preempted}. Kueue evicted it for a job of higher "
                     "priority in its ClusterQueue: its pods were stopped, its JobSet "
                     "suspended and its slices are reaped; it waits in the queue again, in "
                     "its old place, and starts over when admitted.")
    if holders:
        lines.append(f"Holding that quota now: {_named(holders, teams)}.")
    if ahead:
        lines.append(f"Ahead of it in the queue ({len(ahead)}): {_named(ahead, teams)}.")
    else:
        lines.append("Nothing is ahead of it in the queue.")
    if quota is not None and chips > quota:
        lines.append(f"It can never be admitted: {chips} chips exceed the queue's whole quota "
                     f"of {quota}. Ask for fewer slices or a smaller TPU type, or have the "
                     f"team's tpu_chips raised.")
    elif strategy == "StrictFIFO" and ahead:
        lines.append("It starts after the workloads ahead of it (StrictFIFO), once enough "
                     "chips are free; finishing or cancelling jobs that hold the quota "
                     "frees them.")
    else:
        lines.append("It starts as soon as enough chips are free: when jobs holding the "
                     "quota finish or are cancelled"
                     + (" (a smaller job behind a blocked one may go first: BestEffortFIFO)."
                        if strategy == "BestEffortFIFO" else "."))
    info = QueueInfo(cluster_queue=cq_name, local_queue=lq_ref, strategy=strategy,
                     flavor=flavor, chips_requested=chips, chips_available=available,
                     chips_quota=quota, ahead=[_ref(w) for w in ahead],
                     admitted=[_ref(w) for w in holders], message=message,
                     preempted=preempted)
    return QueueView(info, tuple(lines))
