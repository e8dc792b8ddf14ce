"""The ReplicaSet controller (apps/v1): keep ``spec.replicas`` pods of the template.

As kube-controller-manager's: pods are created from the template with
``generateName: <replicaset>-``, the template's labels (``pod-template-hash``
included) and a controller owner reference; surplus pods are deleted in the
order the real controller ranks them (unscheduled before scheduled, pending
before running, not ready before ready, ready for a shorter time first, more
restarts first, newer first). Pods that finished or are being deleted do not
count, so a deleted pod is replaced at once while it still terminates.

Status: ``replicas`` (active pods), ``fullyLabeledReplicas``, ``readyReplicas``,
``availableReplicas`` (Ready for at least ``minReadySeconds`` on the simulated
clock, from the Ready condition's ``lastTransitionTime``) and
``observedGeneration``.

Not simulated: adopting orphans that match the selector, slow-start batches,
expectations, the ``ReplicaFailure`` condition.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from sandbox.cluster.objects import (
    APPS_API_VERSION,
    PODS,
    REPLICASETS,
    Obj,
    children_by_owner,
    delete_quietly,
    deleting,
    find_condition,
    labels_of,
    meta,
    name_of,
    namespace_of,
    owner_reference,
    parse_timestamp,
    patch_quietly,
    pod_active,
    uid_of,
)
from sandbox.common.clock import SimClock
from sandbox.kubeapi import ApiError, ObjectStore

__all__ = ["ReplicaSetController", "available", "ready_since"]


def ready_since(pod: Mapping[str, Any]) -> float | None:
    """When the pod last became Ready (simulated seconds), or None when it is not."""
    ready = find_condition((pod.get("status") or {}).get("conditions"), "Ready")
    if ready is None or ready.get("status") != "True":
        return None
    return parse_timestamp(ready.get("lastTransitionTime")) or 0.0


def available(pod: Mapping[str, Any], min_ready_seconds: float, now: float) -> bool:
    """Ready for at least ``min_ready_seconds`` (a pod that is Ready with 0)."""
    since = ready_since(pod)
    return since is not None and (min_ready_seconds <= 0 or since + min_ready_seconds <= now)


def _restarts(pod: Mapping[str, Any]) -> int:
    return sum(int(s.get("restartCount") or 0)
               for s in (pod.get("status") or {}).get("containerStatuses") or [])


def _deletion_rank(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """Sort key: the pods to delete first come first (controller.ActivePodsWithRanks)."""
    phase_rank = {"Pending": 0, "Unknown": 1, "Running": 2}
    since = ready_since(pod)
    return (
        bool((pod.get("spec") or {}).get("nodeName")),
        phase_rank.get(str((pod.get("status") or {}).get("phase") or "Pending"), 0),
        since is not None,
        -(since or 0.0),
        -_restarts(pod),
        _negated(str(meta(pod).get("creationTimestamp", ""))),
    )


def _negated(text: str) -> tuple[int, ...]:
    return tuple(-ord(ch) for ch in text)


def _int(value: Any, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


class ReplicaSetController:
    """Creates and deletes the Pods of ReplicaSets; see the module docstring."""

    def __init__(self, store: ObjectStore, clock: SimClock) -> None:
        self.store = store
        self.clock = clock

    def reconcile(self) -> float | None:
        """One sweep; returns when (simulated time) a pod next becomes available, if ever."""
        by_owner = children_by_owner(self.store.list(*PODS), "ReplicaSet")
        next_due: float | None = None
        for replicaset in self.store.list(*REPLICASETS):
            if deleting(replicaset):
                continue
            due = self.reconcile_replicaset(replicaset, by_owner.get(uid_of(replicaset), []))
            if due is not None and (next_due is None or due < next_due):
                next_due = due
        return next_due

    def reconcile_replicaset(self, replicaset: Obj, pods: list[Obj]) -> float | None:
        spec: Obj = replicaset.get("spec") or {}
        wanted = max(0, _int(spec.get("replicas"), 1))
        min_ready = float(_int(spec.get("minReadySeconds"), 0))
        active = [p for p in pods if pod_active(p)]
        now = self.clock.time()
        template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        ready = [p for p in active if ready_since(p) is not None]
        status: Obj = {
            "replicas": len(active),
            "fullyLabeledReplicas": sum(1 for p in active if all(
                labels_of(p).get(k) == v for k, v in template_labels.items())),
            "readyReplicas": len(ready),
            "availableReplicas": sum(1 for p in active if available(p, min_ready, now)),
            "observedGeneration": meta(replicaset).get("generation", 1),
        }
        if len(active) < wanted:
            for _ in range(wanted - len(active)):
                self._create_pod(replicaset)
        elif len(active) > wanted:
            for pod in sorted(active, key=_deletion_rank)[: len(active) - wanted]:
                delete_quietly(self.store, PODS, name_of(pod), namespace_of(pod))
        current = replicaset.get("status") or {}
        if any(current.get(key) != value for key, value in status.items()):
            patch_quietly(self.store, REPLICASETS, replicaset, {"status": status},
                          subresource="status")
        if min_ready <= 0:
            return None
        pending = [since + min_ready for p in ready
                   if (since := ready_since(p)) is not None and since + min_ready > now]
        return min(pending) if pending else None

    def build_pod(self, replicaset: Obj) -> Obj:
        """The Pod the ReplicaSet controller creates from the template."""
        template: Obj = copy.deepcopy((replicaset.get("spec") or {}).get("template") or {})
        template_meta: Obj = template.get("metadata") or {}
        spec: Obj = template.get("spec") or {}
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("restartPolicy", "Always")
        metadata: Obj = {
            "generateName": f"{name_of(replicaset)}-",
            "namespace": namespace_of(replicaset),
            "labels": dict(template_meta.get("labels") or {}),
            "ownerReferences": [owner_reference(replicaset, APPS_API_VERSION, "ReplicaSet")],
        }
        if template_meta.get("annotations"):
            metadata["annotations"] = dict(template_meta["annotations"])
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec,
                "status": {"phase": "Pending"}}

    def _create_pod(self, replicaset: Obj) -> None:
        try:
            self.store.create(*PODS, self.build_pod(replicaset),
                              namespace=namespace_of(replicaset))
        except ApiError as exc:
            if exc.code not in (403, 404, 409, 422):
                raise
