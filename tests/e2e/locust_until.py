"""A test-only Locust plugin: end the run once it has made the requests a test needs.

Loaded beside the load generator's own locustfile (``-f locustfile.py,locust_until.py``).
A run limited only by ``--run-time`` makes however many requests a busy machine lets it
make in that many wall seconds, which on a loaded 2-core machine can be none at all
(Locust's run-time timer counts from gevent's cached loop clock, which slow start-up
work leaves stale, so a 2-second run has been seen to end 20 ms after its users
spawned). With this plugin the run ends when Locust's own statistics show enough
requests (``--until-requests``), failures (``--until-failures``) and successes
(``--until-successes``), and at least ``--until-seconds`` after its first request; it
quits the runner exactly as the run-time limit does (``runner.quit()`` from a
greenlet), so the load generator's stop and quit paths are the ones production takes.
``--run-time`` stays as the generous bound of a run whose condition never comes.
Without ``--until-requests`` the plugin does nothing (a run that ends by SIGTERM).

On a master the statistics are the workers' reports, and quitting at once would lose
some: Locust's ``MasterRunner.quit`` gives the workers a fixed 0.5 s for their final
report, while each worker first stops its users and runs the test-stop listeners (the
load generator's flush to Pub/Sub), so on a busy machine the master's count fell short
of the records published (153 records, 86 counted). So a master stops the test first
and quits only once every worker has reported after it stopped (a report that arrives
after the worker's ``client_stopped``, which removes it from the master's list until
its ``client_ready``; its state is then ``init``, and the quit message reaches it). On a
worker the plugin does nothing (workers stop when their master says so).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent
from locust import events
from locust.env import Environment
from locust.runners import STATE_INIT, MasterRunner, WorkerRunner

logger = logging.getLogger("loadgen.until")

# How often the condition is looked at: often enough that a run overshoots by few
# requests, seldom enough to cost nothing.
_POLL = 0.05
# How long a master waits for its workers' reports after they stopped (they report
# every 3 s); a bound for a busy machine.
_FINAL_REPORT_BOUND = 60.0


@events.init_command_line_parser.add_listener
def _options(parser: Any, **_: Any) -> None:
    parser.add_argument("--until-requests", type=int, default=None,
                        help="(tests) quit once this many requests were made")
    parser.add_argument("--until-failures", type=int, default=0,
                        help="(tests) ... and this many of them failed")
    parser.add_argument("--until-successes", type=int, default=0,
                        help="(tests) ... and this many of them succeeded")
    parser.add_argument("--until-seconds", type=float, default=0.0,
                        help="(tests) ... and this long has passed since the first request")


@events.init.add_listener
def _watch(environment: Environment, runner: Any = None, **_: Any) -> None:
    options = environment.parsed_options
    if options is None or options.until_requests is None or runner is None or isinstance(
            runner, WorkerRunner):
        return  # not asked for (a run that ends by SIGTERM), or a worker
    first_request_at: float | None = None

    def enough() -> bool:
        nonlocal first_request_at
        total = runner.stats.total
        if total.num_requests and first_request_at is None:
            first_request_at = time.monotonic()
        return (total.num_requests >= options.until_requests
                and total.num_failures >= options.until_failures
                and total.num_requests - total.num_failures >= options.until_successes
                and first_request_at is not None
                and time.monotonic() - first_request_at >= options.until_seconds)

    stopping: set[str] = set()  # the workers asked to stop, on a master
    reported: set[str] = set()  # ... and those whose report after stopping arrived

    def on_report(client_id: str, **_: Any) -> None:
        node = runner.clients.get(client_id)
        # Ready again (client_ready re-adds it in state init): a report the master
        # kept, and a worker the quit message will reach. A report while the master has
        # no node for it is discarded.
        if client_id in stopping and node is not None and node.state == STATE_INIT:
            reported.add(client_id)

    def watch() -> None:
        while not enough():
            gevent.sleep(_POLL)
        total = runner.stats.total
        logger.info("until: %d requests (%d failed) made, shutting down",
                    total.num_requests, total.num_failures)
        if isinstance(runner, MasterRunner):
            stopping.update(runner.clients.keys())
            runner.stop()
            # Bounded: a worker that never reports makes the counts differ, which the
            # test then shows, rather than a hang.
            give_up = time.monotonic() + _FINAL_REPORT_BOUND
            while not stopping <= reported and time.monotonic() < give_up:
                gevent.sleep(_POLL)
            logger.info("until: final reports from %d of %d workers", len(reported),
                        len(stopping))
        runner.quit()

    environment.events.worker_report.add_listener(on_report)
    gevent.spawn(watch)
