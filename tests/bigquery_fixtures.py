"""A bqemulator process for tests: the BigQuery REST API on a loopback port."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.common.httpserver import free_port
from shared import bigquery
from shared.config import MetricsConfig
from tests.processes import serving

PROJECT = "accelops-test"
REPO = Path(__file__).resolve().parents[1]


@dataclass
class Emulator:
    url: str
    process: subprocess.Popen[bytes]


@contextlib.contextmanager
def bigquery_emulator(log: Path) -> Iterator[Emulator]:
    """Start an in-memory bqemulator, as the sandbox runs it (sandbox.bigquery_emulator);
    stop it when the block ends."""
    port = free_port()
    argv = [sys.executable, "-m", "sandbox.bigquery_emulator", "start", "--rest-port", str(port),
            "--grpc-port", str(free_port()),
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


@dataclass
class MetricsDataset:
    """A metrics dataset with its schema applied, and ``ingest_metrics`` writing to it."""

    config: MetricsConfig
    ingest: Any  # a functions-framework test client of ingest_metrics
    emulator: Emulator


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    """``os.environ`` with ``values`` set, restored afterwards."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def metrics_dataset(workdir: Path, config: MetricsConfig | None = None,
                    ) -> Iterator[MetricsDataset]:
    """A bqemulator with the metrics schema applied to ``config``'s dataset (a fresh one
    by default), and the environment that ingest_metrics and the views read from, set
    for the block and restored after it."""
    import functions_framework
    import yaml

    from shared.metrics.schema import apply_schema

    config = config or fresh_dataset()
    config_path = workdir / "config.yaml"
    config_path.write_text(yaml.safe_dump({"metrics": config.model_dump()}))
    with bigquery_emulator(workdir / "bqemulator.log") as emulator, environment(
            BIGQUERY_EMULATOR_HOST=emulator.url, ACCELOPS_PROJECT=PROJECT,
            ACCELOPS_CONFIG=str(config_path)):
        bigquery.reset_client()
        try:
            apply_schema(PROJECT, config)
            ingest = functions_framework.create_app(
                "ingest_metrics", str(REPO / "functions" / "main.py"), "cloudevent")
            yield MetricsDataset(config, ingest.test_client(), emulator)
        finally:
            bigquery.reset_client()
