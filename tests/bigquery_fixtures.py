"""A bqemulator process for tests: the BigQuery REST API on a loopback port."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sandbox.httpserver import free_port
from shared import bigquery
from shared.config import MetricsConfig
from tests.processes import serving

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
    argv = [str(binary), "start", "--rest-port", str(port), "--grpc-port", str(free_port()),
            "--project", PROJECT, "--ephemeral", "--log-level", "warning"]
    with serving(argv, port, log) as process:
        yield Emulator(f"http://127.0.0.1:{port}", process)


def fresh_dataset() -> MetricsConfig:
    """A metrics config naming a dataset no other test uses."""
    return MetricsConfig(dataset=f"t_{uuid.uuid4().hex[:10]}")


def count(config: MetricsConfig, view_or_table: str, where: str = "TRUE") -> int:
    rows = bigquery.query(
        PROJECT, f"SELECT COUNT(*) AS n FROM `{PROJECT}.{config.dataset}.{view_or_table}` "
        f"WHERE {where}")
    return int(rows[0]["n"])
