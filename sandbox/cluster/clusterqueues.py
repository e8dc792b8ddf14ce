"""What Kueue reads from a ClusterQueue besides its quota, as pure functions.

Kueue v0.10.1:

* ``spec.namespaceSelector`` (``pkg/cache/clusterqueue.go`` ``updateClusterQueue``:
  ``metav1.LabelSelectorAsSelector``): absent (null) selects *no* namespace,
  ``{}`` selects every namespace, otherwise ``matchLabels`` and
  ``matchExpressions`` (In, NotIn, Exists, DoesNotExist) must all hold for the
  namespace's labels. The scheduler (``pkg/scheduler/scheduler.go`` ``nominate``)
  leaves a Workload from a namespace that does not match pending with
  :data:`NAMESPACE_MISMATCH`; it is set aside as inadmissible, so it holds up no
  other Workload, even in a StrictFIFO queue (``pkg/queue/cluster_queue.go``).
* ``spec.preemption.withinClusterQueue``: ``Never`` unless set (the CRD's default
  and ``defaultPreemption`` in the cache).
* Active: a ClusterQueue naming a flavor without a ResourceFlavor object is
  inactive, reason ``FlavorNotFound`` (``inactiveReason``); its Workloads stay
  pending with "ClusterQueue X is inactive" (``pkg/controller/core/workload_controller.go``).

A selector with an operator Kueue does not know selects nothing here; Kueue's
webhook refuses such a ClusterQueue before it exists.

Also here: what one reconcile pass counts per queue (:class:`Tally`) and the
ClusterQueue and LocalQueue statuses written from it (``pendingWorkloads``,
``reservingWorkloads``, ``admittedWorkloads``, ``flavorsReservation``,
``flavorsUsage``, ``Active``); and when a ClusterQueue or ResourceFlavor being deleted
lets go of the ``kueue.x-k8s.io/resource-in-use`` finalizer Kueue's webhook gave it
(:func:`releasable`): a ClusterQueue once no Workload holds quota in it
(``pkg/controller/core/clusterqueue_controller.go``, ``ClusterQueueEmpty``), a
ResourceFlavor once no ClusterQueue names it (``resourceflavor_controller.go``,
``ClusterQueuesUsingFlavor``: ClusterQueues still being deleted count).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sandbox.cluster.flavors import Flavor, admitted_usage, missing_flavors, tpu_flavors
from sandbox.cluster.objects import (
    TPU_RESOURCE,
    Obj,
    condition,
    find_condition,
    format_count,
    meta,
    name_of,
    namespace_of,
    uid_of,
)
from sandbox.cluster.preemption import Holder

__all__ = [
    "NAMESPACE_MISMATCH",
    "RESOURCE_IN_USE",
    "Queue",
    "Tally",
    "cluster_queue_status",
    "inactive_message",
    "local_queue_status",
    "namespace_matches",
    "preemption_policy",
    "queues_of",
    "releasable",
]

RESOURCE_IN_USE = "kueue.x-k8s.io/resource-in-use"

NAMESPACE_MISMATCH = "Workload namespace doesn't match ClusterQueue selector"


def _requirement_holds(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = str(expression.get("key", ""))
    operator = expression.get("operator")
    values = [str(v) for v in expression.get("values") or []]
    present = key in labels
    if operator == "In":
        return bool(values) and present and labels[key] in values
    if operator == "NotIn":
        return bool(values) and (not present or labels[key] not in values)
    if operator == "Exists":
        return not values and present
    if operator == "DoesNotExist":
        return not values and not present
    return False


def namespace_matches(cluster_queue: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether the ClusterQueue admits Workloads from a namespace with ``labels``."""
    selector = (cluster_queue.get("spec") or {}).get("namespaceSelector")
    if selector is None:
        return False
    match_labels = selector.get("matchLabels") or {}
    if any(labels.get(str(k)) != str(v) for k, v in match_labels.items()):
        return False
    return all(_requirement_holds(e, labels) for e in selector.get("matchExpressions") or [])


def preemption_policy(cluster_queue: Mapping[str, Any]) -> str:
    """``spec.preemption.withinClusterQueue``, ``Never`` when unset."""
    preemption = (cluster_queue.get("spec") or {}).get("preemption") or {}
    return str(preemption.get("withinClusterQueue") or "Never")


def inactive_message(missing: Sequence[str]) -> str:
    """The ClusterQueue's Active=False (reason FlavorNotFound) message."""
    return ("Can't admit new workloads: references missing ResourceFlavor(s): "
            f"[{' '.join(missing)}].")


# ----------------------------------------------------------------------------- a pass


@dataclass(frozen=True)
class Queue:
    """A ClusterQueue with its ``google.com/tpu`` flavors (None: no resource group
    covers it) and the flavors it names that have no ResourceFlavor object."""

    obj: Obj
    flavors: list[Flavor] | None
    missing: list[str]

    @property
    def name(self) -> str:
        return name_of(self.obj)

    @property
    def quotas(self) -> dict[str, int]:
        return {flavor.name: flavor.quota for flavor in self.flavors or []}

    @property
    def strict_fifo(self) -> bool:
        return (self.obj.get("spec") or {}).get("queueingStrategy") == "StrictFIFO"


def queues_of(cluster_queues: Iterable[Obj], resource_flavors: Iterable[Obj]) -> dict[str, Queue]:
    flavors = {name_of(f): f for f in resource_flavors}
    labels = {name: dict((f.get("spec") or {}).get("nodeLabels") or {})
              for name, f in flavors.items()}
    return {name_of(cq): Queue(cq, tpu_flavors(cq, labels), missing_flavors(cq, flavors))
            for cq in cluster_queues}


@dataclass
class Tally:
    """What one pass counts: chips held per ClusterQueue and flavor, Workloads admitted
    and pending per ClusterQueue, ``[pending, admitted]`` per LocalQueue, and the
    Workloads holding quota (for preemption)."""

    usage: dict[str, dict[str, int]] = field(default_factory=dict)
    admitted: dict[str, int] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)
    local: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    holders: dict[str, list[Holder]] = field(default_factory=dict)
    held: dict[str, Obj] = field(default_factory=dict)  # namespace/name -> Workload

    def _add(self, cluster_queue: str, chips: Mapping[str, int]) -> None:
        used = self.usage.setdefault(cluster_queue, {})
        for flavor, count in chips.items():
            used[flavor] = used.get(flavor, 0) + count
        self.admitted[cluster_queue] = self.admitted.get(cluster_queue, 0) + 1

    def hold(self, workload: Obj, local_queue: tuple[str, str]) -> None:
        """A Workload with a quota reservation (admitted before this pass)."""
        admission = (workload.get("status") or {}).get("admission") or {}
        cluster_queue = str(admission.get("clusterQueue", ""))
        chips = admitted_usage(admission)
        self._add(cluster_queue, chips)
        self.local.setdefault(local_queue, [0, 0])[1] += 1
        key = f"{namespace_of(workload)}/{name_of(workload)}"
        reserved = find_condition((workload.get("status") or {}).get("conditions"),
                                  "QuotaReserved") or {}
        evicted = find_condition((workload.get("status") or {}).get("conditions"),
                                 "Evicted") or {}
        self.holders.setdefault(cluster_queue, []).append(Holder(
            key=key, uid=uid_of(workload),
            priority=int((workload.get("spec") or {}).get("priority") or 0),
            queued_at=str(meta(workload).get("creationTimestamp", "")),
            reserved_at=str(reserved.get("lastTransitionTime", "")),
            evicted=evicted.get("status") == "True", usage=chips))
        self.held[key] = workload

    def wait(self, local_queue: tuple[str, str]) -> None:
        """A Workload waiting in ``local_queue``."""
        self.local.setdefault(local_queue, [0, 0])[0] += 1

    def admit(self, local_queue: tuple[str, str], cluster_queue: str,
              chips: Mapping[str, int]) -> None:
        """A waiting Workload admitted in this pass."""
        self._add(cluster_queue, chips)
        counts = self.local.setdefault(local_queue, [0, 0])
        counts[0] -= 1
        counts[1] += 1


def cluster_queue_status(queue: Queue, tally: Tally, now: str) -> Obj:
    used = tally.usage.get(queue.name, {})
    status = dict(queue.obj.get("status") or {})
    reservations = [{"name": flavor.name, "resources": [
        {"name": TPU_RESOURCE, "total": format_count(used.get(flavor.name, 0)),
         "borrowed": "0"}]} for flavor in queue.flavors or []]
    missing = queue.missing
    status.update(
        pendingWorkloads=tally.pending.get(queue.name, 0),
        reservingWorkloads=tally.admitted.get(queue.name, 0),
        admittedWorkloads=tally.admitted.get(queue.name, 0),
        flavorsReservation=reservations,
        flavorsUsage=reservations,
        conditions=condition(
            status.get("conditions"), "Active", not missing,
            "FlavorNotFound" if missing else "Ready",
            inactive_message(missing) if missing else "Can admit new workloads", now),
    )
    return status


def local_queue_status(local_queue: Obj, key: tuple[str, str], queues: Mapping[str, Queue],
                       tally: Tally, now: str) -> Obj:
    counts = tally.local.get(key, [0, 0])
    cq_name = str((local_queue.get("spec") or {}).get("clusterQueue") or "")
    status = dict(local_queue.get("status") or {})
    reason = ("ClusterQueueDoesNotExist" if cq_name not in queues
              else "ClusterQueueIsInactive" if queues[cq_name].missing else "Ready")
    status.update(
        pendingWorkloads=max(counts[0], 0),
        reservingWorkloads=counts[1],
        admittedWorkloads=counts[1],
        conditions=condition(
            status.get("conditions"), "Active", reason == "Ready", reason,
            "Can submit new workloads to localQueue" if reason == "Ready"
            else "Can't submit new workloads to clusterQueue", now),
    )
    return status


def _deleting_with_finalizer(obj: Obj) -> bool:
    meta = obj.get("metadata") or {}
    return bool(meta.get("deletionTimestamp")) and RESOURCE_IN_USE in (
        meta.get("finalizers") or [])


def releasable(cluster_queues: Iterable[Obj], resource_flavors: Iterable[Obj],
               holding: Mapping[str, Sequence[Any]]) -> list[Obj]:
    """The ClusterQueues and ResourceFlavors being deleted whose resource-in-use
    finalizer Kueue removes now (``holding``: Workloads holding quota per ClusterQueue)."""
    queues = list(cluster_queues)
    named = {str(entry.get("name", "")) for cq in queues
             for group in (cq.get("spec") or {}).get("resourceGroups") or []
             for entry in group.get("flavors") or []}
    done = [cq for cq in queues
            if _deleting_with_finalizer(cq) and not holding.get(name_of(cq))]
    done += [rf for rf in resource_flavors
             if _deleting_with_finalizer(rf) and name_of(rf) not in named]
    return done
