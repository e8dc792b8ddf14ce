"""The JobSet controller (``jobset.x-k8s.io/v1alpha2`` semantics, jobset v0.7.2).

For an unsuspended JobSet it creates, per replicated job and replica, a Job
``<jobset>-<replicatedJob>-<jobIndex>`` labelled and annotated the way the real
controller does (``jobset.sigs.k8s.io/jobset-name``, ``.../replicatedjob-name``,
``.../job-index``, ``.../job-global-index``, ``.../restart-attempt``,
``.../replicatedjob-replicas``, ``.../global-replicas``, ``.../job-key``; no
``jobset-uid`` label: v0.7.2 has none (api/jobset/v1alpha2/jobset_types.go), so
nothing may find a JobSet's pods by uid; the
``alpha.jobset.sigs.k8s.io/exclusive-topology`` annotation copied), owned by the
JobSet, whose pod template carries the same labels and ``subdomain`` (a headless
Service of that name is created as with ``network.enableDNSHostnames``).

A failed Job (its ``Failed`` condition) runs the ``failurePolicy``
(:mod:`sandbox.cluster.failurepolicy`, from ``pkg/controllers/failure_policy.go``):
its ``rules`` by ``onJobFailureReasons`` and ``targetReplicatedJobs`` and the actions
``FailJobSet``, ``RestartJobSet`` (counted against ``maxRestarts`` through
``restartsCountTowardsMax``) and ``RestartJobSetAndIgnoreMaxRestarts`` (``restarts``
only), with upstream's reasons, messages and Warning events. A restart raises
``status.restarts``; the next pass deletes the Jobs of earlier attempts
(``restart-attempt`` below ``restarts``) and creates the new attempt's.

Status: ``restarts``, ``restartsCountTowardsMax`` (omitted while 0, as Go's
``omitempty`` writes them), ``replicatedJobsStatus``, ``terminalState`` and the
conditions ``Completed`` (success policy met: all jobs, or any with ``operator:
Any``), ``Failed`` and ``Suspended``. A suspended JobSet suspends its Jobs (whose
Pods the Job controller deletes) and resumes them with the current pod template
when unsuspended. When a JobSet finishes, its unfinished Jobs are deleted. Deleting
a JobSet removes its Jobs and Pods through the owner garbage collector
(:mod:`sandbox.cluster.gc`).

Not simulated: ``restartStrategy: BlockingRecreate`` (every restart recreates at
once), startupPolicy, coordinator, TTL after finished, the exclusive-placement pod
(anti-)affinity injection (the sandbox scheduler reads the annotation instead).
"""

from __future__ import annotations

import copy
import hashlib
import logging
from collections.abc import Mapping
from typing import Any

from sandbox.cluster.failurepolicy import decide_failure
from sandbox.cluster.jobs import JobController, job_finished
from sandbox.cluster.objects import (
    ANNOTATION_EXCLUSIVE,
    JOBS,
    JOBSET_API_VERSION,
    JOBSETS,
    LABEL_GLOBAL_REPLICAS,
    LABEL_JOB_GLOBAL_INDEX,
    LABEL_JOB_INDEX,
    LABEL_JOB_KEY,
    LABEL_JOBSET_NAME,
    LABEL_REPLICATED_JOB,
    LABEL_REPLICATED_JOB_REPLICAS,
    LABEL_RESTART_ATTEMPT,
    SERVICES,
    Obj,
    annotations_of,
    children_by_owner,
    condition,
    delete_quietly,
    deleting,
    is_true,
    labels_of,
    name_of,
    namespace_of,
    owner_reference,
    patch_quietly,
    record_event,
    timestamp,
    uid_of,
)
from sandbox.common.clock import SimClock
from sandbox.kubeapi import ApiError, ObjectStore

__all__ = ["JobController", "JobSetController", "job_key", "job_name"]

COMPONENT = "jobset-controller"
log = logging.getLogger(__name__)


def job_name(jobset: str, replicated_job: str, index: int) -> str:
    return f"{jobset}-{replicated_job}-{index}"


def job_key(namespace: str, name: str) -> str:
    """``jobset.sigs.k8s.io/job-key``: sha1 of ``<namespace>/<job name>``."""
    return hashlib.sha1(f"{namespace}/{name}".encode()).hexdigest()  # noqa: S324


def _replicated_jobs(jobset: Mapping[str, Any]) -> list[Obj]:
    return list((jobset.get("spec") or {}).get("replicatedJobs") or [])


def _replicas(rjob: Mapping[str, Any]) -> int:
    return int(rjob.get("replicas", 1) if rjob.get("replicas") is not None else 1)


def _subdomain(jobset: Mapping[str, Any]) -> str | None:
    network = (jobset.get("spec") or {}).get("network") or {}
    if network.get("enableDNSHostnames") is False:
        return None
    return str(network.get("subdomain") or name_of(jobset))


def _pods_ready(job: Mapping[str, Any]) -> bool:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    parallelism = spec.get("parallelism")
    pods = int(parallelism) if parallelism is not None else 1
    if spec.get("completions") is not None:
        pods = min(pods, int(spec["completions"]))
    return int(status.get("succeeded") or 0) + int(status.get("ready") or 0) >= pods


def finished(jobset: Mapping[str, Any]) -> bool:
    return is_true(jobset, "Completed") or is_true(jobset, "Failed")


class JobSetController:
    """Runs JobSets as Jobs; see the module docstring."""

    def __init__(self, store: ObjectStore, clock: SimClock) -> None:
        self.store = store
        self.clock = clock
        self._refused: set[tuple[str, str]] = set()  # (Job, message) already logged

    def reconcile(self) -> None:
        by_owner = children_by_owner(self.store.list(*JOBS), "JobSet", skip_deleting=True)
        for jobset in self.store.list(*JOBSETS):
            if not deleting(jobset):
                self.reconcile_jobset(jobset, by_owner.get(uid_of(jobset), []))

    # ------------------------------------------------------------------ one JobSet

    def reconcile_jobset(self, jobset: Obj, jobs: list[Obj]) -> None:
        spec: Obj = jobset.get("spec") or {}
        status: Obj = dict(jobset.get("status") or {})
        restarts = int(status.get("restarts") or 0)
        now = timestamp(self.clock)
        attempt = str(restarts)
        current = []
        for job in jobs:
            if labels_of(job).get(LABEL_RESTART_ATTEMPT, "0") == attempt:
                current.append(job)
            else:
                delete_quietly(self.store, JOBS, name_of(job), namespace_of(job))
        conditions = list(status.get("conditions") or [])

        if finished(jobset):
            self._delete_unfinished(current)
            self._write_status(jobset, status, current)
            return

        failed = [job for job in current if is_true(job, "Failed")]
        decision = decide_failure(jobset, failed)
        if decision is not None:
            if decision.fail:
                status["conditions"] = condition(conditions, "Failed", True, decision.reason,
                                                 decision.message, now)
                status["terminalState"] = "Failed"
                self._delete_unfinished(current)
                self._write_status(jobset, status, current)
            else:
                # A restart is a status change only: the next pass finds the Jobs of the
                # earlier attempt and deletes them, then creates the new attempt's.
                status["restarts"] = restarts + 1
                if decision.counted:
                    status["restartsCountTowardsMax"] = int(
                        status.get("restartsCountTowardsMax") or 0) + 1
                self._write_status(jobset, status, current)
            record_event(self.store, self.clock, jobset, reason=decision.reason,
                         message=decision.message, event_type="Warning", component=COMPONENT)
            return

        if self._succeeded(jobset, current):
            message = "jobset completed successfully"
            status["conditions"] = condition(conditions, "Completed", True, "AllJobsCompleted",
                                             message, now)
            status["terminalState"] = "Completed"
            self._delete_unfinished(current)
            self._write_status(jobset, status, current)
            record_event(self.store, self.clock, jobset, reason="AllJobsCompleted",
                         message=message, component=COMPONENT)
            return

        if spec.get("suspend"):
            for job in current:
                if not (job.get("spec") or {}).get("suspend") and not job_finished(job):
                    self._patch(JOBS, job, {"spec": {"suspend": True}})
            status["conditions"] = condition(conditions, "Suspended", True, "SuspendedJobs",
                                             "jobset is suspended", now)
            self._write_status(jobset, status, current)
            return

        if any(c.get("type") == "Suspended" and c.get("status") == "True" for c in conditions):
            status["conditions"] = condition(conditions, "Suspended", False, "ResumeJobs",
                                             "jobset is resumed", now)
        self._ensure_service(jobset)
        existing = {name_of(job): job for job in current}
        for wanted in self.desired_jobs(jobset, restarts):
            found = existing.get(name_of(wanted))
            if found is None:
                created = self._create_job(jobset, wanted)
                if created is not None:
                    current.append(created)
            elif (found.get("spec") or {}).get("suspend") and not job_finished(found):
                self._resume(found, wanted)
        self._write_status(jobset, status, current)

    # ------------------------------------------------------------------ jobs

    def desired_jobs(self, jobset: Obj, restarts: int) -> list[Obj]:
        """The Jobs of the current restart attempt, as the controller would create them."""
        rjobs = _replicated_jobs(jobset)
        global_replicas = sum(_replicas(rj) for rj in rjobs)
        namespace = namespace_of(jobset)
        exclusive = annotations_of(jobset).get(ANNOTATION_EXCLUSIVE)
        subdomain = _subdomain(jobset)
        jobs: list[Obj] = []
        global_index = 0
        for rjob in rjobs:
            replicas = _replicas(rjob)
            for index in range(replicas):
                name = job_name(name_of(jobset), str(rjob.get("name", "")), index)
                marks = {
                    LABEL_JOBSET_NAME: name_of(jobset),
                    LABEL_REPLICATED_JOB: str(rjob.get("name", "")),
                    LABEL_RESTART_ATTEMPT: str(restarts),
                    LABEL_REPLICATED_JOB_REPLICAS: str(replicas),
                    LABEL_GLOBAL_REPLICAS: str(global_replicas),
                    LABEL_JOB_INDEX: str(index),
                    LABEL_JOB_GLOBAL_INDEX: str(global_index),
                    LABEL_JOB_KEY: job_key(namespace, name),
                }
                global_index += 1
                template: Obj = copy.deepcopy(rjob.get("template") or {})
                template_meta: Obj = template.get("metadata") or {}
                job_spec: Obj = template.get("spec") or {}
                pod_template: Obj = job_spec.setdefault("template", {})
                pod_meta: Obj = pod_template.setdefault("metadata", {})
                annotations = {**(template_meta.get("annotations") or {}), **marks}
                pod_annotations = {**(pod_meta.get("annotations") or {}), **marks}
                if exclusive:
                    annotations[ANNOTATION_EXCLUSIVE] = exclusive
                    pod_annotations[ANNOTATION_EXCLUSIVE] = exclusive
                pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **marks}
                pod_meta["annotations"] = pod_annotations
                if subdomain:
                    pod_template.setdefault("spec", {})["subdomain"] = subdomain
                job_spec.pop("suspend", None)
                jobs.append({
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {
                        "name": name,
                        "namespace": namespace,
                        "labels": {**(template_meta.get("labels") or {}), **marks},
                        "annotations": annotations,
                        "ownerReferences": [owner_reference(jobset, JOBSET_API_VERSION,
                                                            "JobSet")],
                    },
                    "spec": job_spec,
                })
        return jobs

    def _create_job(self, jobset: Obj, job: Obj) -> Obj | None:
        try:
            return self.store.create(*JOBS, job, namespace=namespace_of(jobset))
        except ApiError as exc:
            if exc.code in (403, 404, 409):
                return None
            if exc.code != 422:
                raise
            # A Job the API server refuses (its template breaks the Job API's rules):
            # jobset v0.7.2 logs "creating jobs" with this error and tries again later,
            # with no Event and no status, so the JobSet just never starts.
            key = (f"{namespace_of(jobset)}/{name_of(job)}", exc.message)
            if key not in self._refused:
                self._refused.add(key)
                log.error("creating jobs: job %r creation failed with error: %s",
                          name_of(job), exc.message)
            return None

    def _resume(self, job: Obj, wanted: Obj) -> None:
        """Unsuspend a Job with the JobSet's current pod scheduling fields (as JobSet does)."""
        wanted_pod = ((wanted.get("spec") or {}).get("template") or {})
        wanted_spec = wanted_pod.get("spec") or {}
        patch: Obj = {"spec": {"suspend": False, "template": {
            "metadata": {"labels": (wanted_pod.get("metadata") or {}).get("labels"),
                         "annotations": (wanted_pod.get("metadata") or {}).get("annotations")},
            "spec": {"nodeSelector": wanted_spec.get("nodeSelector"),
                     "tolerations": wanted_spec.get("tolerations")},
        }}}
        self._patch(JOBS, job, patch)

    def _delete_unfinished(self, jobs: list[Obj]) -> None:
        for job in jobs:
            if not job_finished(job):
                delete_quietly(self.store, JOBS, name_of(job), namespace_of(job))

    def _ensure_service(self, jobset: Obj) -> None:
        subdomain = _subdomain(jobset)
        if not subdomain or self.store.try_get(*SERVICES, subdomain, namespace_of(jobset)):
            return
        service: Obj = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": subdomain,
                "namespace": namespace_of(jobset),
                "labels": {LABEL_JOBSET_NAME: name_of(jobset)},
                "ownerReferences": [owner_reference(jobset, JOBSET_API_VERSION, "JobSet")],
            },
            "spec": {"clusterIP": "None", "selector": {LABEL_JOBSET_NAME: name_of(jobset)},
                     "publishNotReadyAddresses": True},
        }
        try:
            self.store.create(*SERVICES, service, namespace=namespace_of(jobset))
        except ApiError as exc:
            if exc.code not in (403, 404, 409, 422):
                raise

    # ------------------------------------------------------------------ status

    def _succeeded(self, jobset: Obj, jobs: list[Obj]) -> bool:
        policy = (jobset.get("spec") or {}).get("successPolicy") or {}
        rjobs = _replicated_jobs(jobset)
        targets = set(policy.get("targetReplicatedJobs") or [str(rj.get("name")) for rj in rjobs])
        complete = {name_of(job) for job in jobs if is_true(job, "Complete")}
        wanted = [job_name(name_of(jobset), str(rj.get("name")), i)
                  for rj in rjobs if str(rj.get("name")) in targets for i in range(_replicas(rj))]
        if not wanted:
            return False
        if policy.get("operator") == "Any":
            return any(name in complete for name in wanted)
        return all(name in complete for name in wanted)

    def _write_status(self, jobset: Obj, status: Obj, jobs: list[Obj]) -> None:
        by_rjob: dict[str, list[Obj]] = {}
        for job in jobs:
            by_rjob.setdefault(labels_of(job).get(LABEL_REPLICATED_JOB, ""), []).append(job)
        summary = []
        for rjob in _replicated_jobs(jobset):
            name = str(rjob.get("name", ""))
            members = by_rjob.get(name, [])
            # As jobset v0.7.2 counts them (jobset_controller.go, replicated job
            # statuses): over the unfinished Jobs, "ready" when succeeded + ready pods
            # reach min(parallelism, completions), "active" when the Job still has
            # active pods (a suspended Job whose pods are still going counts: Kueue
            # waits for that before it releases an evicted job's quota), "suspended"
            # when spec.suspend.
            unfinished = [j for j in members if not job_finished(j)]
            summary.append({
                "name": name,
                "ready": sum(1 for j in unfinished if _pods_ready(j)),
                "succeeded": sum(1 for j in members if is_true(j, "Complete")),
                "failed": sum(1 for j in members if is_true(j, "Failed")),
                "active": sum(1 for j in unfinished
                              if int((j.get("status") or {}).get("active") or 0) > 0),
                "suspended": sum(1 for j in unfinished if (j.get("spec") or {}).get("suspend")),
            })
        status["replicatedJobsStatus"] = summary
        # Go's omitempty: a zero count is not written at all.
        for key in ("restarts", "restartsCountTowardsMax"):
            if not status.get(key):
                status.pop(key, None)
        if status != (jobset.get("status") or {}):
            self._patch(JOBSETS, jobset, {"status": status}, subresource=True)

    def _patch(self, key: tuple[str, str], obj: Obj, body: Obj, *,
               subresource: bool = False) -> None:
        patch_quietly(self.store, key, obj, body, subresource="status" if subresource else "")
