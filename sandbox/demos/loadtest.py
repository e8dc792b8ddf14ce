"""``accelops loadtest``: one Locust run whose metrics flow through Pub/Sub,
``ingest_metrics`` and BigQuery, then a summary from the views and an HTML report.

Locust runs as a subprocess (it monkey-patches the interpreter with gevent). Its own
request count (from ``--json-file``) is the number of rows the views must end up with: the
command waits for exactly that many, so a lost or duplicated row shows up as a
failure rather than a slightly wrong chart. Without ``--host`` the target is the
local sandbox's Triton (or Saxml stand-in), started for the run if it is not up.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sandbox.cluster.objects import loopback_url
from sandbox.supervisor.runner import session, state_dir_from
from shared import kube
from shared.config import load_config
from shared.errors import AccelopsError, NotFoundError
from shared.metrics.commands.summary import format_summary
from shared.metrics.loadtest.model import MetricsSource, TestSummary
from shared.metrics.loadtest.report import report_dir_name, write_report
from shared.metrics.loadtest.views import BigQueryMetrics
from shared.serving.operator import load_target

__all__ = [
    "LoadTest",
    "LocustProcess",
    "LocustRun",
    "describe",
    "finish",
    "main",
    "new_test_id",
    "run",
    "wait_for_rows",
]

REPO = Path(__file__).resolve().parents[2]
LOCUSTFILE = REPO / "services" / "loadgen" / "locustfile.py"
DEFAULT_MODELS = {"triton": "toy-lm", "saxml": "/sax/test/toy"}
# The sandbox Triton's decoupled twin of toy-lm, for --stream (generate_stream).
STREAM_MODEL = "toy-lm-stream"
# A bound, not an estimate: the wait ends as soon as every row is counted.
ROWS_TIMEOUT = 180.0


class LoadTestError(AccelopsError):
    pass


@dataclass(frozen=True)
class LoadTest:
    """What to run."""

    test_id: str
    host: str
    server: str = "triton"
    users: int = 4
    duration_s: int = 10
    model: str = "toy-lm"
    accelerator: str = "cpu"
    max_tokens: int = 16
    bad_request_ratio: float = 0.0
    stream: bool = False
    # --slo-ttft-ms, --slo-tpot-ms, --slo-latency-ms as given (flag, value pairs).
    slo_options: tuple[str, ...] = ()
    # More locustfiles loaded beside the load generator's (Locust plugins: their event
    # listeners and options), and options for them. The tests end a run by a condition
    # this way instead of by wall seconds.
    plugins: tuple[Path, ...] = ()
    plugin_options: tuple[str, ...] = ()

    def command(self, stats_prefix: Path) -> list[str]:
        locustfiles = ",".join(str(path) for path in (LOCUSTFILE, *self.plugins))
        return [
            sys.executable, "-m", "locust", "-f", locustfiles, "--headless",
            "--host", self.host, "-u", str(self.users), "-r", str(self.users),
            "-t", f"{self.duration_s}s", "--stop-timeout", "5", "--only-summary",
            "--json-file", str(stats_prefix),
            "--test-id", self.test_id, "--server", self.server, "--model", self.model,
            "--accelerator", self.accelerator, "--max-tokens", str(self.max_tokens),
            "--bad-request-ratio", str(self.bad_request_ratio),
            *(["--stream"] if self.stream else []),
            *self.slo_options,
            *self.plugin_options,
        ]


@dataclass(frozen=True)
class LocustRun:
    """What Locust itself counted."""

    requests: int
    failures: int
    returncode: int
    output: str


def new_test_id(now: datetime | None = None) -> str:
    """A sortable, unique test id such as ``lt-20261121-140512-9f3a``."""
    at = (now or datetime.now(UTC)).astimezone(UTC)
    return f"lt-{at:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


class LocustProcess:
    """A running Locust; :meth:`wait` returns its counts once it has exited."""

    def __init__(self, test: LoadTest, env: dict[str, str]) -> None:
        self.test = test
        self._dir = tempfile.TemporaryDirectory(prefix="accelops-locust-")
        self._stats = Path(self._dir.name) / "run"
        self._log = Path(self._dir.name) / "locust.log"
        with self._log.open("wb") as log:
            self._process = subprocess.Popen(  # noqa: S603 - our interpreter, our locustfile
                test.command(self._stats), stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, cwd=str(REPO),
                env={**os.environ, **env, "PYTHONPATH": str(REPO)})

    def kill(self) -> None:
        """Stop a run that is no longer wanted (its metrics may be partial)."""
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._dir.cleanup()

    def wait(self) -> LocustRun:
        # Duration + Locust's stop timeout + the plugin's final flush, with room to spare.
        limit = self.test.duration_s + 60
        try:
            code = self._process.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
            raise LoadTestError(f"locust did not finish within {limit}s") from None
        output = self._log.read_text(errors="replace")
        try:
            requests, failures = _totals(self._stats.with_name("run.json"))
        except (OSError, KeyError, ValueError, TypeError) as exc:
            raise LoadTestError(f"locust exited {code} without statistics:\n{output[-2000:]}",
                                ) from exc
        finally:
            self._dir.cleanup()
        return LocustRun(requests, failures, code, output)


def _totals(stats_json: Path) -> tuple[int, int]:
    """Requests and failures from Locust's final ``--json-file`` (one entry per request
    name). Its CSV is rewritten only every few seconds and misses the last of them."""
    entries = json.loads(stats_json.read_text())
    return (sum(int(e["num_requests"]) for e in entries),
            sum(int(e["num_failures"]) for e in entries))


def wait_for_rows(source: MetricsSource, test_id: str, expected: int,
                  timeout: float = ROWS_TIMEOUT,
                  progress: Callable[[str], None] = lambda line: None) -> TestSummary:
    """Poll the summary view until it counts ``expected`` requests for the test.

    Raises LoadTestError when they do not all arrive in time, or more arrive (which
    would mean duplicates got past the views).
    """
    deadline = time.monotonic() + timeout
    seen = -1
    while True:
        try:
            summary = source.summary(test_id)
            count = summary.requests
        except NotFoundError:
            summary, count = None, 0
        if count != seen:
            progress(f"  rows in BigQuery: {count}/{expected}")
            seen = count
        if summary is not None and count == expected:
            return summary
        if count > expected:
            raise LoadTestError(f"{count} rows for {expected} requests: duplicates in the views")
        if time.monotonic() > deadline:
            raise LoadTestError(f"only {count} of {expected} rows reached BigQuery within "
                                f"{timeout:.0f}s (see the ingest_metrics log)")
        time.sleep(0.5)


def write_html(source: MetricsSource, test_id: str, out_root: Path,
               compare: str | None = None) -> Path:
    return write_report(source, test_id, out_root / report_dir_name(test_id, compare),
                        compare=compare)


def describe(test: LoadTest) -> str:
    return (f"load test {test.test_id}: {test.users} users for {test.duration_s}s "
            f"against {test.server} at {test.host}")


def finish(process: LocustProcess, source: MetricsSource,
           progress: Callable[[str], None] = print) -> TestSummary:
    """Wait for Locust, then until BigQuery's views hold every request it made."""
    result = process.wait()
    progress(f"  locust made {result.requests} requests ({result.failures} failed)")
    if result.returncode not in (0, 1):  # 1: some requests failed, which is data too
        raise LoadTestError(f"locust exited {result.returncode}:\n{result.output[-2000:]}")
    if "not published" in result.output:
        raise LoadTestError(f"the load generator lost metrics:\n{result.output[-2000:]}")
    return wait_for_rows(source, process.test.test_id, result.requests, progress=progress)


def run(test: LoadTest, env: dict[str, str], source: MetricsSource,
        progress: Callable[[str], None] = print) -> TestSummary:
    """Run Locust to the end and wait for its rows; see :func:`finish`."""
    progress(describe(test))
    return finish(LocustProcess(test, env), source, progress)


def deployment_target(deployment: str, sandbox: Any) -> Any:
    """Where the sandbox serves a deployed model now (shared/serving/operator.py)."""
    kube.reset_client()
    return load_target(kube.get_client(), load_config(str(sandbox.config)), deployment,
                       sandbox.saxml_proxy_url if sandbox.has("saxml") else None,
                       url_of=loopback_url)


def slo_options(args: argparse.Namespace) -> tuple[str, ...]:
    """The load generator's ``--slo-*-ms`` options for those given to ``accelops
    loadtest`` (the load generator checks them)."""
    given = []
    for name in ("slo_ttft_ms", "slo_tpot_ms", "slo_latency_ms"):
        value = getattr(args, name, None)
        if value is not None:
            given += ["--" + name.replace("_", "-"), repr(float(value))]
    return tuple(given)


def main(args: argparse.Namespace) -> int:
    test_id = args.test_id or new_test_id()
    model = args.model or (STREAM_MODEL if args.stream else DEFAULT_MODELS[args.server])
    parts = {"metrics", "serving"} if args.deployment else {"metrics"}
    with session(state_dir_from(args.state_dir), parts) as sandbox, sandbox.client_env():
        host = args.host or (sandbox.triton_url if args.server == "triton"
                             else sandbox.saxml_url)
        if args.deployment:
            target = deployment_target(args.deployment, sandbox)
            host, model = args.host or target.host, args.model or target.model
            args.server = target.server
            print(f"{args.deployment}: {target.server} model {target.model} version "
                  f"{target.version} at {host}")
        test = LoadTest(test_id=test_id, host=host, server=args.server, users=args.users,
                        duration_s=args.duration, model=model, accelerator=args.accelerator,
                        max_tokens=args.max_tokens, bad_request_ratio=args.bad_request_ratio,
                        stream=args.stream,
                        slo_options=slo_options(args))
        source = BigQueryMetrics.from_env()
        summary = run(test, sandbox.env(), source)
        print(format_summary(summary))
        if not args.no_report:
            path = write_html(source, test_id, Path(args.report_dir))
            print(f"  report      {path}")
    print(f"compare with another run:  accelops report {test_id} --compare OTHER_TEST_ID")
    return 0
