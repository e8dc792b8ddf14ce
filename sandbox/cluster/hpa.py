"""A HorizontalPodAutoscaler (autoscaling/v2) that keeps replicas within bounds.

The sandbox has no metrics source: no metrics-server, no custom or external
metrics API (on GKE, a ``Pods`` metric comes through the Custom Metrics
Stackdriver Adapter from Managed Prometheus). So this controller does the part
of the real one that needs no metric, in the same order: a target scaled to 0
while ``minReplicas`` is not 0 is left alone (autoscaling disabled), a target
above ``maxReplicas`` is scaled down to it, one below ``minReplicas``
(default 1) up to it. Within the bounds it reports what the real controller
reports when its metric cannot be read: condition ``ScalingActive`` False with
reason ``FailedGet<Type>Metric`` (``FailedGetPodsMetric``, ...), and leaves the
replica count alone.

Status: ``currentReplicas`` (the target's ``status.replicas``), ``desiredReplicas``,
``lastScaleTime`` when it scaled, ``observedGeneration`` and the conditions
``AbleToScale`` / ``ScalingActive``; a ``SuccessfulRescale`` Event on each
scale. Targets: Deployments and ReplicaSets (``scaleTargetRef``), scaled
through ``spec.replicas``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sandbox.cluster.objects import (
    DEPLOYMENTS,
    HPAS,
    REPLICASETS,
    Obj,
    ResourceKey,
    condition,
    deleting,
    meta,
    namespace_of,
    patch_quietly,
    record_event,
    timestamp,
)
from sandbox.common.clock import SimClock
from sandbox.kubeapi import ObjectStore

__all__ = ["HorizontalPodAutoscalerController"]

COMPONENT = "horizontal-pod-autoscaler"
_TARGETS: dict[str, ResourceKey] = {"Deployment": DEPLOYMENTS, "ReplicaSet": REPLICASETS}
_METRIC_REASONS = {"Pods": "FailedGetPodsMetric", "Resource": "FailedGetResourceMetric",
                   "ContainerResource": "FailedGetContainerResourceMetric",
                   "Object": "FailedGetObjectMetric", "External": "FailedGetExternalMetric"}


def _metric(spec: Mapping[str, Any]) -> tuple[str, str]:
    """(reason, metric name) of the first metric the HPA cannot read here."""
    metrics = spec.get("metrics") or [{"type": "Resource", "resource": {"name": "cpu"}}]
    first: Mapping[str, Any] = metrics[0]
    kind = str(first.get("type") or "Resource")
    source: Mapping[str, Any] = first.get(kind[:1].lower() + kind[1:]) or {}
    name = str((source.get("metric") or {}).get("name") or source.get("name") or "")
    return _METRIC_REASONS.get(kind, "FailedGetPodsMetric"), name


class HorizontalPodAutoscalerController:
    """Clamps each HPA's target to ``[minReplicas, maxReplicas]``; see the module docstring."""

    def __init__(self, store: ObjectStore, clock: SimClock) -> None:
        self.store = store
        self.clock = clock

    def reconcile(self) -> None:
        for hpa in self.store.list(*HPAS):
            if not deleting(hpa):
                self.reconcile_hpa(hpa)

    def reconcile_hpa(self, hpa: Obj) -> None:
        spec: Obj = hpa.get("spec") or {}
        ref: Obj = spec.get("scaleTargetRef") or {}
        key = _TARGETS.get(str(ref.get("kind")))
        target = self.store.try_get(*key, str(ref.get("name", "")), namespace_of(hpa)) \
            if key else None
        now = timestamp(self.clock)
        status: Obj = dict(hpa.get("status") or {})
        conditions = status.get("conditions")
        if key is None or target is None:
            what = f"{str(ref.get('kind', '')).lower()}s" if key else str(ref.get("kind"))
            conditions = condition(conditions, "AbleToScale", False, "FailedGetScale",
                                   f"the HPA controller was unable to get the target's current "
                                   f'scale: {what} "{ref.get("name", "")}" not found', now)
            self._write(hpa, {**status, "conditions": conditions, "currentReplicas": 0,
                              "desiredReplicas": 0})
            return
        assert key is not None
        wanted = int((target.get("spec") or {}).get("replicas") or 0)
        current = int((target.get("status") or {}).get("replicas") or 0)
        low = int(spec.get("minReplicas") or 1)
        high = int(spec.get("maxReplicas") or low)
        desired, why = wanted, ""
        if wanted == 0 and low != 0:
            why = ""  # scaled to zero by hand: autoscaling is disabled
        elif wanted > high:
            desired, why = high, "Current number of replicas above Spec.MaxReplicas"
        elif wanted < low:
            desired, why = low, "Current number of replicas below Spec.MinReplicas"
        else:
            reason, metric = _metric(spec)
            conditions = condition(conditions, "ScalingActive", False, reason,
                                   f"the HPA was unable to compute the replica count: unable "
                                   f"to get metric {metric}: no metrics returned from the "
                                   f"sandbox (it has no metrics API)", now)
        if desired != wanted:
            patch_quietly(self.store, key, target, {"spec": {"replicas": desired}})
            status["lastScaleTime"] = now
            record_event(self.store, self.clock, hpa, reason="SuccessfulRescale",
                         message=f"New size: {desired}; reason: {why}", component=COMPONENT)
            conditions = condition(conditions, "AbleToScale", True, "SucceededRescale",
                                   f"the HPA controller was able to update the target scale "
                                   f"to {desired}", now)
        else:
            conditions = condition(conditions, "AbleToScale", True, "ReadyForNewScale",
                                   "recommended size matches current size", now)
        status.update(observedGeneration=meta(hpa).get("generation", 1),
                      currentReplicas=current, desiredReplicas=desired, conditions=conditions)
        self._write(hpa, status)

    def _write(self, hpa: Obj, status: Obj) -> None:
        if status != (hpa.get("status") or {}):
            patch_quietly(self.store, HPAS, hpa, {"status": status}, subresource="status")
