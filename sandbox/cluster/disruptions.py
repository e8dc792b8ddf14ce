"""Node disruptions: a Spot VM preempted, the hosts of a TPU slice taken for maintenance.

What GKE and the kubelet do, as far as Pods, Jobs and the scheduler can see it:

* Compute Engine tells the VM it is going away (30 s before a Spot preemption, earlier
  for a host maintenance event); GKE's nodes run the kubelet's graceful node shutdown
  (kubernetes ``pkg/kubelet/nodeshutdown/nodeshutdown_manager_linux.go``), which ends
  every Pod on the node: phase ``Failed``, reason ``Terminated``, message "Pod was
  terminated in response to imminent node shutdown.", and the condition
  ``DisruptionTarget`` True with reason ``TerminationByKubelet`` and the same
  message. Its containers get SIGTERM: a program that honours it exits 143 (``Error``),
  and says so as the last line of its log. Pods whose containers are real processes
  are stopped by the process kubelet, as any terminated Pod;
* the node reports ``Ready`` False (reason ``KubeletNotReady``, "node is shutting
  down"), so the scheduler binds nothing there;
* the managed instance group recreates the VM under the same name when capacity
  allows (a maintenance event ends when the host is back): after the disruption's
  simulated seconds the same Node is ``Ready`` again, with a new ``bootID``.

A Node that is down carries the annotations ``sandbox.accelops.dev/disruption``
(``preemption`` or ``maintenance``) and ``sandbox.accelops.dev/down-until`` (when it
comes back), so a restarted cluster brings it back on time.

Simplified: the kubelet's shutdown grace period is not waited out (the Pods end at
once); the node lifecycle controller's ``Unknown`` status and ``not-ready`` /
``unreachable`` taints are not set (a not-Ready node is never scheduled to, which is
what they achieve); a multi-host TPU slice is not repaired as a unit (GKE recreates
the whole slice; here only the disrupted node goes down and comes back).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable

from sandbox.cluster.objects import (
    NODES,
    PODS,
    Obj,
    annotations_of,
    condition,
    name_of,
    parse_timestamp,
    patch_quietly,
    pod_terminated,
    timestamp,
    uid_of,
)
from sandbox.common.clock import SimClock
from sandbox.kubeapi import ObjectStore, format_timestamp

__all__ = [
    "ANNOTATION_DISRUPTION",
    "ANNOTATION_DOWN_UNTIL",
    "DISRUPTION_KINDS",
    "SHUTDOWN_MESSAGE",
    "NodeDisruptions",
]

ANNOTATION_DISRUPTION = "sandbox.accelops.dev/disruption"
ANNOTATION_DOWN_UNTIL = "sandbox.accelops.dev/down-until"
DISRUPTION_KINDS = frozenset({"preemption", "maintenance"})

# The kubelet's words (nodeshutdown_manager_linux.go, v1.PodReasonTerminationByKubelet).
SHUTDOWN_REASON = "Terminated"
SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
TERMINATION_BY_KUBELET = "TerminationByKubelet"
NODE_SHUTTING_DOWN = "node is shutting down"
SIGTERM_EXIT_CODE = 143


class NodeDisruptions:
    """Takes Nodes down (failing their Pods) and brings them back when due."""

    def __init__(self, store: ObjectStore, clock: SimClock, rng: random.Random) -> None:
        self.store = store
        self.clock = clock
        self._rng = rng

    def shut_down(self, nodes: Iterable[Obj], kind: str, seconds: float) -> int:
        """Shut ``nodes`` down for ``seconds`` simulated seconds; returns the Pods ended."""
        if kind not in DISRUPTION_KINDS:
            raise ValueError(f"unknown disruption {kind!r}")
        names = set()
        until = format_timestamp(self.clock.time() + max(0.0, seconds))
        now = timestamp(self.clock)
        for node in nodes:
            names.add(name_of(node))
            status: Obj = dict(node.get("status") or {})
            status["conditions"] = condition(
                status.get("conditions"), "Ready", False, "KubeletNotReady",
                NODE_SHUTTING_DOWN, now, extra={"lastHeartbeatTime": now})
            patch_quietly(self.store, NODES, node, {
                "metadata": {"annotations": {ANNOTATION_DISRUPTION: kind,
                                             ANNOTATION_DOWN_UNTIL: until}}})
            patch_quietly(self.store, NODES, node, {"status": status}, subresource="status")
        ended = 0
        for pod in self.store.list(*PODS):
            if (pod.get("spec") or {}).get("nodeName") in names and not pod_terminated(pod):
                self._end_pod(pod, now)
                ended += 1
        return ended

    def _end_pod(self, pod: Obj, now: str) -> None:
        status: Obj = dict(pod.get("status") or {})
        conditions = condition(status.get("conditions"), "DisruptionTarget", True,
                               TERMINATION_BY_KUBELET, SHUTDOWN_MESSAGE, now)
        for kind in ("Ready", "ContainersReady"):
            conditions = condition(conditions, kind, False, "PodFailed", "", now)
        statuses = []
        for entry in status.get("containerStatuses") or []:
            entry = dict(entry)
            started = ((entry.get("state") or {}).get("running") or {}).get("startedAt")
            if "terminated" not in (entry.get("state") or {}):
                entry["state"] = {"terminated": {
                    "exitCode": SIGTERM_EXIT_CODE, "reason": "Error",
                    "startedAt": started, "finishedAt": now}}
                if started:
                    self.store.pod_logs.write(
                        uid_of(pod), str(entry.get("name", "")),
                        int(entry.get("restartCount") or 0), now,
                        f"sandbox runtime: SIGTERM (node shutdown), exiting with code "
                        f"{SIGTERM_EXIT_CODE}")
            entry["ready"] = False
            entry["started"] = False
            statuses.append(entry)
        status.update(phase="Failed", reason=SHUTDOWN_REASON, message=SHUTDOWN_MESSAGE,
                      conditions=conditions)
        if statuses:
            status["containerStatuses"] = statuses
        patch_quietly(self.store, PODS, pod, {"status": status}, subresource="status")

    def bring_back(self) -> float | None:
        """Bring back the Nodes whose disruption is over; returns when the next one is
        due (simulated epoch seconds), if any Node is still down."""
        now = self.clock.time()
        next_due: float | None = None
        for node in self.store.list(*NODES):
            annotations = annotations_of(node)
            if ANNOTATION_DOWN_UNTIL not in annotations:
                continue
            due = parse_timestamp(annotations[ANNOTATION_DOWN_UNTIL]) or now
            if due > now:
                next_due = due if next_due is None else min(next_due, due)
                continue
            self._come_back(node)
        return next_due

    def _come_back(self, node: Obj) -> None:
        """The recreated VM's kubelet registers again: Ready, a new boot."""
        now = timestamp(self.clock)
        status: Obj = dict(node.get("status") or {})
        status["conditions"] = condition(
            status.get("conditions"), "Ready", True, "KubeletReady",
            "kubelet is posting ready status", now, extra={"lastHeartbeatTime": now})
        status["nodeInfo"] = {**(status.get("nodeInfo") or {}),
                              "bootID": str(uuid.UUID(int=self._rng.getrandbits(128)))}
        patch_quietly(self.store, NODES, node, {"metadata": {"annotations": {
            ANNOTATION_DISRUPTION: None, ANNOTATION_DOWN_UNTIL: None}}})
        patch_quietly(self.store, NODES, node, {"status": status}, subresource="status")
