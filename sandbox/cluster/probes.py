"""Container probes (startup, readiness, liveness) against real processes.

A probe here is what the kubelet does: an HTTP GET (``httpGet``, success is a
status from 200 to 399) or a TCP connect (``tcpSocket``, also used for ``grpc``
probes) against the container's port, which for a process container is the
host port the kubelet allocated. ``exec`` probes cannot run inside a container
that is a host process, so they succeed while the process is alive.

Timing. Processes are real, so probes run on real time, not on the simulated
clock. A readiness probe's ``initialDelaySeconds`` and ``periodSeconds`` are
multiplied by the kubelet's time scale (real seconds per spec second, e.g. 0.2:
the default ``periodSeconds: 10`` probes every 2 s), so a pod is seen ready soon
after its process is. Startup and liveness probes are not scaled: they decide
when a process gets killed, which races against how long the real process
takes to start, and a spec written for a cluster must not kill here a server
that would survive there. ``timeoutSeconds`` is never scaled (it bounds how
long a real process may take to answer); ``successThreshold`` and
``failureThreshold`` are counts and apply as written.
"""

from __future__ import annotations

import http.client
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "MIN_PERIOD",
    "ProbeSpec",
    "ProbeTracker",
    "Prober",
    "container_port",
    "probe_once",
    "probe_spec",
]

MIN_PERIOD = 0.05  # real seconds: never probe more often than this
ProbeAction = Literal["http", "tcp", "exec"]


@dataclass(frozen=True, slots=True)
class ProbeSpec:
    """One probe of one container, with its timings already in real seconds."""

    action: ProbeAction
    port: int | None  # the container port to probe (None for exec)
    path: str
    headers: tuple[tuple[str, str], ...]
    initial_delay: float
    period: float
    timeout: float
    success_threshold: int
    failure_threshold: int


# (probe, host port) -> success
Prober = Callable[[ProbeSpec, "int | None"], bool]


def container_port(port: Any, container: Mapping[str, Any]) -> int | None:
    """A probe's or Service's ``port`` (number or port name) as a containerPort."""
    if isinstance(port, int) and not isinstance(port, bool):
        return port
    if isinstance(port, str):
        if port.isdigit():
            return int(port)
        for entry in container.get("ports") or []:
            if entry.get("name") == port and entry.get("containerPort") is not None:
                return int(entry["containerPort"])
    return None


def _number(probe: Mapping[str, Any], key: str, default: float) -> float:
    value = probe.get(key)
    try:
        return float(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def probe_spec(probe: Mapping[str, Any] | None, container: Mapping[str, Any],
               scale: float) -> ProbeSpec | None:
    """The probe as the kubelet runs it (API defaults applied), or None when absent."""
    if not probe:
        return None
    action: ProbeAction
    port: int | None = None
    path = "/"
    headers: tuple[tuple[str, str], ...] = ()
    if probe.get("httpGet") is not None:
        get = probe["httpGet"]
        action, port = "http", container_port(get.get("port"), container)
        path = str(get.get("path") or "/")
        headers = tuple((str(h.get("name", "")), str(h.get("value", "")))
                        for h in get.get("httpHeaders") or [])
    elif probe.get("tcpSocket") is not None or probe.get("grpc") is not None:
        target = probe.get("tcpSocket") or probe.get("grpc") or {}
        action, port = "tcp", container_port(target.get("port"), container)
    else:
        action = "exec"
    return ProbeSpec(
        action=action,
        port=port,
        path=path if path.startswith("/") else "/" + path,
        headers=headers,
        initial_delay=max(0.0, _number(probe, "initialDelaySeconds", 0.0) * scale),
        period=max(MIN_PERIOD, _number(probe, "periodSeconds", 10.0) * scale),
        timeout=max(0.1, _number(probe, "timeoutSeconds", 1.0)),
        success_threshold=max(1, int(_number(probe, "successThreshold", 1.0))),
        failure_threshold=max(1, int(_number(probe, "failureThreshold", 3.0))),
    )


def probe_once(spec: ProbeSpec, host_port: int | None) -> bool:
    """Run the probe once against 127.0.0.1:``host_port``; True on success."""
    if spec.action == "exec":
        return True
    if host_port is None:
        return False
    if spec.action == "tcp":
        try:
            with socket.create_connection(("127.0.0.1", host_port), timeout=spec.timeout):
                return True
        except OSError:
            return False
    connection = http.client.HTTPConnection("127.0.0.1", host_port, timeout=spec.timeout)
    try:
        connection.request("GET", spec.path, headers={"User-Agent": "kube-probe/1.31",
                                                      **dict(spec.headers)})
        response = connection.getresponse()
        response.read()
        return 200 <= response.status < 400
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


@dataclass(slots=True)
class ProbeTracker:
    """Consecutive results of one probe of one running process.

    ``healthy`` is the probe's verdict: ready (readiness), alive (liveness) or
    started (startup). It flips after ``successThreshold`` consecutive successes
    or ``failureThreshold`` consecutive failures, as in the kubelet.
    """

    spec: ProbeSpec
    next_due: float
    healthy: bool
    successes: int = 0
    failures: int = 0
    in_flight: bool = False

    @classmethod
    def starting(cls, spec: ProbeSpec, started: float, *, healthy: bool) -> ProbeTracker:
        return cls(spec, started + spec.initial_delay, healthy)

    def due(self, now: float) -> bool:
        return not self.in_flight and now >= self.next_due

    @property
    def exhausted(self) -> bool:
        """Failed ``failureThreshold`` times in a row (a startup or liveness kill)."""
        return self.failures >= self.spec.failure_threshold

    def record(self, ok: bool, now: float) -> bool:
        """Count one result; returns True when ``healthy`` or ``exhausted`` changed."""
        self.in_flight = False
        self.next_due = now + self.spec.period
        before = (self.healthy, self.exhausted)
        if ok:
            self.successes, self.failures = self.successes + 1, 0
            if self.successes >= self.spec.success_threshold:
                self.healthy = True
        else:
            self.successes, self.failures = 0, self.failures + 1
            if self.exhausted:
                self.healthy = False
        return (self.healthy, self.exhausted) != before
