"""How the Job controller judges a failed pod: ``podFailurePolicy`` and backoff (pure).

A copy of kubernetes v1.32's rules, read from ``pkg/controller/job/pod_failure_policy.go``
(``matchPodFailurePolicy``, ``matchOnExitCodes``, ``matchOnPodConditions``) and
``pkg/controller/job/job_controller.go`` (``getFailJobMessage``, ``isPodFailed``,
``onlyReplaceFailedPods``, ``pastBackoffLimitOnFailure``):

* rules are tried in order and the first that matches a failed pod decides:
  ``FailJob`` fails the Job (its message names the pod, and the container and exit code
  or the condition, and the rule's index), ``Ignore`` does not count the failure
  against ``backoffLimit`` (the pod is replaced), ``Count`` and ``FailIndex`` count it
  (``FailIndex`` fails just the index only under ``backoffLimitPerIndex``, which the
  sandbox does not simulate); an unknown action skips the rule, as the API asks of
  clients;
* ``onExitCodes`` looks at terminated containers with a non-zero exit code (optionally
  one named container), app containers before init containers, ``In`` / ``NotIn``;
  ``onPodConditions`` matches a pod condition by type and status (the API defaults a
  pattern's status to ``True``);
* with a ``podFailurePolicy`` (whose Jobs the API defaults to
  ``podReplacementPolicy: Failed``) only pods in phase ``Failed`` are failed, and a
  terminating pod is replaced only once it is terminal; otherwise a pod being deleted
  counts as failed too;
* under ``restartPolicy: OnFailure`` the container restarts of the Job's Pending and
  Running pods are what ``backoffLimit`` limits: with 0 the first restart fails the
  Job, else as many restarts as the limit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "JOB_REASON_BACKOFF_LIMIT",
    "JOB_REASON_POD_FAILURE_POLICY",
    "PolicyMatch",
    "fail_job_message",
    "match_pod_failure_policy",
    "only_replace_failed_pods",
    "past_backoff_limit_on_failure",
    "pod_failed",
]

JOB_REASON_POD_FAILURE_POLICY = "PodFailurePolicy"
JOB_REASON_BACKOFF_LIMIT = "BackoffLimitExceeded"

_COUNTED = {"Count": True, "FailIndex": True, "Ignore": False, "FailJob": True}


@dataclass(frozen=True, slots=True)
class PolicyMatch:
    """What a failed pod means for its Job: the matched action (None: no rule), whether
    it counts against ``backoffLimit``, and the Job's failure message for ``FailJob``."""

    action: str | None = None
    counts: bool = True
    message: str | None = None


NO_MATCH = PolicyMatch()


def _pod_ref(pod: Mapping[str, Any]) -> str:
    metadata = pod.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def _exit_code_matches(code: int, requirement: Mapping[str, Any]) -> bool:
    values = {int(v) for v in requirement.get("values") or []}
    operator = requirement.get("operator")
    if operator == "In":
        return code in values
    if operator == "NotIn":
        return code not in values
    return False


def _terminated_container(statuses: Iterable[Mapping[str, Any]],
                          requirement: Mapping[str, Any]) -> tuple[str, int] | None:
    wanted = requirement.get("containerName")
    for status in statuses:
        terminated = (status.get("state") or {}).get("terminated")
        if terminated is None:
            continue  # still running or terminating: no exit code to match yet
        if wanted is not None and wanted != status.get("name"):
            continue
        code = int(terminated.get("exitCode") or 0)
        if code != 0 and _exit_code_matches(code, requirement):
            return str(status.get("name", "")), code
    return None


def _condition_matches(pod: Mapping[str, Any],
                       patterns: Iterable[Mapping[str, Any]]) -> str | None:
    patterns = list(patterns)
    for condition in (pod.get("status") or {}).get("conditions") or []:
        for pattern in patterns:
            if condition.get("type") == pattern.get("type") \
                    and condition.get("status") == (pattern.get("status") or "True"):
                return str(condition.get("type"))
    return None


def match_pod_failure_policy(policy: Mapping[str, Any] | None,
                             pod: Mapping[str, Any]) -> PolicyMatch:
    """The first rule of ``policy`` matching the failed ``pod`` (NO_MATCH: counted)."""
    if not policy:
        return NO_MATCH
    status = pod.get("status") or {}
    for index, rule in enumerate(policy.get("rules") or []):
        action = str(rule.get("action") or "")
        if action not in _COUNTED:
            continue
        if rule.get("onExitCodes") is not None:
            requirement = rule["onExitCodes"]
            found = _terminated_container(status.get("containerStatuses") or [], requirement) \
                or _terminated_container(status.get("initContainerStatuses") or [],
                                         requirement)
            if found is None:
                continue
            container, code = found
            message = (f"Container {container} for pod {_pod_ref(pod)} failed with exit code "
                       f"{code} matching {action} rule at index {index}")
        elif rule.get("onPodConditions") is not None:
            kind = _condition_matches(pod, rule["onPodConditions"])
            if kind is None:
                continue
            message = (f"Pod {_pod_ref(pod)} has condition {kind} matching {action} rule at "
                       f"index {index}")
        else:
            continue
        return PolicyMatch(action, _COUNTED[action], message if action == "FailJob" else None)
    return NO_MATCH


def only_replace_failed_pods(job_spec: Mapping[str, Any]) -> bool:
    """Whether a pod is replaced only once terminal (``podReplacementPolicy: Failed``,
    which the API sets whenever there is a ``podFailurePolicy``)."""
    return job_spec.get("podReplacementPolicy") == "Failed" \
        or job_spec.get("podFailurePolicy") is not None


def pod_failed(pod: Mapping[str, Any], job_spec: Mapping[str, Any]) -> bool:
    """A failed pod as the Job controller counts it: phase Failed, or (unless only
    failed pods are replaced) being deleted before it succeeded."""
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Failed":
        return True
    if only_replace_failed_pods(job_spec):
        return False
    return bool((pod.get("metadata") or {}).get("deletionTimestamp")) and phase != "Succeeded"


def fail_job_message(job_spec: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> str | None:
    """The message of the first failed pod a ``FailJob`` rule matches, if any."""
    policy = job_spec.get("podFailurePolicy")
    if not policy:
        return None
    for pod in pods:
        if pod_failed(pod, job_spec):
            message = match_pod_failure_policy(policy, pod).message
            if message is not None:
                return message
    return None


def past_backoff_limit_on_failure(job_spec: Mapping[str, Any], backoff_limit: int,
                                  pods: Iterable[Mapping[str, Any]]) -> bool:
    """Under ``restartPolicy: OnFailure``: whether the container restarts of the Job's
    Pending and Running pods have used up ``backoffLimit``."""
    template = (job_spec.get("template") or {}).get("spec") or {}
    if template.get("restartPolicy") != "OnFailure":
        return False
    restarts = 0
    for pod in pods:
        status = pod.get("status") or {}
        if status.get("phase") not in ("Running", "Pending"):
            continue
        for key in ("initContainerStatuses", "containerStatuses"):
            restarts += sum(int(s.get("restartCount") or 0) for s in status.get(key) or [])
    if backoff_limit == 0:
        return restarts > 0
    return restarts >= backoff_limit
