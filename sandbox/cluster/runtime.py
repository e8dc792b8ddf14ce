"""A kubelet stand-in: running pods finish after a simulated duration.

How a pod's program behaves is read from its first container's environment:

* ``ACCELOPS_SANDBOX_RUN_SECONDS`` — simulated seconds the containers run
  (default 300);
* ``ACCELOPS_SANDBOX_OUTCOME`` — ``succeed`` (default, exit code 0) or ``fail``
  (exit code 1);
* ``ACCELOPS_SANDBOX_MESSAGE`` — what the program says as it exits: the last line
  of its log and the container's ``state.terminated.message`` (what a program
  writes to its termination-message file, ``/dev/termination-log``).

Each container instance writes a log (served by the ``pods/{name}/log``
subresource, :mod:`sandbox.kubeapi.podlogs`): a line when it starts, a line when
it exits with its exit code, then the message.

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
    uid_of,
)
from sandbox.common.clock import SimClock
from sandbox.kubeapi import ObjectStore

__all__ = ["DEFAULT_RUN_SECONDS", "ENV_MESSAGE", "PodRuntime", "behaviour", "exit_message"]

DEFAULT_RUN_SECONDS = 300.0
# Substrings of images whose programs serve until stopped.
SERVER_IMAGES = ("sax-model-server",)
ENV_MESSAGE = "ACCELOPS_SANDBOX_MESSAGE"


def _env(pod: Mapping[str, Any]) -> dict[str, Any]:
    containers = (pod.get("spec") or {}).get("containers") or []
    return {str(e.get("name")): e.get("value") for e in (containers[0].get("env") or [])} \
        if containers else {}


def behaviour(pod: Mapping[str, Any]) -> tuple[float | None, bool]:
    """(simulated run seconds or None: until deleted, succeeds?) from the first
    container's environment."""
    containers = (pod.get("spec") or {}).get("containers") or []
    env = _env(pod)
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


def exit_message(pod: Mapping[str, Any]) -> str | None:
    """What the pod's program says as it exits (``ACCELOPS_SANDBOX_MESSAGE``), if anything."""
    message = str(_env(pod).get(ENV_MESSAGE) or "").strip()
    return message or None


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
        pods = self.store.list(*PODS)
        self.store.pod_logs.retain(uid_of(pod) for pod in pods)
        for pod in pods:
            status = pod.get("status") or {}
            if status.get("phase") != "Running" or deleting(pod) \
                    or not (pod.get("spec") or {}).get("nodeName") or self._skip(pod):
                continue
            self._log_started(pod)
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

    def _log_started(self, pod: Obj) -> None:
        """Write the start line of each container instance not logged yet."""
        logs, uid = self.store.pod_logs, uid_of(pod)
        for entry in (pod.get("status") or {}).get("containerStatuses") or []:
            started = ((entry.get("state") or {}).get("running") or {}).get("startedAt")
            name, restart = str(entry.get("name", "")), int(entry.get("restartCount") or 0)
            if started and not logs.has(uid, name, restart):
                image = str(entry.get("image") or "")
                logs.write(uid, name, restart, str(started),
                           f"sandbox runtime: container {name} started"
                           + (f" (image {image})" if image else "")
                           + (f", restart {restart}" if restart else ""))

    def _exit(self, pod: Obj, succeeds: bool) -> None:
        now = timestamp(self.clock)
        policy = (pod.get("spec") or {}).get("restartPolicy") or "Always"
        status: Obj = dict(pod.get("status") or {})
        exit_code = 0 if succeeds else 1
        restart = policy == "Always" or (policy == "OnFailure" and not succeeds)
        message = exit_message(pod)
        statuses = []
        for entry in status.get("containerStatuses") or []:
            entry = dict(entry)
            started = ((entry.get("state") or {}).get("running") or {}).get("startedAt")
            terminated = {"exitCode": exit_code, "reason": "Completed" if succeeds else "Error",
                          "startedAt": started, "finishedAt": now}
            if message:
                terminated["message"] = message
            self.store.pod_logs.write(
                uid_of(pod), str(entry.get("name", "")), int(entry.get("restartCount") or 0),
                now, f"sandbox runtime: exiting with code {exit_code}"
                + (f"\n{message}" if message else ""))
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
