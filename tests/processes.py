"""Emulators run as processes for tests (bqemulator, Google's Pub/Sub emulator)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

from sandbox.common.httpserver import port_open
from sandbox.common.logtail import log_tail
from sandbox.common.startup import Observed, StartupError, resolve_start_timeout, wait_for_parts


@contextlib.contextmanager
def serving(argv: Sequence[str], port: int, log: Path, *,
            ready_seconds: float | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``argv`` (its output to ``log``) until it listens on 127.0.0.1:``port``; stop
    it when the block ends. Waited for as long as it runs, up to ``ready_seconds``
    (default: the sandbox's start-up deadline, ``sandbox/common/startup.py``: a JVM or an
    emulator starting beside a busy test run takes its time); RuntimeError with the log's
    tail when it exits first, or naming the setting to raise at the deadline."""
    with log.open("wb") as out:
        process = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    name = f"{Path(argv[0]).name} on port {port}"

    def observe(_: Sequence[str]) -> list[Observed]:
        ready = port_open(port)
        running = ready or process.poll() is None
        return [Observed(name, ready, running, str(log),
                         "" if running else log_tail(log, 40))]

    try:
        try:
            wait_for_parts([name], observe, timeout=resolve_start_timeout(ready_seconds),
                           interval=0.1)
        except StartupError as exc:
            raise RuntimeError(str(exc)) from exc
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
