"""``accelops loadtest --cluster``: a distributed test on the load generator deployed on
the cluster, reported like a local one.

What a person would do by hand (``docs/guides/load-tests.md``), in order, each step
bounded:

1. scale ``locust-worker`` to N through its ``scale`` subresource (RBAC:
   ``deployments/scale`` get and patch, nothing else of the Deployment);
2. wait until the master counts exactly N connected workers, all ready (workers of a
   smaller scale quit and leave; a master still running a test is refused);
3. ``POST /swarm`` through the API server's service proxy (``services/proxy`` create
   on ``locust-master:8089``) with the users, spawn rate, run time, target and the
   load generator's options (:mod:`shared.deployment.swarm`);
4. poll ``/stats/requests`` (``services/proxy`` get) until the master has stopped the
   test — it stops at the run time, once every worker has sent its last statistics —
   then ``POST /stop``, which also ends a test this command leaves early (Ctrl-C, an
   error, its own deadline);
5. wait until BigQuery holds exactly the master's request count and print the
   views' summary, noting where Locust's aggregate differs.

The target is the serving Gateway's address (``shared.serving.operator.load_target``):
the master and its workers are in the cluster, where that address is reachable.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from shared.config import Settings, load_config_from
from shared.deployment.loadtest_cli import given_slos
from shared.deployment.locust import LOCUST_WORKER
from shared.deployment.swarm import (
    MASTER_WEB,
    READY,
    RUNNING,
    STOPPED,
    MasterStats,
    SwarmTest,
    master_stats,
    swarm_form,
    swarm_refusal,
)
from shared.errors import AccelopsError, NotFoundError, UnavailableError
from shared.kube import DEPLOYMENTS, KubeClient, get_client
from shared.metrics.commands.summary import print_outcome
from shared.metrics.loadtest.completion import (
    ROWS_TIMEOUT,
    LoadTestError,
    new_test_id,
    wait_for_rows,
)
from shared.metrics.loadtest.locust_stats import aggregate_notes
from shared.metrics.loadtest.model import MetricsSource, TestSummary
from shared.metrics.loadtest.views import BigQueryMetrics
from shared.serving.operator import load_target
from shared.serving.saxml_rollout import PROXY_ENV

__all__ = ["STOP_BOUND", "WORKERS_TIMEOUT", "ClusterRun", "main", "run_on_cluster"]

# New worker pods are scheduled, pulled and connected within minutes on GKE.
WORKERS_TIMEOUT = 300.0
# Beyond the run time: spawning, the workers' stop (Locust's --stop-timeout and its
# 60 s for workers to report) and the last flush.
STOP_BOUND = 120.0
# /stats/requests is memoized by the master for about 2 s (DEFAULT_CACHE_TIME).
POLL_SECONDS = 1.0
_CACHE_SECONDS = 3.0


@dataclass(frozen=True, slots=True)
class ClusterRun:
    """A finished test: the views' summary, the master's final statistics, the workers
    it ran on and where Locust's aggregate disagrees with the views."""

    summary: TestSummary
    master: MasterStats
    workers: tuple[str, ...]
    notes: tuple[str, ...]


class _Master:
    """The master's web API through the service proxy."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace

    def stats(self) -> MasterStats:
        answer = self.kube.service_proxy("GET", self.namespace, MASTER_WEB, "stats/requests")
        try:
            return master_stats(answer)
        except (KeyError, TypeError, ValueError) as exc:
            raise LoadTestError(f"{MASTER_WEB} does not answer like a Locust master: "
                                f"{answer!r:.300}") from exc

    def post(self, path: str, form: list[tuple[str, str]] | None = None) -> object:
        return self.kube.service_proxy("POST", self.namespace, MASTER_WEB, path,
                                       form=form or [])


def _wait_for_workers(master: _Master, workers: int, timeout: float,
                      progress: Callable[[str], None], clock: Callable[[], float],
                      sleep: Callable[[float], None]) -> MasterStats:
    deadline = clock() + timeout
    said = ""
    while True:
        try:
            stats: MasterStats | None = master.stats()
        except (UnavailableError, NotFoundError) as exc:
            # The master's pod is not ready yet, or its Endpoints not made yet.
            stats, line = None, f"  waiting for the master: {exc.message}"
        if stats is not None:
            if stats.state == RUNNING:
                raise LoadTestError("the master is running a test already: stop it "
                                    f"(POST /stop through {MASTER_WEB}) or wait for it")
            ready = sum(1 for state in stats.workers.values() if state == READY)
            line = f"  workers connected: {stats.connected()}/{workers} ({ready} ready)"
            if stats.connected() == workers and ready == workers:
                progress(line)
                return stats
        if line != said:
            progress(line)
            said = line
        if clock() > deadline:
            raise LoadTestError(f"{workers} workers did not connect to the master within "
                                f"{timeout:.0f}s ({line.strip()}); see `kubectl get pods "
                                f"-l app.kubernetes.io/name=locust -n {master.namespace}`")
        sleep(POLL_SECONDS)


def _wait_until_stopped(master: _Master, test: SwarmTest, started: float,
                        progress: Callable[[str], None], clock: Callable[[], float],
                        sleep: Callable[[float], None]) -> MasterStats:
    """The master's statistics once it has stopped this test. A ``stopped`` seen before
    the test was seen running counts only after the run time and the master's cache
    time: until then it may be the previous test's."""
    deadline = started + test.duration_s + STOP_BOUND
    seen_running = False
    last_said = started
    while True:
        stats = master.stats()
        elapsed = clock() - started
        if stats.state not in (STOPPED, READY):
            seen_running = True
        if stats.state == STOPPED and (
                seen_running or elapsed >= test.duration_s + _CACHE_SECONDS):
            return stats
        if clock() - last_said >= 5.0:
            progress(f"  locust: {elapsed:.0f}s (run time {test.duration_s}s), {stats.state}, "
                     f"{stats.users} users on {stats.connected()} workers, "
                     f"{stats.aggregate.requests} requests")
            last_said = clock()
        if clock() > deadline:
            raise LoadTestError(f"the master did not stop the test within "
                                f"{test.duration_s + STOP_BOUND:.0f}s (state {stats.state})")
        sleep(POLL_SECONDS)


def run_on_cluster(kube: KubeClient, namespace: str, test: SwarmTest, workers: int,
                   source: MetricsSource, *, progress: Callable[[str], None] = print,
                   workers_timeout: float = WORKERS_TIMEOUT,
                   rows_timeout: float = ROWS_TIMEOUT,
                   clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep) -> ClusterRun:
    """Run ``test`` on the cluster's load generator with ``workers`` workers in
    ``namespace`` and wait for its rows (see the module docstring).

    Raises LoadTestError when the workers do not connect, the master refuses the test
    or does not stop it in time, or BigQuery does not end up with exactly the master's
    count; the kube adapter's errors (PermissionDeniedError for missing RBAC,
    NotFoundError when the load generator is not deployed) pass through.
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    master = _Master(kube, namespace)
    progress(f"load test {test.test_id}: {test.users} users from {workers} workers for "
             f"{test.duration_s}s against {test.server} at {test.host}")
    kube.scale(DEPLOYMENTS, LOCUST_WORKER, namespace, replicas=workers)
    ready = _wait_for_workers(master, workers, workers_timeout, progress, clock, sleep)
    refusal = swarm_refusal(master.post("swarm", swarm_form(test)))
    if refusal is not None:
        raise LoadTestError(f"the master refused the test: {refusal}")
    started = clock()
    try:
        final = _wait_until_stopped(master, test, started, progress, clock, sleep)
    finally:
        # Idempotent on a stopped master; stops the test when this ends it early.
        master.post("stop")
    requests = final.aggregate.requests
    progress(f"  locust made {requests} requests ({final.aggregate.failures} failed)")
    summary = wait_for_rows(source, test.test_id, requests, timeout=rows_timeout,
                            progress=progress)
    return ClusterRun(summary, final, tuple(sorted(ready.workers)),
                      aggregate_notes(final.aggregate, summary))


def main(args: argparse.Namespace) -> int:
    """``accelops loadtest --cluster``: the cluster of the environment (``KUBECONFIG``,
    else ``ACCELOPS_PROJECT``/``_LOCATION``/``_CLUSTER``), the views of
    ``ACCELOPS_PROJECT``'s dataset."""
    settings = Settings.from_env()
    config = load_config_from(getattr(args, "config", None))
    kube = get_client(settings)
    namespace = config.serving.namespace
    host, server, model = args.host, args.server, args.model
    if args.deployment:
        target = load_target(kube, config, args.deployment, os.environ.get(PROXY_ENV))
        host, server, model = host or target.host, target.server, model or target.model
        print(f"{args.deployment}: {target.server} model {target.model} version "
              f"{target.version} at {target.host}")
    if not host or not model:
        raise AccelopsError("name the target: --deployment NAME (through the serving "
                            "Gateway), or --host URL and --model")
    workers = args.workers or int(kube.scale(DEPLOYMENTS, LOCUST_WORKER, namespace)
                                  ["spec"].get("replicas") or 1)
    test = SwarmTest(test_id=args.test_id or new_test_id(), host=host, model=model,
                     server=server, users=args.users, duration_s=args.duration,
                     accelerator=args.accelerator, max_tokens=args.max_tokens,
                     bad_request_ratio=args.bad_request_ratio, stream=args.stream,
                     slos=given_slos(args))
    source = BigQueryMetrics.from_env()
    done = run_on_cluster(kube, namespace, test, workers, source)
    print_outcome(source, done.summary, done.notes,
                  None if args.no_report else Path(args.report_dir))
    return 0
