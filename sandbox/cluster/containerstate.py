"""What the process kubelet remembers about one container, and how it reports it.

Kept apart from the kubelet's lifecycle (:mod:`sandbox.cluster.kubelet`) so the
shape of ``status.containerStatuses[]`` — ``state`` / ``lastState`` /
``restartCount`` / ``ready`` / ``started`` — can be read in one place. It follows
the kubelet's own reporting: ``waiting`` (``ContainerCreating`` before the first
start, ``CrashLoopBackOff`` while a crashed container waits out its back-off,
with the kubelet's message ``back-off 20s restarting failed container=...``),
``running`` with ``startedAt``, ``terminated`` with ``exitCode`` / ``reason``
(``Completed`` or ``Error``) / ``message`` / ``startedAt`` / ``finishedAt``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sandbox.cluster.containers import ContainerProcess, Launcher
from sandbox.cluster.objects import Obj, short_digest
from sandbox.cluster.probes import ProbeSpec, ProbeTracker, container_port, probe_spec

__all__ = ["ContainerState", "PreStop", "go_duration", "pre_stop"]

_SLEEP = re.compile(r"(?:^|[\s;&|])sleep\s+([0-9]+(?:\.[0-9]+)?)")


def go_duration(seconds: float) -> str:
    """Whole seconds the way Go prints a Duration (``10s``, ``1m20s``, ``5m0s``)."""
    total = round(seconds)
    minutes, rest = divmod(total, 60)
    return f"{minutes}m{rest}s" if minutes else f"{rest}s"


@dataclass(frozen=True, slots=True)
class PreStop:
    """A container's ``lifecycle.preStop`` as the sandbox can run it."""

    sleep: float = 0.0  # spec seconds
    http: ProbeSpec | None = None


def pre_stop(container: Mapping[str, Any]) -> PreStop | None:
    """``sleep`` actions, ``exec`` commands that sleep (``sleep 5``, ``sh -c "sleep 5"``)
    and ``httpGet``; other ``exec`` commands are not run (the container is a host
    process, there is nothing to exec into)."""
    hook = ((container.get("lifecycle") or {}).get("preStop")) or {}
    if hook.get("sleep") is not None:
        try:
            return PreStop(sleep=max(0.0, float(hook["sleep"].get("seconds") or 0)))
        except (TypeError, ValueError):
            return None
    if hook.get("exec") is not None:
        command = " ".join(str(part) for part in hook["exec"].get("command") or [])
        match = _SLEEP.search(command)
        return PreStop(sleep=float(match.group(1))) if match else None
    if hook.get("httpGet") is not None:
        return PreStop(http=probe_spec({"httpGet": hook["httpGet"], "timeoutSeconds": 30},
                                       container, 1.0))
    return None


@dataclass(eq=False)
class ContainerState:
    """One container of a pod the process kubelet runs.

    ``launcher`` None means the container is not a process (its image matches no
    launcher): it is reported running and ready, as the simulated kubelet does.
    """

    name: str
    spec: Obj
    launcher: Launcher | None
    restart_count: int = 0
    process: ContainerProcess | None = None
    starts: int = 0  # processes started for this container so far
    started_at: str | None = None  # simulated timestamp of the current run
    ran_since: float = 0.0  # real (monotonic) start of the current run
    container_id: str = ""
    last_terminated: Obj | None = None
    final: Obj | None = None  # terminated for good (restartPolicy Never / OnFailure)
    waiting: tuple[str, str] | None = ("ContainerCreating", "")
    backoff: float = 0.0  # real seconds the next crash waits before its restart
    restart_at: float | None = None  # real time the crashed container starts again
    exit_seen: bool = False
    kill_requested: bool = False
    killing: bool = False
    startup: ProbeTracker | None = None
    readiness: ProbeTracker | None = None
    liveness: ProbeTracker | None = None
    ports: dict[int, int] = field(default_factory=dict)  # containerPort -> hostPort

    @property
    def simulated(self) -> bool:
        return self.launcher is None

    @property
    def started(self) -> bool:
        if self.simulated:
            return True
        return self.process is not None and (self.startup is None or self.startup.healthy)

    @property
    def ready(self) -> bool:
        if self.simulated:
            return True
        return (self.started and not self.killing and not self.kill_requested
                and (self.readiness is None or self.readiness.healthy))

    def begin_run(self, process: ContainerProcess, pod_uid: str, now_sim: str,
                  now_real: float, scale: float) -> None:
        """A new process runs: fresh probes, the restart counted."""
        if self.starts > 0:
            self.restart_count += 1
        self.starts += 1
        self.process = process
        self.started_at = now_sim
        self.ran_since = now_real
        self.container_id = "containerd://" + short_digest(pod_uid, self.name,
                                                            str(self.starts), length=64)
        self.waiting = None
        self.restart_at = None
        self.exit_seen = self.kill_requested = self.killing = False
        # Probes that kill race the process's real start-up: they keep real time.
        startup = probe_spec(self.spec.get("startupProbe"), self.spec, 1.0)
        readiness = probe_spec(self.spec.get("readinessProbe"), self.spec, scale)
        liveness = probe_spec(self.spec.get("livenessProbe"), self.spec, 1.0)
        self.startup = ProbeTracker.starting(startup, now_real, healthy=False) \
            if startup else None
        self.readiness = ProbeTracker.starting(readiness, now_real, healthy=False) \
            if readiness else None
        self.liveness = ProbeTracker.starting(liveness, now_real, healthy=True) \
            if liveness else None

    def active_trackers(self) -> list[ProbeTracker]:
        """The probes that run now: the startup probe until it passed, then the others."""
        if self.process is None or self.killing or self.kill_requested:
            return []
        if self.startup is not None and not self.startup.healthy:
            return [self.startup]
        return [t for t in (self.readiness, self.liveness) if t is not None]

    def host_port(self, spec: ProbeSpec) -> int | None:
        return self.ports.get(spec.port) if spec.port is not None else None

    def service_port(self, port: Any) -> int | None:
        """The host port behind a Service's ``targetPort`` (number or name), if any."""
        target = container_port(port, self.spec)
        return self.ports.get(target) if target is not None else None

    def status(self, pod_start: str | None) -> Obj:
        """This container's entry of ``status.containerStatuses``."""
        image = str(self.spec.get("image", ""))
        entry: Obj = {
            "name": self.name,
            "image": image,
            "imageID": f"{image}@sha256:{short_digest(image, length=64)}",
            "ready": self.ready,
            "started": self.started,
            "restartCount": self.restart_count,
        }
        if self.simulated:
            entry["containerID"] = "containerd://" + short_digest(self.name, image, length=64)
            entry["state"] = {"running": {"startedAt": pod_start}}
            return entry
        if self.container_id:
            entry["containerID"] = self.container_id
        if self.final is not None:
            entry["state"] = {"terminated": dict(self.final)}
        elif self.process is not None:
            entry["state"] = {"running": {"startedAt": self.started_at}}
        else:
            reason, message = self.waiting or ("ContainerCreating", "")
            waiting: Obj = {"reason": reason}
            if message:
                waiting["message"] = message
            entry["state"] = {"waiting": waiting}
        entry["lastState"] = {"terminated": dict(self.last_terminated)} \
            if self.last_terminated else {}
        return entry
