"""Kueue-style admission of queued JobSets on ``google.com/tpu`` quota.

A JobSet labelled ``kueue.x-k8s.io/queue-name`` gets a Workload
(``kueue.x-k8s.io/v1beta1``, ``jobset-<name>-<5 hex>``, owned by the JobSet) and
stays suspended until the ClusterQueue its LocalQueue points at can assign each
of its pod sets (replicated jobs; replicas * parallelism * chips per pod) a
ResourceFlavor with unused ``google.com/tpu`` quota whose ``nodeLabels`` suit
the pods' nodeSelector. :mod:`sandbox.cluster.flavors` does that assignment as
Kueue does; admission records the flavors in the Workload's
``podSetAssignments`` and adds their nodeLabels to the pods' nodeSelector. A
ClusterQueue naming a flavor without a ResourceFlavor object is inactive
(``FlavorNotFound``) and its workloads stay pending ("ClusterQueue X is
inactive"). Sandbox concession: while the cluster has no ResourceFlavor at all,
flavors count as existing and without nodeLabels instead (queues with one flavor
``tpu`` and no ResourceFlavor object, as the sandbox has long provisioned them,
keep admitting).

Pending JobSets are admitted in order: priority (``kueue.x-k8s.io/priority-class``,
a WorkloadPriorityClass's value or high > medium > low), then creation time.
``BestEffortFIFO`` (the default) lets a smaller JobSet pass a bigger one that does
not fit; ``StrictFIFO`` does not. Admission unsuspends the JobSet, annotates it
``sandbox.accelops.dev/admitted-at`` and marks its Workload QuotaReserved/Admitted.
A finished JobSet (condition Completed or Failed) releases its quota; a Workload
with ``spec.active: false`` is evicted (JobSet suspended again).

Not simulated: cohorts and borrowing, preemption, namespaceSelector, admission
checks, flavor taints and tolerations, resources other than ``google.com/tpu``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sandbox.clock import SimClock
from sandbox.cluster.flavors import (
    Assignment,
    Flavor,
    admitted_usage,
    assign_flavors,
    inactive_message,
    missing_flavors,
    tpu_flavors,
)
from sandbox.cluster.objects import (
    ANNOTATION_ADMITTED_AT,
    CLUSTER_QUEUES,
    JOBSETS,
    LABEL_QUEUE,
    LOCAL_QUEUES,
    RESOURCE_FLAVORS,
    TPU_RESOURCE,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
    Obj,
    annotations_of,
    condition,
    deleting,
    format_count,
    is_true,
    labels_of,
    meta,
    name_of,
    namespace_of,
    patch_quietly,
    record_event,
    timestamp,
    uid_of,
)
from sandbox.cluster.workloads import (
    flavored_replicated_jobs,
    jobset_tpu_request,
    pod_set_assignments,
    pod_sets,
    workload_body,
    workload_name,
)
from sandbox.kubeapi import ApiError, ObjectStore

__all__ = [
    "DEFAULT_PRIORITIES",
    "KueueController",
    "jobset_finished",
    "jobset_tpu_request",
    "workload_name",
]

COMPONENT = "kueue-admission"
DEFAULT_PRIORITIES: dict[str, int] = {"high": 300, "medium": 200, "low": 100}


def jobset_finished(jobset: Mapping[str, Any]) -> bool:
    return is_true(jobset, "Completed") or is_true(jobset, "Failed")


def _add_usage(usage: dict[str, int], more: Mapping[str, int]) -> None:
    for flavor, chips in more.items():
        usage[flavor] = usage.get(flavor, 0) + chips


# Per ClusterQueue: its google.com/tpu flavors (None: none covers it) and the
# flavors it names that have no ResourceFlavor object.
_QueueFlavors = dict[str, tuple[list[Flavor] | None, list[str]]]
# Chips admitted per ClusterQueue and flavor.
_Usage = dict[str, dict[str, int]]


@dataclass
class _Candidate:
    jobset: Obj
    workload: Obj
    priority: int
    order: int
    local_queue: Obj | None
    cluster_queue: str | None


class KueueController:
    """Admits queued JobSets against ClusterQueue quota; see the module docstring."""

    def __init__(self, store: ObjectStore, clock: SimClock) -> None:
        self.store = store
        self.clock = clock
        self._seen: dict[str, int] = {}
        self._sequence = itertools.count()

    # ------------------------------------------------------------------ reconcile

    def reconcile(self) -> None:
        workloads = {(namespace_of(w), name_of(w)): w for w in self.store.list(*WORKLOADS)}
        jobsets = self.store.list(*JOBSETS)
        local_queues = {(namespace_of(q), name_of(q)): q for q in self.store.list(*LOCAL_QUEUES)}
        cluster_queues = {name_of(q): q for q in self.store.list(*CLUSTER_QUEUES)}
        priorities = self._priority_values()
        queue_flavors = self._queue_flavors(cluster_queues)
        usage: _Usage = {}
        admitted_count: dict[str, int] = {}
        lq_counts: dict[tuple[str, str], list[int]] = {}
        candidates: list[_Candidate] = []

        for jobset in jobsets:
            if deleting(jobset):
                continue
            queue = labels_of(jobset).get(LABEL_QUEUE)
            if not queue:
                if (jobset.get("spec") or {}).get("suspend"):
                    record_event(
                        self.store, self.clock, jobset, reason="QueueNameMissing",
                        message=f"JobSet has no {LABEL_QUEUE} label: Kueue does not manage it "
                                "and leaves it suspended", event_type="Warning",
                        component=COMPONENT)
                continue
            key = (namespace_of(jobset), workload_name(jobset))
            workload = workloads.get(key) or self._create_workload(jobset, queue, priorities)
            if workload is None:
                continue
            admission = (workload.get("status") or {}).get("admission") or {}
            admitted = is_true(workload, "Admitted") and bool(admission)
            if jobset_finished(jobset):
                self._finish(jobset, workload)
                continue
            if admitted and (workload.get("spec") or {}).get("active") is False:
                self._evict(jobset, workload, "InactiveWorkload", "The workload is deactivated")
                admitted = False
            if admitted:
                cq = str(admission.get("clusterQueue", ""))
                _add_usage(usage.setdefault(cq, {}), admitted_usage(admission))
                admitted_count[cq] = admitted_count.get(cq, 0) + 1
                lq_counts.setdefault((namespace_of(jobset), queue), [0, 0])[1] += 1
                if (jobset.get("spec") or {}).get("suspend"):
                    # An admitted workload's job is started again, as Kueue does.
                    self._unsuspend(jobset, str(annotations_of(jobset).get(
                        ANNOTATION_ADMITTED_AT) or timestamp(self.clock)))
                continue
            local_queue = local_queues.get((namespace_of(jobset), queue))
            cq_name = (local_queue.get("spec") or {}).get("clusterQueue") if local_queue else None
            lq_counts.setdefault((namespace_of(jobset), queue), [0, 0])[0] += 1
            candidates.append(_Candidate(
                jobset=jobset, workload=workload,
                priority=int((workload.get("spec") or {}).get("priority") or 0),
                order=self._order(jobset), local_queue=local_queue,
                cluster_queue=str(cq_name) if cq_name else None))

        live = {uid_of(js) for js in jobsets}
        self._seen = {uid: order for uid, order in self._seen.items() if uid in live}
        pending_count = self._admit(candidates, cluster_queues, queue_flavors, usage,
                                    admitted_count, lq_counts)
        self._update_queue_statuses(cluster_queues, local_queues, queue_flavors, usage,
                                    admitted_count, pending_count, lq_counts)

    def _order(self, jobset: Obj) -> int:
        uid = uid_of(jobset)
        if uid not in self._seen:
            self._seen[uid] = next(self._sequence)
        return self._seen[uid]

    def _queue_flavors(self, cluster_queues: Mapping[str, Obj]) -> _QueueFlavors:
        objects = {name_of(f): f for f in self.store.list(*RESOURCE_FLAVORS)}
        labels = {name: dict((f.get("spec") or {}).get("nodeLabels") or {})
                  for name, f in objects.items()}
        # No ResourceFlavor at all: the sandbox's bare flavor names (module docstring).
        return {name: (tpu_flavors(cq, labels), missing_flavors(cq, objects) if objects else [])
                for name, cq in cluster_queues.items()}

    def _priority_values(self) -> dict[str, int]:
        values = dict(DEFAULT_PRIORITIES)
        for item in self.store.list(*WORKLOAD_PRIORITY_CLASSES):
            try:
                values[name_of(item)] = int(item.get("value", 0))
            except (TypeError, ValueError):
                continue
        return values

    # ------------------------------------------------------------------ admission

    def _admit(
        self,
        candidates: list[_Candidate],
        cluster_queues: Mapping[str, Obj],
        queue_flavors: _QueueFlavors,
        usage: _Usage,
        admitted_count: dict[str, int],
        lq_counts: dict[tuple[str, str], list[int]],
    ) -> dict[str, int]:
        pending: dict[str, int] = {}
        blocked: set[str] = set()
        candidates.sort(key=lambda c: (-c.priority,
                                       str(meta(c.jobset).get("creationTimestamp", "")),
                                       c.order, name_of(c.jobset)))
        for cand in candidates:
            queue = labels_of(cand.jobset).get(LABEL_QUEUE, "")
            inactive = (cand.workload.get("spec") or {}).get("active") is False
            cq = cluster_queues.get(cand.cluster_queue or "")
            if cand.local_queue is None:
                reason, message = "Inadmissible", f"LocalQueue {queue} doesn't exist"
            elif cq is None or deleting(cq):
                reason = "Inadmissible"
                message = f"ClusterQueue {cand.cluster_queue} doesn't exist"
            elif inactive:
                reason, message = "Inactive", "The workload is deactivated"
            elif queue_flavors[name_of(cq)][1]:
                pending[name_of(cq)] = pending.get(name_of(cq), 0) + 1
                reason, message = "Inadmissible", f"ClusterQueue {name_of(cq)} is inactive"
            else:
                name = name_of(cq)
                used = usage.setdefault(name, {})
                assignment = assign_flavors(pod_sets(cand.jobset), queue_flavors[name][0], used)
                if assignment.fits and name not in blocked:
                    _add_usage(used, assignment.usage)
                    admitted_count[name] = admitted_count.get(name, 0) + 1
                    counts = lq_counts.setdefault((namespace_of(cand.jobset), queue), [0, 0])
                    counts[0] -= 1
                    counts[1] += 1
                    self._admit_one(cand, name, assignment)
                    continue
                pending[name] = pending.get(name, 0) + 1
                if (cq.get("spec") or {}).get("queueingStrategy") == "StrictFIFO":
                    blocked.add(name)
                reason = "Pending"
                message = assignment.message or \
                    "Workload is behind older workloads in a StrictFIFO ClusterQueue"
            self._keep_pending(cand, reason, message)
        return pending

    def _admit_one(self, cand: _Candidate, cluster_queue: str, assigned: Assignment) -> None:
        now = timestamp(self.clock)
        jobset, workload = cand.jobset, cand.workload
        status = dict(workload.get("status") or {})
        conditions = condition(status.get("conditions"), "QuotaReserved", True, "QuotaReserved",
                               f"Quota reserved in ClusterQueue {cluster_queue}", now)
        conditions = condition(conditions, "Admitted", True, "Admitted",
                               "The workload is admitted", now)
        conditions = [c for c in conditions if c.get("type") != "Evicted"]
        status.update(admission={"clusterQueue": cluster_queue,
                                 "podSetAssignments": pod_set_assignments(jobset, assigned)},
                      conditions=conditions)
        if not self._write_workload_status(workload, status):
            return
        self._apply_flavor_node_labels(jobset, assigned.pod_sets)
        self._unsuspend(jobset, now)
        record_event(self.store, self.clock, workload, reason="QuotaReserved",
                     message=f"Quota reserved in ClusterQueue {cluster_queue}",
                     component=COMPONENT)
        record_event(self.store, self.clock, jobset, reason="Started",
                     message=f"Admitted by clusterQueue {cluster_queue}",
                     component=COMPONENT)

    def _keep_pending(self, cand: _Candidate, reason: str, message: str) -> None:
        now = timestamp(self.clock)
        status = dict(cand.workload.get("status") or {})
        status["conditions"] = condition(status.get("conditions"), "QuotaReserved", False,
                                         reason, message, now)
        if self._write_workload_status(cand.workload, status):
            record_event(self.store, self.clock, cand.workload, reason="Pending",
                         message=message, event_type="Warning", component=COMPONENT)
        if not (cand.jobset.get("spec") or {}).get("suspend"):
            self._suspend(cand.jobset)

    def _evict(self, jobset: Obj, workload: Obj, reason: str, message: str) -> None:
        now = timestamp(self.clock)
        status = dict(workload.get("status") or {})
        status.pop("admission", None)
        conditions = condition(status.get("conditions"), "Evicted", True, reason, message, now)
        conditions = condition(conditions, "QuotaReserved", False, "Pending", message, now)
        conditions = condition(conditions, "Admitted", False, "NoReservation",
                               "The workload has no reservation", now)
        status["conditions"] = conditions
        patched = dict(workload)
        patched["status"] = status
        self._replace_workload_status(patched)
        self._suspend(jobset)
        record_event(self.store, self.clock, workload, reason="Evicted", message=message,
                     event_type="Normal", component=COMPONENT)

    def _finish(self, jobset: Obj, workload: Obj) -> None:
        if is_true(workload, "Finished"):
            return
        failed = is_true(jobset, "Failed")
        status = dict(workload.get("status") or {})
        status["conditions"] = condition(
            status.get("conditions"), "Finished", True, "Failed" if failed else "Succeeded",
            "JobSet failed" if failed else "JobSet finished successfully", timestamp(self.clock))
        self._write_workload_status(workload, status)

    # ------------------------------------------------------------------ writes

    def _create_workload(self, jobset: Obj, queue: str,
                         priorities: Mapping[str, int]) -> Obj | None:
        body = workload_body(jobset, queue, priorities)
        try:
            created = self.store.create(*WORKLOADS, body, namespace=namespace_of(jobset))
        except ApiError as exc:
            if exc.code == 409:
                return self.store.try_get(*WORKLOADS, workload_name(jobset),
                                          namespace_of(jobset))
            if exc.code in (403, 404):
                return None
            raise
        record_event(self.store, self.clock, jobset, reason="CreatedWorkload",
                     message=f"Created Workload: {namespace_of(jobset)}/{name_of(created)}",
                     component=COMPONENT)
        return created

    def _write_workload_status(self, workload: Obj, status: Obj) -> bool:
        """Replace the Workload's status; False when it changed meanwhile or is gone."""
        if status == (workload.get("status") or {}):
            return False
        patched = dict(workload)
        patched["status"] = status
        return self._replace_workload_status(patched)

    def _replace_workload_status(self, workload: Obj) -> bool:
        try:
            self.store.update_status(*WORKLOADS, workload, namespace=namespace_of(workload))
        except ApiError as exc:
            if exc.code in (404, 409):
                return False
            raise
        return True

    def _unsuspend(self, jobset: Obj, admitted_at: str) -> None:
        self._patch_jobset(jobset, {"metadata": {"annotations": {ANNOTATION_ADMITTED_AT:
                                                                 admitted_at}},
                                    "spec": {"suspend": False}})

    def _suspend(self, jobset: Obj) -> None:
        self._patch_jobset(jobset, {"metadata": {"annotations": {ANNOTATION_ADMITTED_AT: None}},
                                    "spec": {"suspend": True}})

    def _apply_flavor_node_labels(self, jobset: Obj, flavors: Mapping[str, Flavor]) -> None:
        """Kueue adds each pod set's ResourceFlavor nodeLabels to its pods' nodeSelector."""
        rjobs = flavored_replicated_jobs(jobset, flavors)
        if rjobs is not None:
            self._patch_jobset(jobset, {"spec": {"replicatedJobs": rjobs}})

    def _patch_jobset(self, jobset: Obj, body: Obj) -> None:
        patch_quietly(self.store, JOBSETS, jobset, body)

    # ------------------------------------------------------------------ queue status

    def _update_queue_statuses(
        self,
        cluster_queues: Mapping[str, Obj],
        local_queues: Mapping[tuple[str, str], Obj],
        queue_flavors: _QueueFlavors,
        usage: _Usage,
        admitted: Mapping[str, int],
        pending: Mapping[str, int],
        lq_counts: Mapping[tuple[str, str], list[int]],
    ) -> None:
        now = timestamp(self.clock)
        for name, cq in cluster_queues.items():
            flavors, missing = queue_flavors[name]
            used = usage.get(name, {})
            status = dict(cq.get("status") or {})
            reservations = [{"name": flavor.name, "resources": [
                {"name": TPU_RESOURCE, "total": format_count(used.get(flavor.name, 0)),
                 "borrowed": "0"}]} for flavor in flavors or []]
            status.update(
                pendingWorkloads=pending.get(name, 0),
                reservingWorkloads=admitted.get(name, 0),
                admittedWorkloads=admitted.get(name, 0),
                flavorsReservation=reservations,
                flavorsUsage=reservations,
                conditions=condition(
                    status.get("conditions"), "Active", not missing,
                    "FlavorNotFound" if missing else "Ready",
                    inactive_message(missing) if missing else "Can admit new workloads", now),
            )
            self._write_status(CLUSTER_QUEUES, cq, status)
        for (namespace, name), lq in local_queues.items():
            counts = lq_counts.get((namespace, name), [0, 0])
            cq_name = str((lq.get("spec") or {}).get("clusterQueue") or "")
            status = dict(lq.get("status") or {})
            reason = ("ClusterQueueDoesNotExist" if cq_name not in cluster_queues
                      else "ClusterQueueIsInactive" if queue_flavors[cq_name][1] else "Ready")
            status.update(
                pendingWorkloads=max(counts[0], 0),
                reservingWorkloads=counts[1],
                admittedWorkloads=counts[1],
                conditions=condition(
                    status.get("conditions"), "Active", reason == "Ready", reason,
                    "Can submit new workloads to localQueue" if reason == "Ready"
                    else "Can't submit new workloads to clusterQueue", now),
            )
            self._write_status(LOCAL_QUEUES, lq, status)

    def _write_status(self, key: tuple[str, str], obj: Obj, status: Obj) -> None:
        if status == (obj.get("status") or {}):
            return
        updated = dict(obj)
        updated["status"] = status
        try:
            self.store.update_status(*key, updated, namespace=namespace_of(obj) or None)
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise
