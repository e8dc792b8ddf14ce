"""Is a release serving yet? A pure verdict from a Deployment and its new pods.

The verdict is what ``reconcile_models`` acts on, so it must be right in both
directions: *ready* only when every replica runs the release (an old pod still
answering means the switch is not done), *failed* as soon as the evidence is
clear — a new pod crash-looping or restarting ``max_restarts`` times (a model that
fails to load makes Triton exit, with ``--exit-on-error``), an image that cannot be
pulled, Kubernetes' own ProgressDeadlineExceeded, or the rollout's own timeout —
and *waiting* otherwise, with the progress in words.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from shared.serving.logtail import essence
from shared.serving.triton import ANNOTATION_RELEASE

__all__ = ["Verdict", "judge_deployment"]

_BAD_WAITING = frozenset({"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull",
                          "InvalidImageName", "CreateContainerConfigError",
                          "CreateContainerError", "RunContainerError"})


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Literal["waiting", "ready", "failed"]
    detail: str


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return condition  # type: ignore[no-any-return]
    return {}


def _pod_failure(pod: Mapping[str, Any], max_restarts: int) -> str | None:
    name = (pod.get("metadata") or {}).get("name", "?")
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        restarts = int(status.get("restartCount") or 0)
        waiting = (status.get("state") or {}).get("waiting") or {}
        last = (status.get("lastState") or {}).get("terminated") or {}
        why = essence(last.get("message") or waiting.get("message") or last.get("reason")
                      or waiting.get("reason") or "")
        if waiting.get("reason") in _BAD_WAITING and (
                restarts >= 1 or waiting.get("reason") != "CrashLoopBackOff"):
            return f"pod {name}: {waiting['reason']} after {restarts} restart(s): {why}"[:2000]
        if restarts >= max_restarts:
            return f"pod {name} restarted {restarts} times: {why}"[:2000]
    if (pod.get("status") or {}).get("phase") == "Failed":
        return f"pod {name} failed: {(pod.get('status') or {}).get('message', '')}"[:2000]
    return None


def judge_deployment(deployment: Mapping[str, Any] | None, pods: Iterable[Mapping[str, Any]],
                     release: str, *, age_seconds: float, timeout_seconds: float,
                     max_restarts: int) -> Verdict:
    """The verdict on a rollout of ``release`` that started ``age_seconds`` ago.

    ``pods`` are the pods of the release's template (any others are ignored).
    """
    if deployment is None:
        return Verdict("failed", "the Deployment no longer exists")
    meta = deployment.get("metadata") or {}
    spec = deployment.get("spec") or {}
    status = deployment.get("status") or {}
    template = ((spec.get("template") or {}).get("metadata") or {}).get("annotations") or {}
    if template.get(ANNOTATION_RELEASE) != release:
        return Verdict("failed", f"the Deployment was changed to release "
                                 f"{template.get(ANNOTATION_RELEASE)!r} by someone else")
    for pod in pods:
        failure = _pod_failure(pod, max_restarts)
        if failure is not None:
            return Verdict("failed", failure)
    progressing = _condition(deployment, "Progressing")
    if progressing.get("status") == "False" and \
            progressing.get("reason") == "ProgressDeadlineExceeded":
        return Verdict("failed", f"Kubernetes gave up: {progressing.get('message', '')}")
    wanted = int(spec.get("replicas", 1))
    updated = int(status.get("updatedReplicas") or 0)
    available = int(status.get("availableReplicas") or 0)
    total = int(status.get("replicas") or 0)
    observed = int(status.get("observedGeneration") or 0) >= int(meta.get("generation") or 0)
    progress = f"{updated}/{wanted} replicas updated, {available} available, {total} in all"
    if observed and updated >= wanted and available >= wanted and total == updated:
        return Verdict("ready", progress)
    if age_seconds > timeout_seconds:
        return Verdict("failed", f"not serving after {age_seconds:.0f} s ({progress})")
    return Verdict("waiting", progress)
