"""Pure rules of the Deployment controller: template hash, defaults, surge and
unavailability, revisions, and the Progressing / Available conditions.

They follow ``pkg/controller/deployment/util`` of kube-controller-manager:

* ``pod-template-hash`` is the FNV-1a hash of the pod template (without that
  label) printed in decimal and each digit mapped to the API's safe alphabet,
  so it looks like the real ones (``7d9c8b5f6d``); a ReplicaSet belongs to the
  template it was made from when the templates are equal apart from that label;
* ``maxSurge`` rounds up and ``maxUnavailable`` rounds down from a percentage,
  and when both come out 0, ``maxUnavailable`` is 1;
* a condition changes only when its status or reason does (lastTransitionTime
  only with the status), except that progress refreshes ``Progressing``'s
  ``lastUpdateTime``, from which ``progressDeadlineSeconds`` is counted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sandbox.cluster.objects import (
    ANNOTATION_REVISION,
    LABEL_POD_TEMPLATE_HASH,
    Obj,
    annotations_of,
    find_condition,
    parse_timestamp,
)

__all__ = [
    "COMPLETE",
    "TIMED_OUT",
    "RolloutSpec",
    "deployment_complete",
    "deployment_progressing",
    "equal_ignoring_hash",
    "resolve_int_or_percent",
    "revision_of",
    "set_condition",
    "template_hash",
    "timed_out",
]

COMPLETE = "NewReplicaSetAvailable"
TIMED_OUT = "ProgressDeadlineExceeded"
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _without_hash(template: Mapping[str, Any]) -> Obj:
    copy: Obj = json.loads(json.dumps(template or {}))
    labels = (copy.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(LABEL_POD_TEMPLATE_HASH, None)
        if not labels:
            copy["metadata"].pop("labels")
    if isinstance(copy.get("metadata"), dict) and not copy["metadata"]:
        copy.pop("metadata")
    return copy


def template_hash(template: Mapping[str, Any], collision_count: int = 0) -> str:
    """The ``pod-template-hash`` of a pod template."""
    text = json.dumps(_without_hash(template), sort_keys=True, separators=(",", ":"))
    if collision_count:
        text += str(collision_count)
    value = 0x811C9DC5
    for byte in text.encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE_ALPHABET[ord(ch) % len(_SAFE_ALPHABET)] for ch in str(value))


def equal_ignoring_hash(left: Mapping[str, Any], right: Mapping[str, Any]) -> bool:
    """Whether two pod templates are the same apart from ``pod-template-hash``."""
    return _without_hash(left) == _without_hash(right)


def resolve_int_or_percent(value: Any, total: int, *, round_up: bool, default: str) -> int:
    """An IntOrString (``1`` or ``"25%"``) as a count of ``total``."""
    if value is None:
        value = default
    if isinstance(value, str) and value.endswith("%"):
        try:
            fraction = float(value[:-1]) * total / 100.0
        except ValueError:
            return 0
        return math.ceil(fraction) if round_up else math.floor(fraction)
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def revision_of(obj: Mapping[str, Any]) -> int:
    try:
        return int(annotations_of(obj).get(ANNOTATION_REVISION) or 0)
    except ValueError:
        return 0


@dataclass(frozen=True, slots=True)
class RolloutSpec:
    """A Deployment's spec with the API's defaults applied."""

    replicas: int
    recreate: bool
    max_surge: int
    max_unavailable: int
    min_ready_seconds: int
    progress_deadline: int | None
    revision_history_limit: int
    paused: bool

    @classmethod
    def of(cls, deployment: Mapping[str, Any]) -> RolloutSpec:
        spec: Mapping[str, Any] = deployment.get("spec") or {}
        replicas = max(0, int(spec.get("replicas", 1) if spec.get("replicas") is not None
                              else 1))
        strategy = spec.get("strategy") or {}
        recreate = strategy.get("type") == "Recreate"
        rolling = strategy.get("rollingUpdate") or {}
        surge = resolve_int_or_percent(rolling.get("maxSurge"), replicas, round_up=True,
                                       default="25%")
        unavailable = resolve_int_or_percent(rolling.get("maxUnavailable"), replicas,
                                             round_up=False, default="25%")
        if recreate:
            surge = unavailable = 0
        elif surge == 0 and unavailable == 0:
            unavailable = 1
        deadline = spec.get("progressDeadlineSeconds", 600)
        history = spec.get("revisionHistoryLimit")
        return cls(
            replicas=replicas,
            recreate=recreate,
            max_surge=surge,
            max_unavailable=min(unavailable, replicas),
            min_ready_seconds=int(spec.get("minReadySeconds") or 0),
            progress_deadline=int(deadline) if deadline is not None else None,
            revision_history_limit=int(history) if history is not None else 10,
            paused=bool(spec.get("paused")),
        )


def set_condition(conditions: list[Obj], kind: str, status: bool, reason: str, message: str,
                  now: str, *, progress: bool = False) -> list[Obj]:
    """``conditions`` with ``kind`` set (deploymentutil.SetDeploymentCondition).

    Unchanged when status and reason are the same, unless ``progress``: then
    ``lastUpdateTime`` (and the message) move on, which restarts the deadline.
    """
    value = "True" if status else "False"
    current = find_condition(conditions, kind)
    if current is not None and current.get("status") == value \
            and current.get("reason") == reason and not progress:
        return conditions
    since = current.get("lastTransitionTime") if current is not None \
        and current.get("status") == value else now
    entry = {"type": kind, "status": value, "lastUpdateTime": now,
             "lastTransitionTime": since or now, "reason": reason, "message": message}
    return [c for c in conditions if c.get("type") != kind] + [entry]


def deployment_complete(replicas: int, status: Mapping[str, Any], generation: int) -> bool:
    """Every replica updated and available, and the newest spec observed."""
    return (status.get("updatedReplicas") == replicas and status.get("replicas") == replicas
            and status.get("availableReplicas") == replicas
            and int(status.get("observedGeneration") or 0) >= generation)


def deployment_progressing(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """More updated, ready or available replicas, or fewer old ones, than last time."""
    def count(status: Mapping[str, Any], key: str) -> int:
        return int(status.get(key) or 0)

    old_old = count(old, "replicas") - count(old, "updatedReplicas")
    new_old = count(new, "replicas") - count(new, "updatedReplicas")
    return (count(new, "updatedReplicas") > count(old, "updatedReplicas")
            or new_old < old_old
            or count(new, "readyReplicas") > count(old, "readyReplicas")
            or count(new, "availableReplicas") > count(old, "availableReplicas"))


def timed_out(conditions: list[Obj], deadline: int | None, now: float) -> bool:
    """Whether the Progressing condition is older than ``progressDeadlineSeconds``."""
    if deadline is None:
        return False
    progressing = find_condition(conditions, "Progressing")
    if progressing is None or progressing.get("reason") == COMPLETE:
        return False
    if progressing.get("reason") == TIMED_OUT:
        return True
    since = parse_timestamp(progressing.get("lastUpdateTime"))
    return since is not None and since + deadline < now
