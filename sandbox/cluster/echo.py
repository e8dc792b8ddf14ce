"""A launcher for the echo server: pods that run a real, tiny HTTP server.

Register it under :data:`ECHO_IMAGE_KEY` and give containers an image containing
it (:data:`ECHO_IMAGE`); each such container runs :mod:`sandbox.cluster.echoserver`
on the host port of its first ``containerPort``, with the container's ``args``
(``--version=v2``, ``--fail-at-start``, ``--ready-after=2``). It lets tests and
demos exercise rollouts, probes, restarts and Services with real processes and
real sockets without a model server::

    launcher = EchoLauncher(tmp_path / "logs")
    Simulation(store, clock, launchers={ECHO_IMAGE_KEY: launcher})
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sandbox.cluster.containers import SubprocessContainer

__all__ = ["ECHO_IMAGE", "ECHO_IMAGE_KEY", "EchoLauncher"]

ECHO_IMAGE_KEY = "sandbox-echo"
ECHO_IMAGE = f"localhost/{ECHO_IMAGE_KEY}:1"
ECHO_SERVER = Path(__file__).with_name("echoserver.py")


class EchoLauncher:
    """Starts the echo server for one container; remembers what it started."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.launched: list[SubprocessContainer] = []

    def __call__(self, pod: Mapping[str, Any], container: Mapping[str, Any],
                 ports: Mapping[int, int]) -> SubprocessContainer:
        declared = [int(p["containerPort"]) for p in container.get("ports") or []
                    if p.get("containerPort") is not None]
        if not declared or declared[0] not in ports:
            raise ValueError(f"container {container.get('name')!r} declares no containerPort")
        metadata = pod.get("metadata") or {}
        log = self.log_dir / (f"{metadata.get('namespace', '')}_{metadata.get('name', '')}_"
                              f"{container.get('name', '')}.log")
        argv = [sys.executable, str(ECHO_SERVER), "--port", str(ports[declared[0]]),
                *(str(arg) for arg in container.get("args") or [])]
        process = SubprocessContainer(argv, log)
        self.launched.append(process)
        return process

    def running(self) -> list[SubprocessContainer]:
        """The processes it started that still run."""
        return [p for p in self.launched if p.alive()]
