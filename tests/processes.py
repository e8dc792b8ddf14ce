"""Emulators run as processes for tests (bqemulator, Google's Pub/Sub emulator)."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from sandbox.httpserver import port_open


@contextlib.contextmanager
def serving(argv: Sequence[str], port: int, log: Path, *,
            ready_seconds: float = 60.0) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``argv`` (its output to ``log``) until it listens on 127.0.0.1:``port``; stop
    it when the block ends. RuntimeError with the log's tail when it exits first or is
    not listening after ``ready_seconds``."""
    with log.open("wb") as out:
        process = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    try:
        give_up = time.monotonic() + ready_seconds
        while not port_open(port):
            if process.poll() is not None or time.monotonic() > give_up:
                raise RuntimeError(f"{Path(argv[0]).name} did not listen on {port}:\n"
                                   f"{log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
