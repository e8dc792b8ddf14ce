"""Kueue's job side for JobSets: making the Workload, starting and stopping the job.

Kueue v0.10.1 ``pkg/controller/jobframework/reconciler.go`` (``ReconcileGenericJob``,
``handleJobWithNoWorkload``, ``ensureOneWorkload``, ``startJob``, ``stopJob``, "handle
eviction") and ``pkg/controller/core/workload_controller.go`` (deactivation), for the
JobSet integration (``pkg/controller/jobs/jobset``: ``IsActive`` is some replicated job
with active Jobs, ``Suspend`` sets ``spec.suspend``):

* A JobSet without a Workload is stopped first when it runs ("Missing Workload; unable
  to restore pod templates"), then, once none of its replicated jobs is active, gets
  its Workload with the priority of
  :func:`~sandbox.cluster.workloads.workload_priority` and an Event
  ``CreatedWorkload``. When the priority class it names is missing there is no
  Workload and no Event: the client's NotFound error is logged (ERROR "Handling job
  with no workload", as controller-runtime prints it; here once per JobSet and
  error) and the next pass tries again.
* Starting: ``spec.suspend: false`` (and the sandbox's
  ``sandbox.accelops.dev/admitted-at``). Stopping: ``spec.suspend: true`` with the pods'
  nodeSelector as the Workload's pod sets recorded it (``RestorePodSetsInfo``), and an
  Event ``Stopped``; nothing when the JobSet is suspended already.
* Eviction: a deactivated Workload (``spec.active: false``) gets ``Evicted`` with
  reason ``Deactivated`` ("The workload is deactivated"; an Event
  ``EvictedDueToDeactivated`` when it held quota). An evicted Workload's JobSet is
  stopped with the eviction's message; once it is no longer active, the Workload
  gets ``Requeued`` (True for a preemption, reason ``Preempted``) and loses its
  reservation (``QuotaReserved`` False, reason ``Pending``, the eviction's message).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from sandbox.cluster.objects import (
    ANNOTATION_ADMITTED_AT,
    JOBSETS,
    WORKLOADS,
    Obj,
    condition,
    is_true,
    name_of,
    namespace_of,
    patch_quietly,
    record_event,
    replace_status,
    timestamp,
    uid_of,
)
from sandbox.cluster.workload_status import (
    REASON_PREEMPTED,
    condition_of,
    evict,
    has_quota_reservation,
    requeue,
    unset_quota_reservation,
)
from sandbox.cluster.workloads import (
    MissingPriorityClass,
    restored_replicated_jobs,
    workload_body,
    workload_name,
    workload_priority,
)
from sandbox.common.clock import SimClock
from sandbox.kubeapi import ApiError, ObjectStore

__all__ = ["COMPONENT", "JobReconciler", "jobset_active", "jobset_finished"]

log = logging.getLogger("sandbox.cluster.kueue")

COMPONENT = "kueue-admission"
DEACTIVATED = "The workload is deactivated"


def jobset_finished(jobset: Mapping[str, Any]) -> bool:
    return is_true(jobset, "Completed") or is_true(jobset, "Failed")


def jobset_active(jobset: Mapping[str, Any]) -> bool:
    """Kueue's ``IsActive`` for a JobSet: some replicated job has active Jobs."""
    statuses = (jobset.get("status") or {}).get("replicatedJobsStatus") or []
    return any(int(s.get("active") or 0) > 0 for s in statuses)


class JobReconciler:
    """What Kueue does to a JobSet and its Workload; see the module docstring."""

    def __init__(self, store: ObjectStore, clock: SimClock) -> None:
        self.store = store
        self.clock = clock
        self._unresolved: dict[str, str] = {}  # JobSet uid -> the priority error logged

    def forget_all_but(self, live: set[str]) -> None:
        """Drop what is remembered of JobSets whose uid is not in ``live``."""
        self._unresolved = {uid: e for uid, e in self._unresolved.items() if uid in live}

    def create_workload(self, jobset: Obj, queue: str, workload_classes: Mapping[str, int],
                        pod_classes: Mapping[str, Obj]) -> Obj | None:
        """``handleJobWithNoWorkload``: the new Workload, or None (not yet, or never
        while its priority class is missing)."""
        if not (jobset.get("spec") or {}).get("suspend"):
            self.stop(jobset, None, "Missing Workload; unable to restore pod templates")
            return None
        if jobset_active(jobset):
            return None
        try:
            priority = workload_priority(jobset, workload_classes, pod_classes)
        except MissingPriorityClass as exc:
            if self._unresolved.get(uid_of(jobset)) != str(exc):
                self._unresolved[uid_of(jobset)] = str(exc)
                # controller-runtime's key="value" pairs, as Kueue's log shows them.
                log.error("Handling job with no workload job=%s gvk=%s error=%s",
                          json.dumps(f"{namespace_of(jobset)}/{name_of(jobset)}"),
                          json.dumps("jobset.x-k8s.io/v1alpha2, Kind=JobSet"),
                          json.dumps(str(exc)))
            return None
        self._unresolved.pop(uid_of(jobset), None)
        try:
            created = self.store.create(*WORKLOADS, workload_body(jobset, queue, priority),
                                        namespace=namespace_of(jobset))
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

    def sync_eviction(self, jobset: Obj, workload: Obj) -> Obj | None:
        """Evict a deactivated Workload; stop the job of an evicted one and, once it is
        no longer active, release its reservation. The Workload as it is now (None:
        it changed meanwhile)."""
        now = timestamp(self.clock)
        reserved = has_quota_reservation(workload)
        if (workload.get("spec") or {}).get("active") is False \
                and not is_true(workload, "Evicted"):
            updated = self.put_status(
                workload, evict(workload.get("status") or {}, "Deactivated", DEACTIVATED, now))
            if updated is None:
                return None
            if reserved:
                record_event(self.store, self.clock, workload,
                             reason="EvictedDueToDeactivated", message=DEACTIVATED,
                             component=COMPONENT)
            workload = updated
        evicted = condition_of(workload, "Evicted")
        if evicted is None or evicted.get("status") != "True":
            return workload
        reason, text = str(evicted.get("reason", "")), str(evicted.get("message", ""))
        self.stop(jobset, workload, text)
        if not reserved or jobset_active(jobset):
            return workload
        status = requeue(workload.get("status") or {}, reason, text,
                         reason == REASON_PREEMPTED, now)
        return self.put_status(workload, unset_quota_reservation(status, "Pending", text, now))

    def finish(self, jobset: Obj, workload: Obj) -> None:
        """Mark the Workload of a finished JobSet ``Finished``, which frees its quota."""
        if is_true(workload, "Finished"):
            return
        failed = is_true(jobset, "Failed")
        status = dict(workload.get("status") or {})
        status["conditions"] = condition(
            status.get("conditions"), "Finished", True, "Failed" if failed else "Succeeded",
            "JobSet failed" if failed else "JobSet finished successfully", timestamp(self.clock))
        self.put_status(workload, status)

    # ------------------------------------------------------------------ the JobSet

    def start(self, jobset: Obj, admitted_at: str) -> None:
        self.patch_jobset(jobset, {"metadata": {"annotations": {ANNOTATION_ADMITTED_AT:
                                                                admitted_at}},
                                   "spec": {"suspend": False}})

    def stop(self, jobset: Obj, workload: Obj | None, text: str) -> None:
        """``stopJob``: suspend the JobSet, its pods' nodeSelector as the Workload
        recorded it, with a ``Stopped`` Event; nothing when suspended already."""
        if (jobset.get("spec") or {}).get("suspend"):
            return
        body: Obj = {"metadata": {"annotations": {ANNOTATION_ADMITTED_AT: None}},
                     "spec": {"suspend": True}}
        restored = restored_replicated_jobs(jobset, workload) if workload else None
        if restored is not None:
            body["spec"]["replicatedJobs"] = restored
        self.patch_jobset(jobset, body)
        record_event(self.store, self.clock, jobset, reason="Stopped", message=text,
                     component=COMPONENT)

    def patch_jobset(self, jobset: Obj, body: Obj) -> None:
        patch_quietly(self.store, JOBSETS, jobset, body)

    # ------------------------------------------------------------------ the Workload

    def put_status(self, workload: Obj, status: Obj) -> Obj | None:
        """Replace the Workload's status: the Workload as stored (itself when nothing
        changed), None when it changed meanwhile or is gone."""
        return replace_status(self.store, WORKLOADS, workload, status)
