"""How Kueue moves a Workload's status, as pure functions of the status object.

Kueue v0.10.1, ``pkg/workload/workload.go`` and ``pkg/workload/admissionchecks.go``:

* ``SetQuotaReservation``: ``status.admission`` set, ``QuotaReserved`` True (reason
  ``QuotaReserved``, "Quota reserved in ClusterQueue X"); an ``Evicted`` or
  ``Preempted`` condition present turns False with reason ``QuotaReserved`` and the
  message "Previously: <its message>". ``SyncAdmittedCondition`` then makes
  ``Admitted`` True ("The workload is admitted"): the sandbox has no admission
  checks, so a reservation is an admission.
* ``UnsetQuotaReservationWithCondition``: ``QuotaReserved`` False with the reason and
  message given, ``status.admission`` removed, ``Admitted`` False (``NoReservation``,
  "The workload has no reservation").
* ``SetEvictedCondition``, ``SetPreemptedCondition``, ``SetRequeuedCondition``: the
  condition as given. A preemption sets ``Evicted`` (reason ``Preempted``) and
  ``Preempted`` (reason ``InClusterQueue``) with one message and leaves the
  reservation alone: the job is stopped first, and the reservation goes only once
  no pod is active (``pkg/controller/jobframework/reconciler.go``, "handle eviction").

Not simulated: ``observedGeneration`` on conditions, ``accumulatedPastExexcutionTimeSeconds``,
admission checks and their reset on eviction, ``requeueState``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sandbox.cluster.objects import Obj, condition, find_condition

__all__ = [
    "REASON_PREEMPTED",
    "condition_of",
    "evict",
    "has_quota_reservation",
    "preempt",
    "requeue",
    "reserve_quota",
    "unset_quota_reservation",
]

# kueue.WorkloadEvictedByPreemption, the Evicted condition's reason for a preemption.
REASON_PREEMPTED = "Preempted"
_ADMITTED = ("Admitted", "The workload is admitted")
_NO_RESERVATION = ("NoReservation", "The workload has no reservation")


def condition_of(workload: Mapping[str, Any], kind: str) -> Obj | None:
    return find_condition((workload.get("status") or {}).get("conditions"), kind)


def has_quota_reservation(workload: Mapping[str, Any]) -> bool:
    """``workload.HasQuotaReservation``: QuotaReserved is True (with an admission)."""
    found = condition_of(workload, "QuotaReserved")
    return (found is not None and found.get("status") == "True"
            and bool((workload.get("status") or {}).get("admission")))


def _sync_admitted(conditions: list[Obj], reserved: bool, now: str) -> list[Obj]:
    admitted = find_condition(conditions, "Admitted")
    if (admitted is not None and admitted.get("status") == "True") == reserved:
        return conditions
    if reserved:
        return condition(conditions, "Admitted", True, *_ADMITTED, now)
    return condition(conditions, "Admitted", False, *_NO_RESERVATION, now)


def reserve_quota(status: Mapping[str, Any], admission: Obj, now: str) -> Obj:
    """The status once the scheduler admits the Workload with ``admission``."""
    updated = dict(status)
    updated["admission"] = admission
    conditions = condition(status.get("conditions"), "QuotaReserved", True, "QuotaReserved",
                           f"Quota reserved in ClusterQueue {admission['clusterQueue']}", now)
    for kind in ("Evicted", "Preempted"):
        found = find_condition(conditions, kind)
        if found is not None:
            # Kueue rewrites the condition whatever its status, so "Previously: " stacks.
            conditions = condition(conditions, kind, False, "QuotaReserved",
                                   f"Previously: {found.get('message', '')}", now)
    updated["conditions"] = _sync_admitted(conditions, True, now)
    return updated


def unset_quota_reservation(status: Mapping[str, Any], reason: str, message: str,
                            now: str) -> Obj:
    """The status without a reservation: QuotaReserved False for ``reason``."""
    updated = dict(status)
    updated.pop("admission", None)
    conditions = condition(status.get("conditions"), "QuotaReserved", False, reason, message,
                           now)
    updated["conditions"] = _sync_admitted(conditions, False, now)
    return updated


def evict(status: Mapping[str, Any], reason: str, message: str, now: str) -> Obj:
    """The status with ``Evicted`` True for ``reason`` (the reservation stays)."""
    updated = dict(status)
    updated["conditions"] = condition(status.get("conditions"), "Evicted", True, reason,
                                      message, now)
    return updated


def preempt(status: Mapping[str, Any], reason: str, message: str, now: str) -> Obj:
    """The status of a Workload the scheduler preempts (``applyPreemptionWithSSA``):
    Evicted (reason Preempted) and Preempted (``reason``: InClusterQueue, ...)."""
    updated = evict(status, REASON_PREEMPTED, message, now)
    updated["conditions"] = condition(updated["conditions"], "Preempted", True, reason,
                                      message, now)
    return updated


def requeue(status: Mapping[str, Any], reason: str, message: str, requeued: bool,
            now: str) -> Obj:
    """The status with the ``Requeued`` condition set (True after a preemption)."""
    updated = dict(status)
    updated["conditions"] = condition(status.get("conditions"), "Requeued", requeued, reason,
                                      message, now)
    return updated
