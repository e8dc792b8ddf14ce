"""Loopback ports for servers that are told their port before they start.

A server that binds port 0 gets a port from the kernel atomically; but the sandbox's
components (the Pub/Sub emulator, bqemulator, fake-gcs-server, gunicorn, Triton) are
given their port on the command line, so it is chosen first and bound later — seconds
later on a busy machine. Choosing by binding port 0 and closing the socket (the old
way) picks from Linux's ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``,
32768-60999), which the kernel goes on handing out to every other port-0 bind and
every outgoing connection; and a second process choosing at the same moment (another
pytest worker, a sandbox subprocess) can be handed the same port. Either way the
server later fails to bind, or a "nothing listens here" port answers.

So ports are chosen:

- from a range below the ephemeral range, which the kernel never assigns: the one
  ``ACCELOPS_PORT_RANGE`` names (``LOW-HIGH``; the test suite gives each pytest-xdist
  worker its own, and subprocesses inherit it), else ``DEFAULT_RANGE``;
- only if a bind succeeds now (nothing else holds it);
- and only once per ``RESERVATION_SECONDS`` across every process of the user: a port
  handed out is reserved by a file in a directory under the temporary directory, made
  with ``O_EXCL`` so exactly one process wins it, long enough for its server to bind
  (after which the bind check keeps it).
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["DEFAULT_RANGE", "ENV", "RESERVATION_SECONDS", "PortRange", "candidates",
           "free_port", "parse_range", "worker_range"]

ENV = "ACCELOPS_PORT_RANGE"
# Interactive use (`accelops sandbox up`, the demo, benchmarks): a range of its own.
DEFAULT_RANGE = (10000, 11999)
# The test suite: a serial run's range, then one range per xdist worker (gw0, gw1, ...),
# all below Linux's ephemeral range (32768-60999).
_SERIAL_RANGE = (12000, 13999)
_WORKERS_LOW, _WORKER_SPAN, _WORKER_RANGES = 14000, 2000, 9
# Longer than any component takes to bind the port it was given, under load.
RESERVATION_SECONDS = 300.0

PortRange = tuple[int, int]


def parse_range(text: str) -> PortRange:
    """``"LOW-HIGH"`` as an inclusive range; raises ValueError on anything else."""
    low_text, sep, high_text = text.partition("-")
    if not sep:
        raise ValueError(f"{ENV}={text!r}: expected LOW-HIGH, e.g. 14000-15999")
    low, high = int(low_text), int(high_text)
    if not 1024 <= low <= high <= 65535:
        raise ValueError(f"{ENV}={text!r}: expected 1024 <= LOW <= HIGH <= 65535")
    return low, high


def worker_range(worker: str | None) -> PortRange:
    """The test suite's range for a pytest-xdist worker id (``gw3``) or a serial run
    (None). Workers beyond the ranges there are share one (reservations keep them apart)."""
    if not worker:
        return _SERIAL_RANGE
    index = int(worker.removeprefix("gw")) % _WORKER_RANGES
    low = _WORKERS_LOW + index * _WORKER_SPAN
    return low, low + _WORKER_SPAN - 1


def candidates(port_range: PortRange, start: int) -> Iterator[int]:
    """Every port of the range once, from ``start`` on and wrapping around: processes
    starting at different places rarely contend for the same port."""
    low, high = port_range
    span = high - low + 1
    for step in range(span):
        yield low + (start - low + step) % span


def _configured_range() -> PortRange:
    text = os.environ.get(ENV)
    return parse_range(text) if text else DEFAULT_RANGE


def _reservations() -> Path:
    directory = Path(tempfile.gettempdir()) / f"accelops-ports-{os.getuid()}"
    directory.mkdir(mode=0o700, exist_ok=True)
    return directory


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _reserve(directory: Path, port: int, max_age: float) -> bool:
    """Take the port's reservation file: new, or older than ``max_age`` seconds."""
    path = directory / str(port)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return True
    except FileExistsError:
        pass
    try:
        if time.time() - path.stat().st_mtime < max_age:
            return False
        # Stale: renamed away first, so of two processes reclaiming it only one does.
        stale = directory / f"{port}.stale.{os.getpid()}.{random.getrandbits(32)}"
        path.rename(stale)
    except FileNotFoundError:
        return False
    try:
        if time.time() - stale.stat().st_mtime < max_age:
            # Another process reserved it between our look and our rename: give it back.
            with contextlib.suppress(OSError):
                os.link(stale, path)
            return False
    finally:
        stale.unlink(missing_ok=True)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return False
    return True


def free_port() -> int:
    """A loopback TCP port nothing holds now and no other process was handed in the last
    ``RESERVATION_SECONDS``, for a server to bind next. Raises OSError when the whole
    range is in use (with reservations ignored, as a last resort, before that)."""
    port_range = _configured_range()
    directory = _reservations()
    start = random.randint(*port_range)  # noqa: S311 - spreads processes, no secret
    for max_age in (RESERVATION_SECONDS, 0.0):
        for port in candidates(port_range, start):
            if _bindable(port) and _reserve(directory, port, max_age):
                return port
    raise OSError(f"no free loopback port in {port_range[0]}-{port_range[1]} "
                  f"(set {ENV}=LOW-HIGH to use another range)")
