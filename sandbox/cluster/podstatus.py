"""The status of a pod the process kubelet runs, from its containers' states.

Phase: ``Pending`` until a container has started, ``Running`` from then on
(also while a container waits in ``CrashLoopBackOff``), ``Succeeded`` /
``Failed`` once every container terminated for good. Conditions as the kubelet
sets them: ``PodReadyToStartContainers`` and ``Initialized`` True (no init
containers or sandboxes here), ``ContainersReady`` and ``Ready`` True when every
container is ready, else False with reason ``ContainersNotReady`` and the
message ``containers with unready status: [main]``. ``PodScheduled``,
``startTime`` and the IPs are the scheduler's and are kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sandbox.cluster.containerstate import ContainerState
from sandbox.cluster.objects import Obj, condition

__all__ = ["pod_status"]


def _phase(containers: Sequence[ContainerState]) -> str:
    if containers and all(c.final is not None for c in containers if not c.simulated) \
            and any(not c.simulated for c in containers):
        failed = any(int((c.final or {}).get("exitCode") or 0) != 0 for c in containers)
        return "Failed" if failed else "Succeeded"
    if any(c.simulated or c.starts > 0 for c in containers):
        return "Running"
    return "Pending"


def pod_status(pod: Mapping[str, Any], containers: Sequence[ContainerState], now: str) -> Obj:
    """The pod's whole ``status`` as the kubelet would report it now."""
    status: Obj = dict(pod.get("status") or {})
    phase = _phase(containers)
    unready = [c.name for c in containers if not c.ready]
    conditions: list[Obj] = list(status.get("conditions") or [])
    for kind in ("PodReadyToStartContainers", "Initialized"):
        conditions = condition(conditions, kind, True, "", "", now)
    if phase in ("Succeeded", "Failed"):
        reason = "PodCompleted" if phase == "Succeeded" else "PodFailed"
        message = ""
    else:
        reason = "ContainersNotReady" if unready else ""
        message = f"containers with unready status: [{' '.join(unready)}]" if unready else ""
    for kind in ("ContainersReady", "Ready"):
        conditions = condition(conditions, kind, not unready and phase == "Running", reason,
                               message, now)
    for entry in conditions:
        if not entry.get("reason"):
            entry.pop("reason", None)
        if not entry.get("message"):
            entry.pop("message", None)
    status["phase"] = phase
    status["conditions"] = conditions
    status["containerStatuses"] = [c.status(status.get("startTime")) for c in containers]
    return status
