"""Containers that run as real local processes: the launcher contract.

The simulated kubelet (:mod:`sandbox.cluster.runtime`) only pretends a pod runs.
For servers a test must really talk to (a ``tritonserver``, a small HTTP echo
server) the simulation takes *launchers*: a launcher is registered under a
substring of a container image (``"tritonserver"`` matches
``nvcr.io/nvidia/tritonserver:24.08-py3``) and turns one container of a bound pod
into a running :class:`ContainerProcess`. The process kubelet
(:mod:`sandbox.cluster.kubelet`) then probes it over HTTP, restarts it when it
exits and stops it when the pod goes away.

A launcher receives the pod, the container and the host ports the kubelet
allocated for the container's ``containerPort`` s (``{8000: 40123}``): there is
no pod network here, so a process listens on a free loopback port instead of on
its container port, and probes and Services reach it there.

:class:`SubprocessContainer` is the usual implementation: a child process in its
own session (so stopping it also stops whatever it started), its output appended
to a log file whose tail becomes a crashed container's termination message.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from sandbox.common.logtail import log_tail

__all__ = ["ContainerProcess", "Launcher", "SubprocessContainer", "launcher_for"]

_TAIL_BYTES = 64 * 1024


class ContainerProcess(Protocol):
    """One running container, as the process kubelet sees it."""

    def alive(self) -> bool:
        """Whether the process still runs."""
        ...

    def exit_code(self) -> int | None:
        """The exit code once it ended (128 + signal number when a signal ended it)."""
        ...

    def stop(self, grace_seconds: float) -> None:
        """SIGTERM, then SIGKILL after ``grace_seconds``; returns once it ended."""
        ...

    def log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines of its output."""
        ...


# (pod, container, {containerPort: hostPort}) -> a started process
Launcher = Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[int, int]], ContainerProcess]


def launcher_for(image: str, launchers: Mapping[str, Launcher]) -> Launcher | None:
    """The launcher whose key occurs in ``image`` (the longest key wins), if any."""
    matches = [key for key in launchers if key and key in image]
    if not matches:
        return None
    return launchers[max(matches, key=lambda key: (len(key), key))]


class SubprocessContainer:
    """A :class:`ContainerProcess` over :class:`subprocess.Popen`.

    Output (stdout and stderr) is appended to ``log_path``, so a restarted
    container keeps its predecessor's lines in the same file; ``log_tail`` reads
    only what this process wrote.
    """

    def __init__(
        self,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = log_path
        with log_path.open("ab") as out:
            self._offset = out.tell()
            self._process = subprocess.Popen(  # noqa: S603 - argv comes from a launcher
                list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=dict(env) if env is not None else None, cwd=cwd, start_new_session=True)

    @property
    def pid(self) -> int:
        return self._process.pid

    def alive(self) -> bool:
        return self._process.poll() is None

    def exit_code(self) -> int | None:
        code = self._process.poll()
        if code is None:
            return None
        return 128 - code if code < 0 else code

    def _signal(self, signum: int) -> None:
        # The process leads its own session: signal the group it started.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signum)

    def stop(self, grace_seconds: float) -> None:
        if self._process.poll() is not None:
            return
        self._signal(signal.SIGTERM)
        try:
            self._process.wait(timeout=max(0.0, grace_seconds))
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self._process.wait(timeout=10)

    def log_tail(self, lines: int = 20) -> str:
        return log_tail(self.log_path, lines, offset=self._offset, max_bytes=_TAIL_BYTES)
