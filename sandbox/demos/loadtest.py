"""``accelops loadtest``: one Locust run whose metrics flow through Pub/Sub,
``ingest_metrics`` and BigQuery, then a summary from the views and an HTML report.

Locust runs as subprocesses (it monkey-patches the interpreter with gevent): one
process, or with ``--workers N`` a master and N workers on 127.0.0.1, each worker
publishing its own records. Locust's own request count (the master's ``--json-file``,
which merges the workers' reports) is the number of rows the views must end up with:
the command waits for exactly that many, so a lost or duplicated row shows up as a
failure rather than a slightly wrong chart. Where Locust's aggregate percentiles
differ from the views', the summary and the report say so. Without ``--host`` the
target is the local sandbox's Triton (or Saxml stand-in), started for the run if it
is not up.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.cluster.objects import loopback_url
from sandbox.common.ports import free_port
from sandbox.supervisor.runner import session, state_dir_from
from shared import kube
from shared.config import load_config
from shared.deployment.loadtest_cli import given_slos
from shared.metrics.commands.summary import print_outcome
from shared.metrics.loadtest.completion import LoadTestError, new_test_id, wait_for_rows
from shared.metrics.loadtest.locust_stats import LocustAggregate, aggregate_notes, locust_aggregate
from shared.metrics.loadtest.model import MetricsSource, TestSummary
from shared.metrics.loadtest.views import BigQueryMetrics
from shared.serving.operator import load_target

__all__ = [
    "Finished",
    "LoadTest",
    "LocustProcess",
    "LocustRun",
    "describe",
    "finish",
    "finish_run",
    "main",
    "new_test_id",
    "run",
    "run_test",
    "wait_for_rows",
]

REPO = Path(__file__).resolve().parents[2]
LOCUSTFILE = REPO / "services" / "loadgen" / "locustfile.py"
DEFAULT_MODELS = {"triton": "toy-lm", "saxml": "/sax/test/toy"}
# The sandbox Triton's decoupled twin of toy-lm, for --stream (generate_stream).
STREAM_MODEL = "toy-lm-stream"
# How long the processes of a run that is no longer wanted get to exit on SIGTERM
# (a worker flushes its records) before they are killed.
STOP_GRACE = 10.0
# How often a running test says how far it got.
PROGRESS_EVERY = 5.0


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
    # 0: one Locust process (a local runner); N: a master and N worker processes.
    workers: int = 0

    def __post_init__(self) -> None:
        if self.workers < 0:
            raise ValueError(f"workers must be 0 (one process) or more, not {self.workers}")

    def _options(self) -> list[str]:
        """What every process gets: the locustfiles, the target and the plugin's options,
        so each worker stamps the same test id whatever the master forwards."""
        locustfiles = ",".join(str(path) for path in (LOCUSTFILE, *self.plugins))
        return [
            sys.executable, "-m", "locust", "-f", locustfiles, "--host", self.host,
            "--test-id", self.test_id, "--server", self.server, "--model", self.model,
            "--accelerator", self.accelerator, "--max-tokens", str(self.max_tokens),
            "--bad-request-ratio", str(self.bad_request_ratio),
            *(["--stream"] if self.stream else []),
            *self.slo_options,
            *self.plugin_options,
        ]

    def command(self, stats_prefix: Path, master_port: int | None = None) -> list[str]:
        """The single process, or with ``master_port`` the master (bound to 127.0.0.1,
        waiting for all its workers before it starts the users)."""
        master = [] if master_port is None else [
            "--master", "--expect-workers", str(self.workers),
            "--master-bind-host", "127.0.0.1", "--master-bind-port", str(master_port)]
        return [
            *self._options(), "--headless", *master,
            "-u", str(self.users), "-r", str(self.users),
            "-t", f"{self.duration_s}s", "--stop-timeout", "5", "--only-summary",
            "--json-file", str(stats_prefix),
        ]

    def worker_command(self, master_port: int) -> list[str]:
        """One worker: the users, spawn rate and run time come from the master."""
        return [*self._options(), "--worker", "--master-host", "127.0.0.1",
                "--master-port", str(master_port)]


@dataclass(frozen=True)
class LocustRun:
    """What Locust itself counted (the master's merged statistics in a distributed run)."""

    requests: int
    failures: int
    returncode: int
    output: str
    aggregate: LocustAggregate | None = None
    # What each worker's plugin says it published at test stop (distributed runs).
    published: tuple[int, ...] = ()


# The plugin's line at test stop; one per worker in a distributed run.
_PUBLISHED = re.compile(r"loadgen: test \S+: (\d+) records and \d+ run records published")
# The master's line as each worker joins.
_CONNECTED = re.compile(r"(\d+) workers connected")


class LocustProcess:
    """A running Locust, one process or a master and its workers; :meth:`wait` returns
    its counts once every process has exited, :meth:`kill` stops them all."""

    def __init__(self, test: LoadTest, env: dict[str, str]) -> None:
        self.test = test
        self._dir = tempfile.TemporaryDirectory(prefix="accelops-locust-")
        self._stats = Path(self._dir.name) / "run"
        self._log = Path(self._dir.name) / "locust.log"
        self._env = {**os.environ, **env, "PYTHONPATH": str(REPO)}
        self._started = time.monotonic()
        self._workers: list[tuple[subprocess.Popen[bytes], Path]] = []
        port = free_port() if test.workers else None
        self._process = self._spawn(test.command(self._stats, port), self._log)
        try:
            for index in range(test.workers):
                assert port is not None
                log = Path(self._dir.name) / f"worker-{index}.log"
                self._workers.append((self._spawn(test.worker_command(port), log), log))
        except BaseException:
            self.kill()
            raise

    def _spawn(self, command: list[str], log_path: Path) -> subprocess.Popen[bytes]:
        with log_path.open("wb") as log:
            return subprocess.Popen(  # noqa: S603 - our interpreter, our locustfile
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=str(REPO), env=self._env)

    @property
    def processes(self) -> list[subprocess.Popen[bytes]]:
        return [self._process, *(process for process, _ in self._workers)]

    def kill(self) -> None:
        """Stop a run that is no longer wanted (its metrics may be partial): SIGTERM to
        every process (a worker then flushes what it recorded), SIGKILL to any still
        running after :data:`STOP_GRACE` seconds."""
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + STOP_GRACE
        for process in self.processes:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._dir.cleanup()

    def progress(self) -> str:
        """One line on how far the run got (elapsed seconds, workers connected)."""
        elapsed = time.monotonic() - self._started
        line = f"  locust: {elapsed:.0f}s (run time {self.test.duration_s}s)"
        if self.test.workers:
            found = _CONNECTED.findall(self._log.read_text(errors="replace"))
            line += f", {found[-1] if found else 0}/{self.test.workers} workers connected"
        return line

    def wait(self, progress: Callable[[str], None] = lambda line: None) -> LocustRun:
        # Duration + Locust's stop timeout + the final flush and reports, with room to
        # spare; workers also wait for their master to start.
        limit = self.test.duration_s + 60 + (60 if self.test.workers else 0)
        deadline = self._started + limit
        try:
            for process in self.processes:
                while True:
                    try:
                        process.wait(timeout=min(PROGRESS_EVERY,
                                                 max(0.0, deadline - time.monotonic())))
                        break
                    except subprocess.TimeoutExpired:
                        if time.monotonic() >= deadline:
                            raise LoadTestError(
                                f"locust did not finish within {limit}s") from None
                        progress(self.progress())
            return self._result()
        finally:
            self.kill()

    def _result(self) -> LocustRun:
        code = self._process.returncode
        logs = [self._log.read_text(errors="replace")]
        logs += [f"--- worker {index}\n" + log.read_text(errors="replace")
                 for index, (_, log) in enumerate(self._workers)]
        output = "\n".join(logs)
        for index, (process, _) in enumerate(self._workers):
            if process.returncode not in (0, 1):
                raise LoadTestError(f"locust worker {index} exited {process.returncode}:\n"
                                    f"{logs[index + 1][-2000:]}")
        try:
            entries = json.loads(self._stats.with_name("run.json").read_text())
            aggregate = locust_aggregate(entries)
        except (OSError, KeyError, ValueError, TypeError) as exc:
            raise LoadTestError(f"locust exited {code} without statistics:\n{output[-2000:]}",
                                ) from exc
        published = tuple(int(found) for log in logs[1:] for found in _PUBLISHED.findall(log))
        return LocustRun(aggregate.requests, aggregate.failures, code, output, aggregate,
                         published)


def describe(test: LoadTest) -> str:
    spread = (f" from {test.workers} workers" if test.workers else "")
    return (f"load test {test.test_id}: {test.users} users{spread} for {test.duration_s}s "
            f"against {test.server} at {test.host}")


@dataclass(frozen=True)
class Finished:
    """A run whose every request is in BigQuery: the views' summary, what Locust counted,
    and where Locust's aggregate disagrees with the views (lines for the report)."""

    summary: TestSummary
    locust: LocustRun
    notes: tuple[str, ...]


def finish_run(process: LocustProcess, source: MetricsSource,
               progress: Callable[[str], None] = print) -> Finished:
    """Wait for Locust (every process), then until BigQuery's views hold every request
    it made; compare Locust's aggregate with the views'."""
    result = process.wait(progress)
    progress(f"  locust made {result.requests} requests ({result.failures} failed)")
    if result.returncode not in (0, 1):  # 1: some requests failed, which is data too
        raise LoadTestError(f"locust exited {result.returncode}:\n{result.output[-2000:]}")
    if "not published" in result.output:
        raise LoadTestError(f"the load generator lost metrics:\n{result.output[-2000:]}")
    if process.test.workers:
        progress(f"  workers published {' + '.join(map(str, result.published)) or 'no'} "
                 "records")
    summary = wait_for_rows(source, process.test.test_id, result.requests, progress=progress)
    notes = aggregate_notes(result.aggregate, summary) if result.aggregate else ()
    return Finished(summary, result, notes)


def finish(process: LocustProcess, source: MetricsSource,
           progress: Callable[[str], None] = print) -> TestSummary:
    """:func:`finish_run`'s summary."""
    return finish_run(process, source, progress).summary


def run_test(test: LoadTest, env: dict[str, str], source: MetricsSource,
             progress: Callable[[str], None] = print) -> Finished:
    """Run Locust to the end and wait for its rows; see :func:`finish_run`. Every Locust
    process is stopped on the way out, whatever ends the run (Ctrl-C included)."""
    progress(describe(test))
    return finish_run(LocustProcess(test, env), source, progress)


def run(test: LoadTest, env: dict[str, str], source: MetricsSource,
        progress: Callable[[str], None] = print) -> TestSummary:
    """:func:`run_test`'s summary."""
    return run_test(test, env, source, progress).summary


def deployment_target(deployment: str, sandbox: Any) -> Any:
    """Where the sandbox serves a deployed model now (shared/serving/operator.py)."""
    kube.reset_client()
    return load_target(kube.get_client(), load_config(str(sandbox.config)), deployment,
                       sandbox.saxml_proxy_url if sandbox.has("saxml") else None,
                       url_of=loopback_url)


def slo_options(args: argparse.Namespace) -> tuple[str, ...]:
    """The load generator's ``--slo-*-ms`` options for those given to ``accelops
    loadtest`` (the load generator checks them)."""
    return tuple(part for name, value in given_slos(args)
                 for part in ("--" + name.replace("_", "-"), repr(value)))


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
                        stream=args.stream, workers=args.workers or 0,
                        slo_options=slo_options(args))
        source = BigQueryMetrics.from_env()
        done = run_test(test, sandbox.env(), source)
        print_outcome(source, done.summary, done.notes,
                      None if args.no_report else Path(args.report_dir))
    return 0
