"""A headless master's run time: stop the workers first, then quit.

Locust's own ``--run-time`` on a headless master calls ``MasterRunner.quit``, which
tells the workers to quit without stopping them first and gives their final
statistics a fixed 0.5 s. A worker first stops its users and runs its test-stop
listeners (this plugin's flush to Pub/Sub), so on a busy machine its last report
arrives after the master has written ``--json-file`` and exited: the master's totals
fall short of the requests made (Locust issues #2708, #1563). The load generator's
records are complete either way, but Locust's own count is what ``accelops loadtest``
waits for in BigQuery, and its aggregate is what the report holds the BigQuery
figures against.

So the plugin takes the run time over on a headless master: Locust sees no
``--run-time`` (it would otherwise start its own timer), and that long after the test
starts the master stops the test and then quits. ``MasterRunner.stop`` returns once
every worker has said ``client_stopped``, and each worker sends its last statistics
just before that message (``MetricsPlugin.on_test_stop``), on the same connection, so
the master has merged every request when it writes its totals. (A report a worker
sends after ``client_stopped`` is discarded: the master has forgotten the worker
until it is ready again.) Before it quits, the master waits (bounded) until each
worker is ready again, so its quit message reaches them all. The run time stays in the
run records (``forward_run_parameters`` is handed it).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent
from locust.env import Environment
from locust.runners import MasterRunner

from .runs import run_time_seconds

__all__ = ["READY_BOUND", "RunTimeLimit", "take_over_run_time"]

logger = logging.getLogger("loadgen.master")

# Beyond --stop-timeout, how long a stopped worker may take to say it is ready again.
READY_BOUND = 10.0
_POLL = 0.1


class RunTimeLimit:
    """Ends a master's test ``seconds`` after it started; see the module's docstring."""

    def __init__(self, runner: MasterRunner, seconds: float) -> None:
        self.runner = runner
        self.seconds = seconds
        self._timer: Any = None  # gevent.Greenlet

    def on_test_start(self, **_: Any) -> None:
        if self._timer is None:  # one test per headless run
            self._timer = gevent.spawn_later(self.seconds, self.finish)

    def finish(self) -> None:
        runner = self.runner
        workers = set(runner.clients.keys())
        logger.info("loadgen: run time of %gs reached, stopping %d workers", self.seconds,
                    len(workers))
        # Bounded by Locust: --stop-timeout plus 60 s for the workers to stop.
        runner.stop()
        logger.info("loadgen: workers stopped, %d requests counted",
                    runner.stats.total.num_requests)
        # A stopped worker is not the master's client until it says client_ready,
        # --stop-timeout seconds later; quitting before that would not reach it, and it
        # would run on until it missed the master's heartbeats.
        give_up = time.monotonic() + (runner.environment.stop_timeout or 0.0) + READY_BOUND
        while not workers <= set(runner.clients.keys()) and time.monotonic() < give_up:
            gevent.sleep(_POLL)
        logger.info("loadgen: %d of %d workers ready to quit; shutting down",
                    len(workers & set(runner.clients.keys())), len(workers))
        runner.quit()


def take_over_run_time(environment: Environment, runner: Any) -> float | None:
    """On a headless master with ``--run-time``: install :class:`RunTimeLimit` in place of
    Locust's timer and return the run time in seconds; otherwise None (nothing done)."""
    options = environment.parsed_options
    if not isinstance(runner, MasterRunner) or options is None or not options.headless:
        return None
    seconds = run_time_seconds(getattr(options, "run_time", None))
    if seconds is None:
        return None
    # Read by Locust's main after the init event: without it Locust starts no timer.
    options.run_time = None
    limit = RunTimeLimit(runner, seconds)
    _listen(environment.events.test_start, limit.on_test_start)
    return seconds


def _listen(hook: Any, handler: Any) -> None:
    # Locust's EventHook.add_listener has no annotations; keep the untyped call here.
    hook.add_listener(handler)
