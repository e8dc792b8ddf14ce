"""The process kubelet: pods whose containers run as real local processes.

A bound pod with a container whose image matches a registered launcher
(:mod:`sandbox.cluster.containers`) is run here instead of by the simulated
:class:`~sandbox.cluster.runtime.PodRuntime`:

* **Start.** Each containerPort gets a free loopback host port (kept for the
  pod's life, published as the pod annotation ``sandbox.accelops.dev/host-ports``
  ``{"8000": 40123}``), then the launcher starts the process. At most
  ``max_processes`` processes run at once (terminating ones included); a pod
  beyond that stays Pending, its container waiting in ``ContainerCreating`` with a
  message saying so.
* **Probes** run on real time in a small worker pool fed by one prober thread
  (:mod:`sandbox.cluster.prober`; :mod:`sandbox.cluster.probes` says which
  timings the time scale shortens); the pod's ``Ready`` and
  ``ContainersReady`` conditions and ``containerStatuses[].ready`` follow the
  readiness probe (ready on start without one). A failing liveness or startup
  probe gets the process stopped and restarted.
* **Restarts** follow ``restartPolicy`` (``Always`` for Deployments) with the
  kubelet's back-off: the first restart is immediate, then 10 s, 20 s, ... up
  to 300 s (times the time scale), during which the container waits in
  ``CrashLoopBackOff``; ``lastState.terminated`` keeps the exit code, reason
  ``Error`` and — with ``terminationMessagePolicy: FallbackToLogsOnError``, as on
  a cluster — the last 80 log lines (at most 2048 bytes) as its message.
* **Termination.** Process pods carry the finalizer
  ``sandbox.accelops.dev/container-process``, so a deleted pod stays visible as
  Terminating (and out of Service endpoints) while its preStop hook runs and
  the process gets SIGTERM with the rest of ``terminationGracePeriodSeconds``
  (scaled, at least 1 s); then the finalizer goes and the pod with it. Requests
  already in flight to it complete.

Store writes happen on the simulation's pass thread (:meth:`reconcile`); the
prober thread and the stop threads only record results and call ``notify`` to
wake a pass, which keeps the controllers single-threaded. ``inline`` runs
probes and stops on the caller's thread instead (with a ``monotonic`` clock of
their own, tests move real time themselves and call ``probes.tick()``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sandbox.cluster.containers import Launcher, launcher_for
from sandbox.cluster.containerstate import ContainerState, go_duration, pre_stop
from sandbox.cluster.objects import (
    ANNOTATION_HOST_PORTS,
    PODS,
    Obj,
    deleting,
    meta,
    name_of,
    namespace_of,
    pod_terminated,
    timestamp,
    uid_of,
)
from sandbox.cluster.podstatus import pod_status
from sandbox.cluster.prober import ProberLoop
from sandbox.cluster.probes import Prober, probe_once
from sandbox.common.clock import SimClock
from sandbox.common.httpserver import free_port
from sandbox.kubeapi import ApiError, ObjectStore

__all__ = ["FINALIZER", "ProcessKubelet"]

log = logging.getLogger(__name__)

FINALIZER = "sandbox.accelops.dev/container-process"
BACKOFF_INITIAL = 10.0  # spec seconds, as the kubelet's crash back-off
BACKOFF_MAX = 300.0
DEFAULT_GRACE = 30.0
MIN_GRACE = 1.0  # real seconds a stopping process always gets
MESSAGE_LINES, MESSAGE_BYTES = 80, 2048


@dataclass(eq=False)
class _Pod:
    uid: str
    namespace: str
    name: str
    containers: dict[str, ContainerState]
    terminating: bool = False
    stopped: threading.Event = field(default_factory=threading.Event)


class ProcessKubelet:
    """Runs, probes, restarts and stops the process containers of bound pods."""

    def __init__(
        self,
        store: ObjectStore,
        clock: SimClock,
        *,
        launchers: Mapping[str, Launcher],
        max_processes: int = 3,
        time_scale: float = 0.2,
        prober: Prober = probe_once,
        notify: Callable[[], None] = lambda: None,
        monotonic: Callable[[], float] = time.monotonic,
        inline: bool = False,
    ) -> None:
        self.store = store
        self.clock = clock
        self.launchers = dict(launchers)
        self.max_processes = max(1, max_processes)
        self.time_scale = max(0.0, time_scale)
        self._prober = prober
        self._notify = notify
        self._monotonic = monotonic
        self._inline = inline
        self._pods: dict[str, _Pod] = {}
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self._stoppers: list[threading.Thread] = []
        self.probes = ProberLoop(self._lock, self._probed,
                                 lambda: self.live_processes() < self.max_processes,
                                 prober=prober, notify=notify, monotonic=monotonic,
                                 inline=inline)

    # ------------------------------------------------------------------ queries

    def handles(self, pod: Mapping[str, Any]) -> bool:
        """Whether a container of ``pod`` runs as a process (its image has a launcher)."""
        if not self.launchers:
            return False
        return any(launcher_for(str(c.get("image", "")), self.launchers) is not None
                   for c in (pod.get("spec") or {}).get("containers") or [])

    def _probed(self) -> Iterator[ContainerState]:
        for state in self._pods.values():
            if not state.terminating:
                yield from state.containers.values()

    def live_processes(self) -> int:
        """Processes running now, those of terminating pods included."""
        with self._lock:
            return sum(1 for pod in self._pods.values() for c in pod.containers.values()
                       if c.process is not None and c.process.alive())

    # ------------------------------------------------------------------ the pass

    def reconcile(self) -> None:
        """Start, restart, stop and report process pods (on the pass thread)."""
        pods: list[Obj] = []
        for pod in self.store.list(*PODS):
            if self.handles(pod):
                pods.append(pod)
            elif deleting(pod) and uid_of(pod) not in self._pods:
                self._release(pod)  # held by an earlier run that had a launcher for it
        pods.sort(key=lambda p: (str(meta(p).get("creationTimestamp", "")), name_of(p)))
        seen: set[str] = set()
        with self._lock:
            for pod in pods:
                seen.add(uid_of(pod))
                self._reconcile_pod(pod)
            for uid, state in list(self._pods.items()):
                if uid not in seen:
                    self._forget_or_stop(state)

    def _reconcile_pod(self, pod: Obj) -> None:
        uid = uid_of(pod)
        state = self._pods.get(uid)
        if deleting(pod) or pod_terminated(pod):
            if state is None or state.stopped.is_set():
                self._pods.pop(uid, None)
                if deleting(pod):
                    self._release(pod)
            elif not state.terminating:
                self._terminate(state, pod)
            return
        if not (pod.get("spec") or {}).get("nodeName"):
            return
        if state is None:
            state = self._admit(pod)
            if state is None:
                return
        self._sync(pod, state)
        status = pod_status(pod, list(state.containers.values()), timestamp(self.clock))
        if status != (pod.get("status") or {}):
            self._patch(pod, {"status": status}, status_only=True)

    def _forget_or_stop(self, state: _Pod) -> None:
        if state.stopped.is_set():
            del self._pods[state.uid]
        elif not state.terminating:
            self._terminate(state, None)

    # ------------------------------------------------------------------ admission

    def _admit(self, pod: Obj) -> _Pod | None:
        """Allocate host ports and hold the pod with the finalizer until it is stopped."""
        spec: Obj = pod.get("spec") or {}
        known = _host_ports(pod)
        containers: dict[str, ContainerState] = {}
        ports: dict[str, int] = {}
        previous = {str(s.get("name")): s for s in
                    (pod.get("status") or {}).get("containerStatuses") or []}
        for container in spec.get("containers") or []:
            launcher = launcher_for(str(container.get("image", "")), self.launchers)
            entry = ContainerState(str(container.get("name", "")), dict(container), launcher)
            for declared in container.get("ports") or [] if launcher else []:
                if declared.get("containerPort") is None:
                    continue
                port = int(declared["containerPort"])
                entry.ports[port] = known.get(port) or free_port()
                ports[str(port)] = entry.ports[port]
            before = previous.get(entry.name) or {}  # a restarted kubelet goes on counting
            entry.restart_count = int(before.get("restartCount") or 0)
            entry.starts = 1 if before.get("containerID") else 0
            containers[entry.name] = entry
        finalizers = list(meta(pod).get("finalizers") or [])
        if FINALIZER not in finalizers:
            finalizers.append(FINALIZER)
        body = {"metadata": {"finalizers": finalizers,
                             "annotations": {ANNOTATION_HOST_PORTS: json.dumps(ports)}}}
        if not self._patch(pod, body):
            return None
        admitted = _Pod(uid_of(pod), namespace_of(pod), name_of(pod), containers)
        self._pods[admitted.uid] = admitted
        return admitted

    def _release(self, pod: Obj) -> None:
        finalizers = [f for f in meta(pod).get("finalizers") or [] if f != FINALIZER]
        if finalizers != list(meta(pod).get("finalizers") or []):
            self._patch(pod, {"metadata": {"finalizers": finalizers}})

    # ------------------------------------------------------------------ containers

    def _sync(self, pod: Obj, state: _Pod) -> None:
        now = self._monotonic()
        for container in state.containers.values():
            if container.simulated or container.final is not None:
                continue
            process = container.process
            if process is not None:
                if container.kill_requested and not container.killing:
                    container.killing = True
                    self._spawn(self._kill, container, _grace(pod, self.time_scale))
                if process.alive():
                    continue
                self._exited(pod, container, now)
                if container.final is not None:
                    continue
            if container.restart_at is not None and now < container.restart_at:
                continue
            self._start(pod, container, now)

    def _start(self, pod: Obj, container: ContainerState, now: float) -> None:
        running = self.live_processes()
        if running >= self.max_processes:
            container.restart_at = None
            container.waiting = ("ContainerCreating",
                                 f"waiting for a process slot: {running} of at most "
                                 f"{self.max_processes} sandbox processes are running")
            return
        assert container.launcher is not None
        try:
            process = container.launcher(pod, container.spec, dict(container.ports))
        except Exception as exc:
            log.exception("launching %s of pod %s/%s failed", container.name,
                          namespace_of(pod), name_of(pod))
            container.waiting = ("RunContainerError", f"{type(exc).__name__}: {exc}")
            container.restart_at = now + self._next_backoff(container, now)
            return
        container.begin_run(process, uid_of(pod), timestamp(self.clock), now, self.time_scale)
        self.probes.ensure_running()

    def _next_backoff(self, container: ContainerState, now: float) -> float:
        """The delay before this restart; doubles the next one (reset after a long run)."""
        ceiling = BACKOFF_MAX * self.time_scale
        if container.starts and now - container.ran_since >= 2 * ceiling:
            container.backoff = 0.0
        delay = container.backoff
        container.backoff = min(ceiling, max(BACKOFF_INITIAL * self.time_scale, 2 * delay))
        return delay

    def _exited(self, pod: Obj, container: ContainerState, now: float) -> None:
        assert container.process is not None
        code = container.process.exit_code()
        code = 1 if code is None else code
        terminated: Obj = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": container.started_at,
            "finishedAt": timestamp(self.clock),
            "containerID": container.container_id,
        }
        if code != 0 and container.spec.get("terminationMessagePolicy") \
                == "FallbackToLogsOnError":
            tail = container.process.log_tail(MESSAGE_LINES)
            if tail:
                terminated["message"] = tail.encode()[-MESSAGE_BYTES:].decode(errors="replace")
        container.process = None
        container.startup = container.readiness = container.liveness = None
        container.killing = container.kill_requested = False
        policy = (pod.get("spec") or {}).get("restartPolicy") or "Always"
        if not (policy == "Always" or (policy == "OnFailure" and code != 0)):
            container.final = terminated
            return
        container.last_terminated = terminated
        delay = self._next_backoff(container, now)
        container.restart_at = now + delay
        container.waiting = None
        if delay > 0:
            container.waiting = (
                "CrashLoopBackOff",
                f"back-off {go_duration(delay / (self.time_scale or 1))} restarting failed "
                f"container={container.name} pod={name_of(pod)}_{namespace_of(pod)}"
                f"({uid_of(pod)})")

    # ------------------------------------------------------------------ stopping

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        if self._inline:
            target(*args)
            return
        thread = threading.Thread(target=target, args=args, name="sandbox-container-stop",
                                  daemon=True)
        self._stoppers = [t for t in self._stoppers if t.is_alive()] + [thread]
        thread.start()

    def _kill(self, container: ContainerState, grace: float) -> None:
        process = container.process
        if process is not None:
            process.stop(grace)
        self._notify()

    def _terminate(self, state: _Pod, pod: Obj | None) -> None:
        state.terminating = True
        grace = _grace(pod, self.time_scale) if pod is not None else MIN_GRACE
        self._spawn(self._stop_pod, state, grace)

    def _stop_pod(self, state: _Pod, grace: float) -> None:
        """preStop hooks, then SIGTERM with what is left of the grace period."""
        deadline = self._monotonic() + grace
        running = [c for c in state.containers.values()
                   if c.process is not None and c.process.alive()]
        for container in running:
            hook = pre_stop(container.spec)
            if hook is None or self._closed.is_set():
                continue
            if hook.http is not None:
                self._prober(hook.http, container.host_port(hook.http))
            if hook.sleep:
                self._closed.wait(max(0.0, min(hook.sleep * self.time_scale,
                                               deadline - self._monotonic())))
        for container in running:
            if container.process is not None:
                container.process.stop(max(MIN_GRACE, deadline - self._monotonic()))
        state.stopped.set()
        self._notify()

    def close(self) -> None:
        """Stop the prober and every process (1 s grace each, in parallel) and forget
        them: a later :meth:`reconcile` starts the pods' processes afresh, as a
        restarted kubelet does. Idempotent."""
        self._closed.set()
        self.probes.close()
        with self._lock:
            processes = [c.process for pod in self._pods.values()
                         for c in pod.containers.values() if c.process is not None]
            self._pods.clear()
        stoppers = [threading.Thread(target=p.stop, args=(MIN_GRACE,), daemon=True)
                    for p in processes]
        for thread in stoppers:
            thread.start()
        for thread in stoppers + self._stoppers:
            thread.join(timeout=15)
        self._stoppers.clear()
        self._closed = threading.Event()

    # ------------------------------------------------------------------ writes

    def _patch(self, pod: Obj, body: Obj, *, status_only: bool = False) -> bool:
        try:
            self.store.patch(*PODS, name_of(pod), body, namespace=namespace_of(pod),
                             subresource="status" if status_only else "")
        except ApiError as exc:
            if exc.code in (404, 409, 422):
                return False
            raise
        return True


def _grace(pod: Mapping[str, Any] | None, scale: float) -> float:
    value = ((pod or {}).get("spec") or {}).get("terminationGracePeriodSeconds")
    try:
        seconds = float(value) if value is not None else DEFAULT_GRACE
    except (TypeError, ValueError):
        seconds = DEFAULT_GRACE
    return max(MIN_GRACE, seconds * scale)


def _host_ports(pod: Mapping[str, Any]) -> dict[int, int]:
    """The host ports a pod was given before (a restarted sandbox keeps them)."""
    raw = (meta(pod).get("annotations") or {}).get(ANNOTATION_HOST_PORTS)
    try:
        loaded = json.loads(raw) if raw else {}
        return {int(k): int(v) for k, v in loaded.items()}
    except (TypeError, ValueError, AttributeError):
        return {}
