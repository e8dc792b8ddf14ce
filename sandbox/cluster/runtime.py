"""A kubelet stand-in: running pods finish after a simulated duration.

How a pod's program behaves is read from its first container's environment:

* ``ACCELOPS_SANDBOX_RUN_SECONDS`` — simulated seconds the containers run
  (default 300);
* ``ACCELOPS_SANDBOX_OUTCOME`` — ``succeed`` (default, exit code 0) or ``fail``
  (exit code 1).

With ``restartPolicy: Never`` the pod ends Succeeded or Failed, with terminated
container statuses; ``OnFailure`` restarts a failed container in place and
``Always`` restarts any exited one (``restartCount`` + 1, ``lastState``).

Pods of ReplicaSets are servers: without ``ACCELOPS_SANDBOX_RUN_SECONDS`` they
run until deleted; so do pods of the server images in ``SERVER_IMAGES`` (Saxml model
servers run as a JobSet on their TPU slice, and serve until their version is retired).
Pods whose containers run as real processes (the ``skip``
predicate, :mod:`sandbox.cluster.kubelet`) are not this runtime's at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sandbox.clock import SimClock
from sandbox.cluster.objects import (
    ENV_OUTCOME,
    ENV_RUN_SECONDS,
    PODS,
    Obj,
    condition,
    controller_uid,
    deleting,
    parse_timestamp,
    patch_quietly,
    timestamp,
)
from sandbox.kubeapi import ObjectStore

__all__ = ["DEFAULT_RUN_SECONDS", "PodRuntime", "behaviour"]

DEFAULT_RUN_SECONDS = 300.0
# Substrings of images whose programs serve until stopped.
SERVER_IMAGES = ("sax-model-server",)


def behaviour(pod: Mapping[str, Any]) -> tuple[float | None, bool]:
    """(simulated run seconds or None: until deleted, succeeds?) from the first
    container's environment."""
    containers = (pod.get("spec") or {}).get("containers") or []
    env = {str(e.get("name")): e.get("value") for e in (containers[0].get("env") or [])} \
        if containers else {}
    succeeds = str(env.get(ENV_OUTCOME) or "succeed").strip().lower() != "fail"
    server = controller_uid(pod, "ReplicaSet") is not None or any(
        marker in str(containers[0].get("image", "")) for marker in SERVER_IMAGES) \
        if containers else False
    if not env.get(ENV_RUN_SECONDS) and server:
        return None, succeeds
    try:
        seconds = max(0.0, float(env.get(ENV_RUN_SECONDS) or DEFAULT_RUN_SECONDS))
    except (TypeError, ValueError):
        seconds = DEFAULT_RUN_SECONDS
    return seconds, succeeds


def _started_at(pod: Mapping[str, Any]) -> float | None:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    if statuses:
        running = (statuses[0].get("state") or {}).get("running") or {}
        started = parse_timestamp(running.get("startedAt"))
        if started is not None:
            return started
    return parse_timestamp((pod.get("status") or {}).get("startTime"))


class PodRuntime:
    """Ends (or restarts) running containers when their simulated run time is over."""

    def __init__(self, store: ObjectStore, clock: SimClock, *,
                 skip: Callable[[Obj], bool] | None = None) -> None:
        self.store = store
        self.clock = clock
        self._skip = skip or (lambda pod: False)

    def reconcile(self) -> float | None:
        """Finish what is due; returns the simulated time the next pod is due, if any."""
        now = self.clock.time()
        next_due: float | None = None
        for pod in self.store.list(*PODS):
            status = pod.get("status") or {}
            if status.get("phase") != "Running" or deleting(pod) \
                    or not (pod.get("spec") or {}).get("nodeName") or self._skip(pod):
                continue
            started = _started_at(pod)
            seconds, succeeds = behaviour(pod)
            if started is None or seconds is None:
                continue
            due = started + seconds
            if due <= now:
                self._exit(pod, succeeds)
            elif next_due is None or due < next_due:
                next_due = due
        return next_due

    def _exit(self, pod: Obj, succeeds: bool) -> None:
        now = timestamp(self.clock)
        policy = (pod.get("spec") or {}).get("restartPolicy") or "Always"
        status: Obj = dict(pod.get("status") or {})
        exit_code = 0 if succeeds else 1
        restart = policy == "Always" or (policy == "OnFailure" and not succeeds)
        statuses = []
        for entry in status.get("containerStatuses") or []:
            entry = dict(entry)
            started = ((entry.get("state") or {}).get("running") or {}).get("startedAt")
            terminated = {"exitCode": exit_code, "reason": "Completed" if succeeds else "Error",
                          "startedAt": started, "finishedAt": now}
            if restart:
                entry["lastState"] = {"terminated": terminated}
                entry["state"] = {"running": {"startedAt": now}}
                entry["restartCount"] = int(entry.get("restartCount") or 0) + 1
            else:
                entry["state"] = {"terminated": terminated}
                entry["ready"] = False
                entry["started"] = False
            statuses.append(entry)
        status["containerStatuses"] = statuses
        if not restart:
            reason = "PodCompleted" if succeeds else "PodFailed"
            conditions = condition(status.get("conditions"), "Ready", False, reason, "", now)
            status["conditions"] = condition(conditions, "ContainersReady", False, reason, "",
                                             now)
            status["phase"] = "Succeeded" if succeeds else "Failed"
        patch_quietly(self.store, PODS, pod, {"status": status}, subresource="status")
