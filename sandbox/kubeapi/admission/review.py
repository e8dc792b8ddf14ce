"""What a webhook server is asked and how it answers (the AdmissionReview, in Python).

kube-apiserver POSTs an ``admission.k8s.io/v1`` AdmissionReview to a webhook; the
sandbox calls its webhook servers in process with the same content: the operation,
the resource, the object and the old object, whether it is a dry run. A mutating
handler returns the object as it wants it (the real one answers a JSON patch, which
kube-apiserver applies: the effect is the same); any handler refuses by raising
:class:`Denied`, which controller-runtime sends as ``allowed: false`` with a 403
``Forbidden`` status whose message is the webhook's error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sandbox.kubeapi.errors import JsonObject

__all__ = ["Denied", "Handler", "Review", "selector_matches"]


@dataclass(frozen=True)
class Review:
    """One admission request as a webhook sees it."""

    operation: str  # CREATE | UPDATE
    group: str
    version: str
    resource: str
    subresource: str
    namespace: str
    name: str
    object: JsonObject
    old_object: JsonObject | None
    dry_run: bool


class Denied(Exception):
    """A webhook's refusal (controller-runtime's ``admission.Denied``: 403 Forbidden)."""

    def __init__(self, message: str, *, code: int = 403, reason: str = "Forbidden") -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason


# A mutating handler returns the object it wants stored; a validating one returns None.
Handler = Callable[[Review], "JsonObject | None"]


def _requirement_matches(requirement: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = str(requirement.get("key", ""))
    operator = requirement.get("operator")
    values = [str(v) for v in requirement.get("values") or []]
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether a ``metav1.LabelSelector`` selects ``labels`` (empty or absent: everything)."""
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(_requirement_matches(r, labels) for r in selector.get("matchExpressions") or [])
