"""``python -m tests.bench.bigquery_emulator``: what a query costs the sandbox's BigQuery,
as the sandbox runs it (``sandbox.bigquery_emulator``: SELECT translations remembered)
and as bqemulator runs alone (the baseline), in the same run.

Each emulator gets the metrics schema and then runs ``BENCH_QUERIES`` (default 20) times
each of: ``team_usage``'s query of ``job_usage_daily`` (a view of common table
expressions, every five simulated minutes in the sandbox), a parameterised read of
``job_events`` (what the e2e tests poll), a one-row insert (ingest_metrics' writes,
which the memo does not touch), and an insert followed by the team_usage query (a
sandbox receiving load-test rows: an insert changes only the table's statistics, which
must not make the next query translate afresh). Figures: the emulator process's own
CPU (user+sys from /proc) and the client's wall time per call, first call and median of
the rest. Prints them and writes ``bench-results/bigquery_emulator.json``.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sandbox.common.httpserver import free_port
from shared import bigquery
from shared.jobs.budget.usage_sql import usage_params, usage_query
from shared.metrics.names import Names
from shared.metrics.schema import apply_schema
from tests.bench.results import write_results
from tests.bigquery_fixtures import PROJECT, environment, fresh_dataset
from tests.processes import serving

QUERIES = int(os.environ.get("BENCH_QUERIES", "20"))
COMMANDS = {
    "sandbox.bigquery_emulator (as the sandbox runs it)":
        [sys.executable, "-m", "sandbox.bigquery_emulator"],
    "bqemulator alone (baseline)": [str(Path(sys.executable).parent / "bqemulator")],
}
_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _measure(pid: int, call: Callable[[], Any]) -> dict[str, float]:
    cpu, wall = [], []
    for _ in range(QUERIES):
        before, started = _cpu(pid), time.perf_counter()
        call()
        wall.append(time.perf_counter() - started)
        cpu.append(_cpu(pid) - before)
    return {"first_cpu_ms": cpu[0] * 1e3, "cpu_ms": statistics.median(cpu[1:]) * 1e3,
            "first_wall_ms": wall[0] * 1e3, "wall_ms": statistics.median(wall[1:]) * 1e3}


def measure(command: list[str], workdir: Path) -> dict[str, dict[str, float]]:
    port = free_port()
    argv = [*command, "start", "--rest-port", str(port), "--grpc-port", str(free_port()),
            "--project", PROJECT, "--ephemeral", "--log-level", "warning"]
    config = fresh_dataset()
    with serving(argv, port, workdir / "bqemulator.log") as process, environment(
            BIGQUERY_EMULATOR_HOST=f"http://127.0.0.1:{port}"):
        bigquery.reset_client()
        apply_schema(PROJECT, config)
        names = Names.of(PROJECT, config)
        now = datetime.now(UTC)
        events = names.sql(config.job_events_table)
        inserted = iter(range(10**6))

        def insert() -> None:
            key = f"bench:{next(inserted)}"
            bigquery.insert_rows(PROJECT, names.ref(config.table), [{
                "row_key": key, "message_id": "bench", "test_id": "bench",
                "request_type": "POST", "request_name": "/x", "response_time": 1.0,
                "start_time": now.isoformat()}], [key])

        def insert_then_query() -> None:
            """A sandbox under load: rows arrive between the ticks' queries."""
            insert()
            bigquery.query(PROJECT, usage_query(names), usage_params(["research"], now))

        return {
            "team_usage query (job_usage_daily)": _measure(process.pid, lambda: bigquery.query(
                PROJECT, usage_query(names), usage_params(["research"], now))),
            "read of job_events by request id": _measure(process.pid, lambda: bigquery.query(
                PROJECT, f"SELECT * FROM {events} WHERE request_id = @id", {"id": "x"})),
            "one-row insert into requests": _measure(process.pid, insert),
            "insert, then the team_usage query": _measure(process.pid, insert_then_query),
        }


def main() -> int:
    results: dict[str, Any] = {"queries": QUERIES, "load_average": os.getloadavg()}
    with tempfile.TemporaryDirectory() as scratch:
        for label, command in COMMANDS.items():
            results[label] = measure(command, Path(scratch))
            print(f"\n{label}: emulator CPU and client wall per call, first and median "
                  f"of the next {QUERIES - 1}")
            print(f"  {'':<36} {'first cpu':>10} {'cpu':>8} {'first wall':>11} {'wall':>8}")
            for name, f in results[label].items():
                print(f"  {name:<36} {f['first_cpu_ms']:>8.0f}ms {f['cpu_ms']:>6.0f}ms "
                      f"{f['first_wall_ms']:>9.0f}ms {f['wall_ms']:>6.0f}ms")
    write_results("bigquery_emulator", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
