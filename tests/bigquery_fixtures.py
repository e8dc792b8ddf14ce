"""A bqemulator process for tests: the BigQuery REST API on a loopback port."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sandbox.httpserver import free_port, port_open
from shared import bigquery
from shared.config import MetricsConfig

PROJECT = "accelops-test"


@dataclass
class Emulator:
    url: str
    process: subprocess.Popen[bytes]


@contextlib.contextmanager
def bigquery_emulator(log: Path) -> Iterator[Emulator]:
    """Start an in-memory bqemulator; stop it when the block ends."""
    port = free_port()
    binary = Path(sys.executable).parent / "bqemulator"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(binary), "start", "--rest-port", str(port), "--grpc-port", str(free_port()),
             "--project", PROJECT, "--ephemeral", "--log-level", "warning"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not port_open(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"bqemulator did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield Emulator(f"http://127.0.0.1:{port}", process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def fresh_dataset() -> MetricsConfig:
    """A metrics config naming a dataset no other test uses."""
    return MetricsConfig(dataset=f"t_{uuid.uuid4().hex[:10]}")


def count(config: MetricsConfig, view_or_table: str, where: str = "TRUE") -> int:
    rows = bigquery.query(
        PROJECT, f"SELECT COUNT(*) AS n FROM `{PROJECT}.{config.dataset}.{view_or_table}` "
        f"WHERE {where}")
    return int(rows[0]["n"])
