"""Kueue-style admission of queued JobSets on ``google.com/tpu`` quota.

A JobSet labelled ``kueue.x-k8s.io/queue-name`` gets a Workload
(``kueue.x-k8s.io/v1beta1``, ``jobset-<name>-<5 hex>``, owned by the JobSet) and
stays suspended until the ClusterQueue its LocalQueue points at has unused
``google.com/tpu`` quota for it:

* quota = sum of ``nominalQuota`` over ``spec.resourceGroups[].flavors[].resources[]``
  named ``google.com/tpu``;
* usage = chips of the admitted, unfinished JobSets of that ClusterQueue;
* request = sum of replicas * parallelism * chips per pod over the replicated jobs.

Pending JobSets are admitted in order: priority (``kueue.x-k8s.io/priority-class``,
a WorkloadPriorityClass's value or high > medium > low), then creation time.
``BestEffortFIFO`` (the default) lets a smaller JobSet pass a bigger one that does
not fit; ``StrictFIFO`` does not. Admission unsuspends the JobSet, annotates it
``sandbox.accelops.dev/admitted-at`` and marks its Workload QuotaReserved/Admitted.
A finished JobSet (condition Completed or Failed) releases its quota; a Workload
with ``spec.active: false`` is evicted (JobSet suspended again).

Not simulated: cohorts and borrowing, preemption, namespaceSelector, admission
checks, resources other than ``google.com/tpu``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sandbox.clock import SimClock
from sandbox.cluster.objects import (
    ANNOTATION_ADMITTED_AT,
    CLUSTER_QUEUES,
    JOBSET_API_VERSION,
    JOBSETS,
    LABEL_KUEUE_JOB_UID,
    LABEL_PRIORITY,
    LABEL_QUEUE,
    LOCAL_QUEUES,
    RESOURCE_FLAVORS,
    TPU_RESOURCE,
    WORKLOAD_API_VERSION,
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
    owner_reference,
    parse_quantity,
    patch_quietly,
    record_event,
    short_digest,
    timestamp,
    tpu_request,
    uid_of,
)
from sandbox.kubeapi import ApiError, ObjectStore

__all__ = [
    "DEFAULT_PRIORITIES",
    "KueueController",
    "jobset_finished",
    "jobset_tpu_request",
    "tpu_quota",
    "workload_name",
]

COMPONENT = "kueue-admission"
DEFAULT_PRIORITIES: dict[str, int] = {"high": 300, "medium": 200, "low": 100}


def workload_name(jobset: Mapping[str, Any]) -> str:
    """``jobset-<name>-<5 hex>``, as Kueue names the Workload of a JobSet."""
    digest = short_digest(name_of(jobset), uid_of(jobset), "JobSet", "jobset.x-k8s.io", length=5)
    return f"jobset-{name_of(jobset)}"[:246] + f"-{digest}"


def jobset_finished(jobset: Mapping[str, Any]) -> bool:
    return is_true(jobset, "Completed") or is_true(jobset, "Failed")


def _replicated_jobs(jobset: Mapping[str, Any]) -> list[Obj]:
    return list((jobset.get("spec") or {}).get("replicatedJobs") or [])


def _pod_count(rjob: Mapping[str, Any]) -> int:
    job_spec = ((rjob.get("template") or {}).get("spec")) or {}
    parallelism = job_spec.get("parallelism")
    return int(rjob.get("replicas", 1)) * int(1 if parallelism is None else parallelism)


def _pod_spec(rjob: Mapping[str, Any]) -> Obj:
    job_spec = ((rjob.get("template") or {}).get("spec")) or {}
    return dict(((job_spec.get("template") or {}).get("spec")) or {})


def jobset_tpu_request(jobset: Mapping[str, Any]) -> int:
    """Chips a JobSet needs at once: sum of replicas * parallelism * chips per pod."""
    return sum(_pod_count(rj) * tpu_request(_pod_spec(rj)) for rj in _replicated_jobs(jobset))


def tpu_quota(cluster_queue: Mapping[str, Any]) -> tuple[int, str | None]:
    """(nominal ``google.com/tpu`` quota, first flavor offering it) of a ClusterQueue."""
    total = 0.0
    flavor: str | None = None
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        for entry in group.get("flavors") or []:
            for resource in entry.get("resources") or []:
                if resource.get("name") == TPU_RESOURCE:
                    total += parse_quantity(resource.get("nominalQuota", 0))
                    flavor = flavor or str(entry.get("name", ""))
    return round(total), flavor


@dataclass
class _Candidate:
    jobset: Obj
    workload: Obj
    request: int
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
        usage: dict[str, int] = {}
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
                usage[cq] = usage.get(cq, 0) + jobset_tpu_request(jobset)
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
                jobset=jobset, workload=workload, request=jobset_tpu_request(jobset),
                priority=int((workload.get("spec") or {}).get("priority") or 0),
                order=self._order(jobset), local_queue=local_queue,
                cluster_queue=str(cq_name) if cq_name else None))

        live = {uid_of(js) for js in jobsets}
        self._seen = {uid: order for uid, order in self._seen.items() if uid in live}
        pending_count = self._admit(candidates, cluster_queues, usage, admitted_count, lq_counts)
        self._update_queue_statuses(cluster_queues, local_queues, usage, admitted_count,
                                    pending_count, lq_counts)

    def _order(self, jobset: Obj) -> int:
        uid = uid_of(jobset)
        if uid not in self._seen:
            self._seen[uid] = next(self._sequence)
        return self._seen[uid]

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
        usage: dict[str, int],
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
            else:
                name = name_of(cq)
                quota, flavor = tpu_quota(cq)
                free = quota - usage.get(name, 0)
                behind = name in blocked
                if not behind and cand.request <= free:
                    usage[name] = usage.get(name, 0) + cand.request
                    admitted_count[name] = admitted_count.get(name, 0) + 1
                    counts = lq_counts.setdefault((namespace_of(cand.jobset), queue), [0, 0])
                    counts[0] -= 1
                    counts[1] += 1
                    self._admit_one(cand, name, flavor)
                    continue
                pending[name] = pending.get(name, 0) + 1
                if (cq.get("spec") or {}).get("queueingStrategy") == "StrictFIFO":
                    blocked.add(name)
                reason = "Pending"
                if quota <= 0 and cand.request > 0:
                    message = (f"couldn't assign flavors to pod set {self._podset(cand)}: "
                               f"resource {TPU_RESOURCE} unavailable in ClusterQueue")
                elif behind and cand.request <= free:
                    message = "Workload is behind older workloads in a StrictFIFO ClusterQueue"
                else:
                    message = (f"couldn't assign flavors to pod set {self._podset(cand)}: "
                               f"insufficient unused quota for {TPU_RESOURCE} in flavor "
                               f"{flavor}, {cand.request - max(free, 0)} more needed")
            self._keep_pending(cand, reason, message)
        return pending

    @staticmethod
    def _podset(cand: _Candidate) -> str:
        names = [str(rj.get("name", "")) for rj in _replicated_jobs(cand.jobset)]
        return names[0] if names else "main"

    def _admit_one(self, cand: _Candidate, cluster_queue: str, flavor: str | None) -> None:
        now = timestamp(self.clock)
        jobset, workload = cand.jobset, cand.workload
        assignments = []
        for rjob in _replicated_jobs(jobset):
            count = _pod_count(rjob)
            chips = count * tpu_request(_pod_spec(rjob))
            assignment: Obj = {"name": str(rjob.get("name", "")), "count": count,
                               "flavors": {}, "resourceUsage": {}}
            if chips:
                assignment["flavors"][TPU_RESOURCE] = flavor
                assignment["resourceUsage"][TPU_RESOURCE] = format_count(chips)
            assignments.append(assignment)
        status = dict(workload.get("status") or {})
        conditions = condition(status.get("conditions"), "QuotaReserved", True, "QuotaReserved",
                               f"Quota reserved in ClusterQueue {cluster_queue}", now)
        conditions = condition(conditions, "Admitted", True, "Admitted",
                               "The workload is admitted", now)
        conditions = [c for c in conditions if c.get("type") != "Evicted"]
        status.update(admission={"clusterQueue": cluster_queue,
                                 "podSetAssignments": assignments},
                      conditions=conditions)
        if not self._write_workload_status(workload, status):
            return
        self._apply_flavor_node_labels(jobset, flavor)
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
        priority_class = labels_of(jobset).get(LABEL_PRIORITY, "")
        spec: Obj = {
            "active": True,
            "queueName": queue,
            "priority": priorities.get(priority_class, 0),
            "podSets": [
                {"name": str(rj.get("name", "")), "count": _pod_count(rj),
                 "template": ((rj.get("template") or {}).get("spec") or {}).get("template", {})}
                for rj in _replicated_jobs(jobset)
            ],
        }
        if priority_class:
            spec["priorityClassName"] = priority_class
            spec["priorityClassSource"] = "kueue.x-k8s.io/workloadpriorityclass"
        body: Obj = {
            "apiVersion": WORKLOAD_API_VERSION,
            "kind": "Workload",
            "metadata": {
                "name": workload_name(jobset),
                "namespace": namespace_of(jobset),
                "labels": {LABEL_KUEUE_JOB_UID: uid_of(jobset)},
                "ownerReferences": [owner_reference(jobset, JOBSET_API_VERSION, "JobSet")],
            },
            "spec": spec,
        }
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

    def _apply_flavor_node_labels(self, jobset: Obj, flavor: str | None) -> None:
        """Kueue adds the ResourceFlavor's nodeLabels to the pods' nodeSelector."""
        if not flavor:
            return
        found = self.store.try_get(*RESOURCE_FLAVORS, flavor)
        node_labels = ((found or {}).get("spec") or {}).get("nodeLabels") or {}
        if not node_labels:
            return
        rjobs = _replicated_jobs(jobset)
        for rjob in rjobs:
            pod_spec = rjob.setdefault("template", {}).setdefault("spec", {}) \
                .setdefault("template", {}).setdefault("spec", {})
            pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), **node_labels}
        self._patch_jobset(jobset, {"spec": {"replicatedJobs": rjobs}})

    def _patch_jobset(self, jobset: Obj, body: Obj) -> None:
        patch_quietly(self.store, JOBSETS, jobset, body)

    # ------------------------------------------------------------------ queue status

    def _update_queue_statuses(
        self,
        cluster_queues: Mapping[str, Obj],
        local_queues: Mapping[tuple[str, str], Obj],
        usage: Mapping[str, int],
        admitted: Mapping[str, int],
        pending: Mapping[str, int],
        lq_counts: Mapping[tuple[str, str], list[int]],
    ) -> None:
        now = timestamp(self.clock)
        for name, cq in cluster_queues.items():
            _, flavor = tpu_quota(cq)
            status = dict(cq.get("status") or {})
            flavors = []
            if flavor:
                flavors = [{"name": flavor, "resources": [
                    {"name": TPU_RESOURCE, "total": format_count(usage.get(name, 0)),
                     "borrowed": "0"}]}]
            status.update(
                pendingWorkloads=pending.get(name, 0),
                reservingWorkloads=admitted.get(name, 0),
                admittedWorkloads=admitted.get(name, 0),
                flavorsReservation=flavors,
                flavorsUsage=flavors,
                conditions=condition(status.get("conditions"), "Active", True, "Ready",
                                     "Can admit new workloads", now),
            )
            self._write_status(CLUSTER_QUEUES, cq, status)
        for (namespace, name), lq in local_queues.items():
            counts = lq_counts.get((namespace, name), [0, 0])
            cq_name = str((lq.get("spec") or {}).get("clusterQueue") or "")
            status = dict(lq.get("status") or {})
            exists = cq_name in cluster_queues
            status.update(
                pendingWorkloads=max(counts[0], 0),
                reservingWorkloads=counts[1],
                admittedWorkloads=counts[1],
                conditions=condition(
                    status.get("conditions"), "Active", exists,
                    "Ready" if exists else "ClusterQueueDoesNotExist",
                    "Can submit new workloads to localQueue" if exists
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
