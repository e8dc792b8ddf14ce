"""Kueue v0.10.1's admission of queued JobSets on ``google.com/tpu`` quota.

Read from kubernetes-sigs/kueue at v0.10.1: ``pkg/scheduler/scheduler.go`` (order,
namespace check, admission, issuing preemptions), ``pkg/controller/core/workload_controller.go``
(inadmissible reasons), ``pkg/cache/clusterqueue.go``; the job side (the Workload,
starting and stopping the JobSet, eviction) is :mod:`sandbox.cluster.kueue_jobs`.

**Workloads.** A JobSet labelled ``kueue.x-k8s.io/queue-name`` gets a Workload
(``jobset-<name>-<5 hex>``, owned by the JobSet) unless the priority class it names is
missing: then it has none and stays suspended (no built-in priorities; without a
class at all the priority is 0). A Workload with a reservation holds its quota; one
evicted keeps holding it until its JobSet has no active Jobs.

**Queues.** A Workload stays pending (``QuotaReserved`` False) while its LocalQueue or
ClusterQueue does not exist (reason ``Inadmissible``), while its ClusterQueue is
inactive because a flavor it names has no ResourceFlavor ("ClusterQueue X is
inactive"; the ClusterQueue's ``Active`` is False, reason ``FlavorNotFound``; there
is no exception when no ResourceFlavor exists at all), and while its namespace does
not match the ClusterQueue's ``namespaceSelector`` (:mod:`sandbox.cluster.clusterqueues`).

**Admission.** Pending Workloads are considered in Kueue's order, priority then
creation time. Each is assigned flavors (:mod:`sandbox.cluster.flavors`); one that
fits is admitted: ``status.admission`` with its ``podSetAssignments``,
``QuotaReserved`` and ``Admitted`` True (:mod:`sandbox.cluster.workload_status`), the
flavors' nodeLabels added to its pods' nodeSelector, the JobSet unsuspended and
annotated ``sandbox.accelops.dev/admitted-at``, Events ``QuotaReserved`` and
``Admitted`` on the Workload and ``Started`` on the JobSet. One that does not fit
stays pending with the assignment's message; under ``BestEffortFIFO`` (the default)
the Workloads behind it are still considered, under ``StrictFIFO`` they wait behind
it untouched (Kueue looks at the head of a queue only).

**Preemption.** One that would fit the nominal quota without some admitted Workloads
preempts them when ``spec.preemption.withinClusterQueue`` allows
(:mod:`sandbox.cluster.preemption`: strictly lower priority for ``LowerPriority``, the
minimal set, most recently admitted first), stays pending with "... Pending the
preemption of N workload(s)", and keeps its place at the head of its queue: nothing
behind it is admitted until it is. Its targets' JobSets are stopped, their quota
released once their Jobs are inactive, and they are pending again in their old place
(creation time); when admitted again, ``Evicted`` and ``Preempted`` turn False
("Previously: ...").

**Deletion.** Kueue's webhook gives every ClusterQueue and ResourceFlavor the
``kueue.x-k8s.io/resource-in-use`` finalizer; a deleted ClusterQueue goes once no
Workload holds quota in it, a deleted ResourceFlavor once no ClusterQueue names it
(``pkg/controller/core/clusterqueue_controller.go``, ``resourceflavor_controller.go``).

Not simulated: cohorts, borrowing and fair sharing; admission checks; flavor taints
and tolerations; resources other than ``google.com/tpu``; waitForPodsReady; stop
policies; retry back-off; scheduling cycles (a pass considers every pending
Workload, in order, where Kueue takes one head per ClusterQueue per cycle).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from sandbox.cluster.clusterqueues import (
    NAMESPACE_MISMATCH,
    RESOURCE_IN_USE,
    Queue,
    Tally,
    cluster_queue_status,
    local_queue_status,
    namespace_matches,
    preemption_policy,
    queues_of,
    releasable,
)
from sandbox.cluster.flavors import PREEMPT, Assignment, assign_flavors
from sandbox.cluster.kueue_jobs import COMPONENT, JobReconciler, jobset_finished
from sandbox.cluster.objects import (
    ANNOTATION_ADMITTED_AT,
    CLUSTER_QUEUES,
    JOBSETS,
    LABEL_QUEUE,
    LOCAL_QUEUES,
    RESOURCE_FLAVORS,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
    Obj,
    annotations_of,
    deleting,
    is_true,
    labels_of,
    meta,
    name_of,
    namespace_of,
    parse_timestamp,
    patch_quietly,
    record_event,
    replace_status,
    timestamp,
    uid_of,
)
from sandbox.cluster.preemption import IN_CLUSTER_QUEUE, Holder, message, pending_message, targets
from sandbox.cluster.workload_status import (
    condition_of,
    has_quota_reservation,
    preempt,
    reserve_quota,
    unset_quota_reservation,
)
from sandbox.cluster.workloads import (
    class_value,
    flavored_replicated_jobs,
    jobset_tpu_request,
    pod_set_assignments,
    pod_sets,
    workload_name,
)
from sandbox.common.clock import SimClock
from sandbox.kubeapi import ObjectStore

__all__ = [
    "KueueController",
    "jobset_finished",
    "jobset_tpu_request",
    "workload_name",
]

PRIORITY_CLASSES = ("scheduling.k8s.io", "priorityclasses")
NAMESPACES = ("", "namespaces")


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
        self.jobs = JobReconciler(store, clock)

    # ------------------------------------------------------------------ reconcile

    def reconcile(self) -> None:
        workloads = {(namespace_of(w), name_of(w)): w for w in self.store.list(*WORKLOADS)}
        jobsets = self.store.list(*JOBSETS)
        local_queues = {(namespace_of(q), name_of(q)): q for q in self.store.list(*LOCAL_QUEUES)}
        flavor_objects = self.store.list(*RESOURCE_FLAVORS)
        queues = queues_of(self.store.list(*CLUSTER_QUEUES), flavor_objects)
        classes = ({name_of(c): class_value(c)
                    for c in self.store.list(*WORKLOAD_PRIORITY_CLASSES)},
                   {name_of(c): c for c in self.store.list(*PRIORITY_CLASSES)})
        tally = Tally()
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
            found = workloads.get((namespace_of(jobset), workload_name(jobset)))
            workload = found or self.jobs.create_workload(jobset, queue, *classes)
            if workload is None:
                continue
            if jobset_finished(jobset):
                self.jobs.finish(jobset, workload)
                continue
            synced = self.jobs.sync_eviction(jobset, workload)
            if synced is None:
                continue
            workload = synced
            evicted = is_true(workload, "Evicted")
            lq_key = (namespace_of(jobset), queue)
            if has_quota_reservation(workload):
                tally.hold(workload, lq_key)
                if not evicted and (jobset.get("spec") or {}).get("suspend"):
                    # An admitted workload's job is started again, as Kueue does.
                    self.jobs.start(jobset, str(annotations_of(jobset).get(
                        ANNOTATION_ADMITTED_AT) or timestamp(self.clock)))
                continue
            if (workload.get("spec") or {}).get("active") is False:
                continue  # not queued while deactivated
            if not evicted:
                self.jobs.stop(jobset, workload, "Not admitted by cluster queue")
            local_queue = local_queues.get(lq_key)
            cq_name = (local_queue.get("spec") or {}).get("clusterQueue") if local_queue else None
            tally.wait(lq_key)
            candidates.append(_Candidate(
                jobset=jobset, workload=workload,
                priority=int((workload.get("spec") or {}).get("priority") or 0),
                order=self._order(jobset), local_queue=local_queue,
                cluster_queue=str(cq_name) if cq_name else None))

        live = {uid_of(js) for js in jobsets}
        self._seen = {uid: order for uid, order in self._seen.items() if uid in live}
        self.jobs.forget_all_but(live)
        namespaces = {name_of(n): labels_of(n) for n in self.store.list(*NAMESPACES)}
        self._admit(candidates, queues, namespaces, tally)
        self._update_queue_statuses(queues, local_queues, tally)
        self._release(releasable((q.obj for q in queues.values()), flavor_objects,
                                 tally.holders))

    def _order(self, jobset: Obj) -> int:
        uid = uid_of(jobset)
        if uid not in self._seen:
            self._seen[uid] = next(self._sequence)
        return self._seen[uid]

    # ------------------------------------------------------------------ admission

    def _admit(self, candidates: list[_Candidate], queues: Mapping[str, Queue],
               namespaces: Mapping[str, Mapping[str, str]], tally: Tally) -> None:
        blocked: set[str] = set()  # ClusterQueues whose head holds up the rest
        candidates.sort(key=lambda c: (-c.priority,
                                       str(meta(c.jobset).get("creationTimestamp", "")),
                                       c.order, name_of(c.jobset)))
        for cand in candidates:
            queue_name = labels_of(cand.jobset).get(LABEL_QUEUE, "")
            queue = queues.get(cand.cluster_queue or "")
            if cand.local_queue is None:
                self._keep_pending(cand, "Inadmissible", f"LocalQueue {queue_name} doesn't exist")
                continue
            if queue is None or deleting(queue.obj):
                self._keep_pending(cand, "Inadmissible",
                                   f"ClusterQueue {cand.cluster_queue} doesn't exist")
                continue
            tally.pending[queue.name] = tally.pending.get(queue.name, 0) + 1
            if queue.missing:
                self._keep_pending(cand, "Inadmissible", f"ClusterQueue {queue.name} is inactive")
            elif queue.name in blocked:
                continue  # not the head of its queue: Kueue does not look at it
            elif not namespace_matches(queue.obj, namespaces.get(namespace_of(cand.jobset), {})):
                self._keep_pending(cand, "Pending", NAMESPACE_MISMATCH)
            else:
                self._schedule(cand, queue, tally, blocked)

    def _schedule(self, cand: _Candidate, queue: Queue, tally: Tally, blocked: set[str]) -> None:
        """One scheduling attempt for a Workload its ClusterQueue may admit."""
        used = tally.usage.setdefault(queue.name, {})
        assignment = assign_flavors(pod_sets(cand.jobset), queue.flavors, used)
        if assignment.fits:
            if self._admit_one(cand, queue.name, assignment):
                tally.pending[queue.name] -= 1
                tally.admit((namespace_of(cand.jobset),
                             labels_of(cand.jobset).get(LABEL_QUEUE, "")),
                            queue.name, assignment.usage)
            return
        if assignment.mode == PREEMPT:
            chosen = targets(
                preemption_policy(queue.obj), priority=cand.priority,
                queued_at=str(meta(cand.workload).get("creationTimestamp", "")),
                requests=assignment.usage, preempting=assignment.preempting,
                quotas=queue.quotas, usage=used, holders=tally.holders.get(queue.name, []))
            if chosen:
                self._preempt(cand.workload, chosen, tally)
                self._keep_pending(cand, "Pending",
                                   pending_message(assignment.message, len(chosen)))
                blocked.add(queue.name)
                return
        if queue.strict_fifo:
            blocked.add(queue.name)
        self._keep_pending(cand, "Pending", assignment.message)

    def _admit_one(self, cand: _Candidate, cluster_queue: str, assigned: Assignment) -> bool:
        now = timestamp(self.clock)
        jobset, workload = cand.jobset, cand.workload
        admission = {"clusterQueue": cluster_queue,
                     "podSetAssignments": pod_set_assignments(jobset, assigned)}
        updated = self.jobs.put_status(workload, reserve_quota(workload.get("status") or {},
                                                           admission, now))
        if updated is None:
            return False
        flavored = flavored_replicated_jobs(jobset, assigned.pod_sets)
        if flavored is not None:
            self.jobs.patch_jobset(jobset, {"spec": {"replicatedJobs": flavored}})
        self.jobs.start(jobset, now)
        waited = max(0.0, self.clock.now().timestamp() - _queued_since(workload))
        record_event(self.store, self.clock, workload, reason="QuotaReserved",
                     message=f"Quota reserved in ClusterQueue {cluster_queue}, wait time since "
                             f"queued was {waited:.0f}s", component=COMPONENT)
        record_event(self.store, self.clock, workload, reason="Admitted",
                     message=f"Admitted by ClusterQueue {cluster_queue}, wait time since "
                             "reservation was 0s", component=COMPONENT)
        record_event(self.store, self.clock, jobset, reason="Started",
                     message=f"Admitted by clusterQueue {cluster_queue}", component=COMPONENT)
        return True

    def _preempt(self, preemptor: Obj, chosen: list[Holder], tally: Tally) -> None:
        """Kueue's ``IssuePreemptions``: evict each target not evicted yet."""
        text = message(uid_of(preemptor))
        now = timestamp(self.clock)
        for holder in chosen:
            victim = tally.held.get(holder.key)
            if holder.evicted or victim is None:
                continue
            updated = self.jobs.put_status(victim, preempt(victim.get("status") or {},
                                                       IN_CLUSTER_QUEUE, text, now))
            if updated is not None:
                tally.held[holder.key] = updated
                record_event(self.store, self.clock, victim, reason="Preempted", message=text,
                             component=COMPONENT)

    def _keep_pending(self, cand: _Candidate, reason: str, text: str) -> None:
        now = timestamp(self.clock)
        status = unset_quota_reservation(cand.workload.get("status") or {}, reason, text, now)
        updated = self.jobs.put_status(cand.workload, status)
        if updated is not None and updated is not cand.workload:
            record_event(self.store, self.clock, cand.workload, reason="Pending",
                         message=text, event_type="Warning", component=COMPONENT)

    # ------------------------------------------------------------------ writes

    def _update_queue_statuses(self, queues: Mapping[str, Queue],
                               local_queues: Mapping[tuple[str, str], Obj], tally: Tally) -> None:
        now = timestamp(self.clock)
        for queue in queues.values():
            replace_status(self.store, CLUSTER_QUEUES, queue.obj,
                           cluster_queue_status(queue, tally, now))
        for key, lq in local_queues.items():
            replace_status(self.store, LOCAL_QUEUES, lq,
                           local_queue_status(lq, key, queues, tally, now))

    def _release(self, objects: list[Obj]) -> None:
        """Remove the resource-in-use finalizer, which lets a delete finish."""
        for obj in objects:
            key = CLUSTER_QUEUES if obj.get("kind") == "ClusterQueue" else RESOURCE_FLAVORS
            rest = [f for f in meta(obj).get("finalizers") or [] if f != RESOURCE_IN_USE]
            patch_quietly(self.store, key, obj, {"metadata": {"finalizers": rest or None}})


def _queued_since(workload: Obj) -> float:
    """``QueuedWaitTime``'s start: the Requeued condition's time, else creation."""
    requeued = condition_of(workload, "Requeued")
    since = parse_timestamp((requeued or {}).get("lastTransitionTime")) \
        or parse_timestamp(meta(workload).get("creationTimestamp"))
    return since or 0.0
