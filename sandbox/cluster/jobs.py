"""The Job controller (batch/v1): Jobs create Pods and report how they went.

Follows kubernetes v1.32's controller (``pkg/controller/job/job_controller.go``,
``pod_failure_policy.go``) where users can see it: Indexed Jobs create one Pod
per completion index named ``<job>-<index>-<5 random>`` with the labels
``batch.kubernetes.io/job-name``, ``batch.kubernetes.io/controller-uid``,
``batch.kubernetes.io/job-completion-index`` (and their legacy forms), the
annotation ``batch.kubernetes.io/job-completion-index``, the env var
``JOB_COMPLETION_INDEX``, and ``hostname = <job>-<index>`` when the template has a
``subdomain``. A Job completes when every index succeeded (``SuccessCriteriaMet``
and ``Complete``, reason ``CompletionsReached``); a suspended Job's active Pods are
deleted.

A Job fails (:mod:`sandbox.cluster.podfailure` has the rules) when a failed Pod
matches a ``podFailurePolicy`` ``FailJob`` rule (reason ``PodFailurePolicy``, the
real message: ``Pod ns/name has condition DisruptionTarget matching FailJob rule at
index 0``), when more failed Pods count than ``backoffLimit`` allows (``Ignore``
rules do not count; reason ``BackoffLimitExceeded``, "Job has reached the specified
backoff limit"), or, under ``restartPolicy: OnFailure``, when its Pods' container
restarts reach ``backoffLimit`` (the first restart, with 0). Then, as the real
controller does, its active Pods are deleted and it gets ``FailureTarget``, and
``Failed`` (with the same reason and message, and a Warning event) once none of its
Pods is still terminating. With a ``podFailurePolicy`` only Pods in phase Failed
count, and a terminating Pod is replaced only once it is terminal
(``podReplacementPolicy: Failed``). ``status.terminating`` counts Pods being deleted.

Like GKE's admission webhook for TPU workloads, a Pod requesting
``google.com/tpu`` gets the toleration for the TPU taint and ``TPU_WORKER_ID`` /
``TPU_WORKER_HOSTNAMES``.

Not simulated: successPolicy, backoffLimitPerIndex (a ``FailIndex`` rule counts like
``Count``), backoff delays between retries, activeDeadlineSeconds,
ttlSecondsAfterFinished, pod tracking finalizers (``status.failed`` counts the failed
Pods that still exist, and ``uncountedTerminatedPods`` stays empty).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from sandbox.cluster.objects import (
    JOB_API_VERSION,
    JOBS,
    LABEL_COMPLETION_INDEX,
    LABEL_CONTROLLER_UID,
    LABEL_CONTROLLER_UID_LEGACY,
    LABEL_JOB_NAME,
    LABEL_JOB_NAME_LEGACY,
    PODS,
    TPU_RESOURCE,
    Obj,
    children_by_owner,
    condition,
    delete_quietly,
    deleting,
    find_condition,
    is_true,
    name_of,
    namespace_of,
    owner_reference,
    patch_quietly,
    pod_active,
    pod_terminated,
    record_event,
    timestamp,
    tpu_request,
    uid_of,
)
from sandbox.cluster.podfailure import (
    JOB_REASON_BACKOFF_LIMIT,
    JOB_REASON_POD_FAILURE_POLICY,
    fail_job_message,
    match_pod_failure_policy,
    only_replace_failed_pods,
    past_backoff_limit_on_failure,
    pod_failed,
)
from sandbox.common.clock import SimClock
from sandbox.kubeapi import ApiError, ObjectStore

__all__ = ["JobController", "completed_indexes", "job_finished", "tpu_toleration"]

DEFAULT_BACKOFF_LIMIT = 6
COMPONENT = "job-controller"


def job_finished(job: Mapping[str, Any]) -> bool:
    return is_true(job, "Complete") or is_true(job, "Failed")


def tpu_toleration() -> Obj:
    """The toleration GKE's webhook adds to Pods that request TPU chips."""
    return {"key": TPU_RESOURCE, "operator": "Equal", "value": "present",
            "effect": "NoSchedule"}


def completed_indexes(indexes: Iterable[int]) -> str:
    """``0-3,5``: the compressed form Job status uses."""
    ordered = sorted(set(indexes))
    parts: list[str] = []
    start = prev = None
    for index in ordered:
        if start is None:
            start = prev = index
        elif prev is not None and index == prev + 1:
            prev = index
        else:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = index
    if start is not None:
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(parts)


def _index_of(pod: Mapping[str, Any]) -> int | None:
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(LABEL_COMPLETION_INDEX)
    if value is None:
        value = ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_COMPLETION_INDEX)
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _qos_class(pod_spec: Mapping[str, Any]) -> str:
    containers = pod_spec.get("containers") or []
    guaranteed = bool(containers)
    burstable = False
    for container in containers:
        resources = container.get("resources") or {}
        requests = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        limits = resources.get("limits") or {}
        if any(requests.get(r) or limits.get(r) for r in ("cpu", "memory")):
            burstable = True
        if any(not limits.get(r) or requests.get(r) != limits.get(r) for r in ("cpu", "memory")):
            guaranteed = False
    return "Guaranteed" if guaranteed else "Burstable" if burstable else "BestEffort"


class JobController:
    """Creates the Pods of Jobs and keeps Job status; see the module docstring."""

    def __init__(self, store: ObjectStore, clock: SimClock) -> None:
        self.store = store
        self.clock = clock

    def reconcile(self) -> None:
        by_job = children_by_owner(self.store.list(*PODS), "Job")
        for job in self.store.list(*JOBS):
            if not deleting(job):
                self.reconcile_job(job, by_job.get(uid_of(job), []))

    def reconcile_job(self, job: Obj, pods: list[Obj]) -> None:
        spec: Obj = job.get("spec") or {}
        status: Obj = dict(job.get("status") or {})
        now = timestamp(self.clock)
        indexed = spec.get("completionMode") == "Indexed"
        parallelism = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None
                          else 1)
        completions_raw = spec.get("completions")
        completions = int(completions_raw) if completions_raw is not None else None
        backoff_limit = int(spec.get("backoffLimit", DEFAULT_BACKOFF_LIMIT)
                            if spec.get("backoffLimit") is not None else DEFAULT_BACKOFF_LIMIT)
        policy = spec.get("podFailurePolicy")
        active = [p for p in pods if pod_active(p)]
        terminating = [p for p in pods if deleting(p) and not pod_terminated(p)]
        succeeded = [p for p in pods if _phase(p) == "Succeeded"]
        failed = [p for p in pods if pod_failed(p, spec)]
        counted_failed = sum(1 for p in failed if match_pod_failure_policy(policy, p).counts)
        succeeded_indexes = {i for i in map(_index_of, succeeded) if i is not None}
        conditions = list(status.get("conditions") or [])

        if job_finished(job):
            self._delete_pods(active)
            active = []
        elif spec.get("suspend"):
            self._delete_pods(active)
            active = []
            conditions = condition(conditions, "Suspended", True, "JobSuspended",
                                   "Job suspended", now)
        else:
            suspended_before = find_condition(conditions, "Suspended")
            if suspended_before and suspended_before.get("status") == "True":
                conditions = condition(conditions, "Suspended", False, "JobResumed",
                                       "Job resumed", now)
            status.setdefault("startTime", now)
            failure = self._failure(job, conditions, pods, counted_failed, backoff_limit)
            if failure is not None:
                reason, message = failure
                # The real controller deletes the active pods and marks the Job
                # FailureTarget; Failed follows once no pod of it is still terminating.
                deleted = self._delete_pods(active)
                active = []
                if not is_true(job, "FailureTarget"):
                    conditions = condition(conditions, "FailureTarget", True, reason,
                                           message, now)
                if not deleted and not terminating:
                    conditions = condition(conditions, "Failed", True, reason, message, now)
                    record_event(self.store, self.clock, job, reason=reason, message=message,
                                 event_type="Warning", component=COMPONENT)
            elif self._complete(indexed, completions, succeeded, succeeded_indexes, active):
                message = "Reached expected number of succeeded pods"
                conditions = condition(conditions, "SuccessCriteriaMet", True,
                                       "CompletionsReached", message, now)
                conditions = condition(conditions, "Complete", True, "CompletionsReached",
                                       message, now)
                status["completionTime"] = now
            else:
                # With podReplacementPolicy Failed a terminating pod holds its place
                # until it is terminal.
                holding = terminating if only_replace_failed_pods(spec) else []
                active += self._create_pods(job, indexed, parallelism, completions,
                                            succeeded, succeeded_indexes, active + holding)

        ready = sum(1 for p in active if is_true(p, "Ready"))
        status.update(active=len(active), ready=ready, succeeded=len(succeeded),
                      failed=counted_failed, terminating=len(terminating),
                      uncountedTerminatedPods={})
        if conditions:
            status["conditions"] = conditions
        if indexed and succeeded_indexes:
            status["completedIndexes"] = completed_indexes(succeeded_indexes)
        if status != (job.get("status") or {}):
            patch_quietly(self.store, JOBS, job, {"status": status}, subresource="status")

    @staticmethod
    def _failure(job: Obj, conditions: list[Obj], pods: list[Obj], counted_failed: int,
                 backoff_limit: int) -> tuple[str, str] | None:
        """(reason, message) when the Job has failed or must fail now, else None.

        In the real controller's order: a FailureTarget already set stands; then a
        failed pod matching a FailJob rule; then too many counted failures, or (under
        OnFailure) too many container restarts.
        """
        target = find_condition(conditions, "FailureTarget")
        if target is not None and target.get("status") == "True":
            return str(target.get("reason") or ""), str(target.get("message") or "")
        spec: Obj = job.get("spec") or {}
        message = fail_job_message(spec, pods)
        if message is not None:
            return JOB_REASON_POD_FAILURE_POLICY, message
        if counted_failed > backoff_limit \
                or past_backoff_limit_on_failure(spec, backoff_limit, pods):
            return JOB_REASON_BACKOFF_LIMIT, "Job has reached the specified backoff limit"
        return None

    @staticmethod
    def _complete(
        indexed: bool,
        completions: int | None,
        succeeded: list[Obj],
        succeeded_indexes: set[int],
        active: list[Obj],
    ) -> bool:
        if indexed and completions is not None:
            return succeeded_indexes >= set(range(completions))
        if completions is None:
            return bool(succeeded) and not active
        return len(succeeded) >= completions

    def _create_pods(
        self,
        job: Obj,
        indexed: bool,
        parallelism: int,
        completions: int | None,
        succeeded: list[Obj],
        succeeded_indexes: set[int],
        active: list[Obj],
    ) -> list[Obj]:
        room = parallelism - len(active)
        if room <= 0:
            return []
        if indexed and completions is not None:
            busy = {i for i in map(_index_of, active) if i is not None}
            missing = [i for i in range(completions) if i not in succeeded_indexes
                       and i not in busy]
            wanted: list[int | None] = list(missing[:room])
        else:
            remaining = (completions - len(succeeded)) if completions is not None else (
                0 if succeeded else parallelism)
            wanted = [None] * max(0, min(room, remaining - len(active)))
        created = []
        for index in wanted:
            body = self.build_pod(job, index, completions)
            try:
                created.append(self.store.create(*PODS, body, namespace=namespace_of(job)))
            except ApiError as exc:
                if exc.code not in (403, 404, 409):
                    raise
        return created

    def build_pod(self, job: Obj, index: int | None, completions: int | None) -> Obj:
        """The Pod the Job controller creates for one completion index (None: NonIndexed)."""
        template: Obj = copy.deepcopy((job.get("spec") or {}).get("template") or {})
        template_meta: Obj = template.get("metadata") or {}
        spec: Obj = template.get("spec") or {}
        job_name = name_of(job)
        labels = dict(template_meta.get("labels") or {})
        labels.update({
            LABEL_CONTROLLER_UID: uid_of(job),
            LABEL_CONTROLLER_UID_LEGACY: uid_of(job),
            LABEL_JOB_NAME: job_name,
            LABEL_JOB_NAME_LEGACY: job_name,
        })
        annotations = dict(template_meta.get("annotations") or {})
        if index is not None:
            labels[LABEL_COMPLETION_INDEX] = str(index)
            annotations[LABEL_COMPLETION_INDEX] = str(index)
            if spec.get("subdomain"):
                spec["hostname"] = f"{job_name}-{index}"
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("restartPolicy", "Never")
        requests_tpu = tpu_request(spec) > 0
        if requests_tpu:
            tolerations = list(spec.get("tolerations") or [])
            if not any(t.get("key") == TPU_RESOURCE for t in tolerations):
                tolerations.append(tpu_toleration())
            spec["tolerations"] = tolerations
        for container in spec.get("containers") or []:
            env = list(container.get("env") or [])
            names = {entry.get("name") for entry in env}
            extra: list[Obj] = []
            if index is not None:
                extra.append({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                    "fieldPath": f"metadata.annotations['{LABEL_COMPLETION_INDEX}']"}}})
                if requests_tpu:
                    extra.append({"name": "TPU_WORKER_ID", "value": str(index)})
                    if spec.get("subdomain") and completions:
                        hosts = ",".join(f"{job_name}-{i}.{spec['subdomain']}"
                                         for i in range(completions))
                        extra.append({"name": "TPU_WORKER_HOSTNAMES", "value": hosts})
            env += [entry for entry in extra if entry["name"] not in names]
            if env:
                container["env"] = env
        prefix = f"{job_name}-{index}-" if index is not None else f"{job_name}-"
        metadata: Obj = {
            "generateName": prefix,
            "namespace": namespace_of(job),
            "labels": labels,
            "ownerReferences": [owner_reference(job, JOB_API_VERSION, "Job")],
        }
        if annotations:
            metadata["annotations"] = annotations
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": spec,
            "status": {"phase": "Pending", "qosClass": _qos_class(spec)},
        }

    def _delete_pods(self, pods: Iterable[Obj]) -> int:
        """Delete ``pods``; returns how many were there to delete."""
        count = 0
        for pod in pods:
            delete_quietly(self.store, PODS, name_of(pod), namespace_of(pod))
            count += 1
        return count
