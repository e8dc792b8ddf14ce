"""Ports chosen for servers that bind later: each test worker its own range, below the
kernel's ephemeral range, and a port handed out once across processes."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sandbox.common import ports

EPHEMERAL_LOW = 32768  # Linux's default ip_local_port_range starts here


@pytest.fixture
def reservations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Reservations of this test's own, in its temporary directory (for subprocesses too)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    return tmp_path


def unused_range(size: int) -> tuple[int, int]:
    """``size`` consecutive ports below the ephemeral range that nothing holds now."""
    for low in range(19000, 19900, size):
        if all(bindable(p) for p in range(low, low + size)):
            return low, low + size - 1
    raise AssertionError("no unused range of ports to test with")


def bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_each_worker_and_a_serial_run_have_disjoint_ranges_below_the_ephemeral_range() -> None:
    ranges = [ports.worker_range(None), ports.DEFAULT_RANGE,
              *(ports.worker_range(f"gw{n}") for n in range(9))]
    taken = [set(range(low, high + 1)) for low, high in ranges]

    assert all(high < EPHEMERAL_LOW and low >= 1024 for low, high in ranges)
    assert sum(len(t) for t in taken) == len(set().union(*taken))


def test_candidates_visit_every_port_of_the_range_once_from_the_start_on() -> None:
    assert list(ports.candidates((100, 104), 103)) == [103, 104, 100, 101, 102]


def test_a_malformed_range_is_refused_naming_the_variable() -> None:
    with pytest.raises(ValueError, match="ACCELOPS_PORT_RANGE"):
        ports.parse_range("14000")
    with pytest.raises(ValueError, match="ACCELOPS_PORT_RANGE"):
        ports.parse_range("15000-14000")


def test_free_port_picks_from_the_range_the_environment_names(
        reservations: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    low, high = unused_range(8)
    monkeypatch.setenv(ports.ENV, f"{low}-{high}")

    assert low <= ports.free_port() <= high


def test_no_two_processes_are_handed_the_same_port_while_it_is_reserved(
        reservations: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    low, high = unused_range(4)
    monkeypatch.setenv(ports.ENV, f"{low}-{high}")
    mine = [ports.free_port(), ports.free_port()]
    theirs = subprocess.run(
        [sys.executable, "-c", "from sandbox.common.ports import free_port\n"
                               "print(free_port(), free_port())"],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, check=True,
        timeout=60).stdout.split()

    assert sorted([*mine, *map(int, theirs)]) == list(range(low, high + 1))


def test_a_port_something_holds_is_never_handed_out(
        reservations: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    low, high = unused_range(2)
    monkeypatch.setenv(ports.ENV, f"{low}-{high}")
    with socket.socket() as server:
        server.bind(("127.0.0.1", low))
        server.listen()
        # The other port is reserved after the first call; still never the held one.
        assert {ports.free_port() for _ in range(3)} == {high}
        with socket.socket() as other:
            other.bind(("127.0.0.1", high))
            with pytest.raises(OSError, match=f"no free loopback port in {low}-{high}"):
                ports.free_port()
