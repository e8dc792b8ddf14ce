"""The Locust plugin that sends one metric record per request to Pub/Sub.

Every ``events.request`` becomes a record (``records.build_record``) in an
:class:`~services.loadgen.outbox.Outbox`; one sender greenlet publishes the closed
batches, each as one message whose data is a JSON array of records, with attributes
``test_id`` and ``records``. Publishing never happens on a user's greenlet, so a slow
Pub/Sub does not slow the load down; it only makes records wait.

Batches close by count (``--metrics-batch-size``), by bytes (bodies stay under 9 MB),
by age (``--metrics-flush-interval``, checked by the sender) and at test stop. A
failed publish keeps its batch for the next attempt. At test stop the plugin waits
(at most ``--metrics-publish-timeout``) until Pub/Sub has confirmed everything; at quit
it logs how many records could not be published, if any, and sets Locust's exit code
to 1, so a job that lost metrics does not look like a clean run.

At test start and at test stop the plugin also queues a run record
(:mod:`services.loadgen.runs`): one message with attributes ``kind=run`` and
``test_id``, sent by the same greenlet with the same retries, waited for by the same
flush and counted the same way if lost. Every worker sends its own copy (they are
identical but for ``at``; ingest keys them by test id and phase). The master sends
none, but at test start it copies its ``-u``/``-r``/``-t`` into options Locust
forwards to the workers, which would otherwise only know their own defaults.

google-cloud-pubsub talks gRPC from background threads, which Locust's gevent
monkey-patching turns into greenlets; gRPC's C core must then be told to cooperate
with gevent before its first channel exists, which importing this module does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, Literal, Protocol

import gevent
from flask import jsonify, request
from gevent.event import Event
from locust import __version__ as LOCUST_VERSION
from locust.env import Environment
from locust.event import Events
from locust.exception import RPCSendError
from locust.runners import STATE_RUNNING, STATE_SPAWNING, MasterRunner, WorkerRunner

from shared import pubsub
from shared.errors import ConfigError, NotFoundError, PermanentError, TransientError

from .master import take_over_run_time
from .outbox import Outbox, RunMessage
from .records import RunInfo, build_record, encode_record, message_attributes, message_data
from .revision import loadgen_revision
from .runs import (
    asked_parameters,
    build_run_record,
    forwarded_options,
    run_attributes,
    run_parameters,
)
from .settings import Settings, add_arguments, settings_from

__all__ = ["MetricsPlugin", "forward_run_parameters", "install", "refuse_swarm_without_model",
           "select_user_classes", "use_gevent_grpc"]

logger = logging.getLogger("loadgen.metrics")

# How soon a failed publish is retried while a flush is being waited for.
_DRAIN_RETRY = 0.5


class Publish(Protocol):
    def __call__(self, project: str, topic: str, data: bytes,
                 attributes: dict[str, str] | None = None, *, timeout: float = ...) -> str: ...


def use_gevent_grpc() -> None:
    """Make gRPC's C core yield to gevent (idempotent; before any channel exists)."""
    from grpc.experimental import gevent as grpc_gevent

    grpc_gevent.init_gevent()


use_gevent_grpc()


class MetricsPlugin:
    """Records for one Locust process (local runner or worker; the master has none)."""

    def __init__(self, environment: Environment, settings: Settings,
                 publish: Publish = pubsub.publish,
                 clock: Callable[[], float] = time.monotonic, *,
                 revision: str | None = None,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.environment = environment
        self.settings = settings
        self.worker = _worker_id(environment.runner)
        self.run = _run_info(settings, self.worker)
        self.revision = revision
        self.outbox = Outbox(settings.metrics_batch_size, settings.metrics_flush_interval)
        self.failed_requests = 0
        self.last_error: str | None = None
        self._publish = publish
        self._clock = clock
        self._wall_clock = wall_clock
        # A start record was queued and its stop record not yet.
        self._running = False
        self._wake = Event()
        self._sender: Any = None  # gevent.Greenlet
        self._retry_at = 0.0
        self._drain_until: float | None = None
        # Set by a flush that gave up, so quitting right after it does not wait again.
        self._deadline: float | None = None

    # ------------------------------------------------------------ Locust events
    def register(self, events: Events) -> None:
        _listen(events.request, self.on_request)
        _listen(events.test_start, self.on_test_start)
        _listen(events.test_stop, self.on_test_stop)
        _listen(events.quitting, self.on_quitting)

    def on_request(self, **event: Any) -> None:
        runner = self.environment.runner
        record = build_record(event, self.run, runner.user_count if runner else None)
        if record["exception"] is not None:
            self.failed_requests += 1
        if self.outbox.add(encode_record(record), self._clock()):
            self._wake.set()

    def on_test_start(self, environment: Environment, **_: Any) -> None:
        # A worker has the master's options (test id included) only from now on.
        try:
            self.reconfigure(settings_from(environment.parsed_options))
        except ConfigError as exc:
            # Options edited in the web UI: keep the last valid ones rather than no records.
            logger.error("loadgen: %s; keeping the previous settings", exc.message)
        if isinstance(environment.runner, WorkerRunner):
            logger.info("loadgen: test id %s on worker %s", self.settings.test_id, self.worker)
        self._queue_run("start")
        self._running = True

    def on_test_stop(self, environment: Environment, **_: Any) -> None:
        if self._running:
            self._queue_run("stop")
            self._running = False
        self.flush()
        logger.info("loadgen: %s", self.summary())
        runner = environment.runner
        if isinstance(runner, WorkerRunner):
            # The worker's last requests, reported now: the master forgets a worker
            # once it says client_stopped (next, after these listeners) and discards
            # its later reports, which would leave the master's totals short.
            # (Locust has no public way to send a report now.)
            try:
                runner._send_stats()
            except RPCSendError as exc:
                # The master is gone (a worker told to stop by SIGTERM): its totals
                # cannot be completed; the records are published all the same.
                logger.warning("loadgen: last statistics not sent to the master: %s", exc)

    def on_quitting(self, environment: Environment, **_: Any) -> None:
        runner = environment.runner
        if (runner is not None and not isinstance(runner, MasterRunner)
                and runner.state in (STATE_SPAWNING, STATE_RUNNING)):
            # SIGTERM quits without stopping the users first; stop them so their last
            # records are flushed with the rest (this fires test_stop).
            runner.stop()
        lost = self.close()
        if lost:
            logger.error(
                "loadgen: %d records of test %s were not published to %s (%s)", lost,
                self.settings.test_id, self._topic(), self.last_error or "shutdown")
            environment.process_exit_code = 1
        if self.outbox.lost_runs:
            logger.error(
                "loadgen: %d run records of test %s were not published to %s (%s)",
                self.outbox.lost_runs, self.settings.test_id, self._topic(),
                self.last_error or "shutdown")
            environment.process_exit_code = 1

    # ------------------------------------------------------------ sending
    def start(self) -> None:
        if self._sender is None or self._sender.dead:
            self._sender = gevent.spawn(self._send_loop)

    def reconfigure(self, settings: Settings) -> None:
        """Apply the options of a new test run (tests started from the web UI)."""
        if (settings.metrics_batch_size, settings.metrics_flush_interval) != (
                self.settings.metrics_batch_size, self.settings.metrics_flush_interval):
            self.outbox.resize(settings.metrics_batch_size, settings.metrics_flush_interval)
            self._wake.set()
        self.settings = settings
        self.run = _run_info(settings, self.worker)
        self._deadline = None

    def flush(self) -> bool:
        """Publish everything pending; True once Pub/Sub has confirmed it all, False if
        the deadline (``--metrics-publish-timeout``) passed first."""
        deadline = self._begin_drain()
        self.outbox.flush()
        self._wake.set()
        while not self.outbox.idle and self._clock() < deadline and self._sending():
            gevent.sleep(0.02)
        self._drain_until = None
        done = self.outbox.idle
        if done:
            self._deadline = None
        return done

    def close(self) -> int:
        """Final flush at quit; returns how many records will never be published (run
        records lost are ``outbox.lost_runs``)."""
        deadline = self._begin_drain()
        self.outbox.close()
        self._wake.set()
        if self._sending():
            self._sender.join(timeout=max(0.0, deadline - self._clock()))
        if self._sending():
            # A publish still in flight past the deadline: its batch counts as lost.
            self._sender.kill(block=True, timeout=1.0)
        return self.outbox.lost_records

    def summary(self) -> str:
        box = self.outbox
        return (f"test {self.settings.test_id}: {box.published_records} records and "
                f"{box.published_runs} run records published in "
                f"{box.published_messages} messages to {self._topic()}; "
                f"{self.failed_requests} failed requests; {box.publish_errors} publish errors; "
                f"{box.pending_records} records pending")

    def _queue_run(self, phase: Literal["start", "stop"]) -> None:
        environment = self.environment
        options = environment.parsed_options
        record = build_run_record(
            phase, self._wall_clock(), self.run, run_parameters(options),
            host=environment.host or getattr(options, "host", None),
            locust_version=LOCUST_VERSION, loadgen_revision=self.revision)
        if self.outbox.add_run(RunMessage(self.run.test_id, encode_record(record))):
            self._wake.set()

    def _begin_drain(self) -> float:
        if self._deadline is None:
            self._deadline = self._clock() + self.settings.metrics_publish_timeout
        self._drain_until = self._deadline
        self._retry_at = 0.0
        return self._deadline

    def _sending(self) -> bool:
        return self._sender is not None and not self._sender.dead

    def _topic(self) -> str:
        return pubsub.topic_path(self.settings.metrics_project, self.settings.metrics_topic)

    def _send_loop(self) -> None:
        while True:
            # A quarter of the flush interval: a batch leaves at most 25% later than due.
            self._wake.wait(max(0.01, min(0.25, self.settings.metrics_flush_interval / 4)))
            self._wake.clear()
            now = self._clock()
            self.outbox.flush_due(now)
            draining = self._drain_until is not None and now < self._drain_until
            if self.outbox.closed and (not draining or self.outbox.idle):
                return
            if now < self._retry_at or self.outbox.head() is None:
                continue
            if not self._send_queued(draining):
                pause = _DRAIN_RETRY if draining else self.settings.metrics_flush_interval
                self._retry_at = self._clock() + pause

    def _send_queued(self, draining: bool) -> bool:
        """Publish closed batches (and run messages) in order; False at the first one that
        failed."""
        settings = self.settings
        while (batch := self.outbox.head()) is not None:
            timeout = settings.metrics_publish_timeout
            if draining and self._drain_until is not None:
                timeout = min(timeout, self._drain_until - self._clock())
                if timeout <= 0:
                    return False
            if isinstance(batch, RunMessage):
                data, attributes = batch.data, run_attributes(batch.test_id)
            else:
                data = message_data(batch)
                attributes = message_attributes(settings.test_id, len(batch))
            try:
                self._publish(settings.metrics_project, settings.metrics_topic,
                              data, attributes, timeout=timeout)
            except (TransientError, NotFoundError, ConfigError) as exc:
                # Unreachable, rate-limited, no topic (yet), no credentials: may pass.
                self._failed(exc)
                return False
            except PermanentError as exc:
                # Pub/Sub refused this message itself; sending it again cannot help.
                self.outbox.rejected(batch)
                self._failed(exc, dropped=batch)
                continue
            except Exception as exc:
                # Unexpected, but the sender must outlive it or every later record is lost.
                logger.exception("loadgen: publishing failed unexpectedly")
                self.outbox.failed()
                self.last_error = f"{type(exc).__name__}: {exc}"
                return False
            self.outbox.published(batch)
        return True

    def _failed(self, exc: Exception, dropped: list[bytes] | RunMessage | None = None) -> None:
        message = str(exc)
        if isinstance(dropped, RunMessage):
            logger.error("loadgen: a run record dropped: %s", message)
        elif dropped is not None:
            logger.error("loadgen: %d records dropped: %s", len(dropped), message)
        else:
            self.outbox.failed()
            if message != self.last_error:
                logger.warning("loadgen: publish failed, %d records kept for retry: %s",
                               self.outbox.queued_records, message)
        self.last_error = message


def _listen(hook: Any, handler: Callable[..., None]) -> None:
    # Locust's EventHook.add_listener has no annotations; keep the untyped call here.
    hook.add_listener(handler)


def _run_info(settings: Settings, worker: str | None) -> RunInfo:
    return RunInfo(test_id=settings.test_id, server=settings.server, model=settings.model,
                   accelerator=settings.accelerator, slos=settings.slos, worker=worker)


def _worker_id(runner: Any) -> str | None:
    """A worker's Locust client id (``<host name>_<random hex>``, the id its master
    knows it by; a pod name on GKE), None for a single process."""
    return str(runner.client_id) if isinstance(runner, WorkerRunner) else None


def forward_run_parameters(environment: Environment, run_time_s: float | None = None,
                           **_: Any) -> None:
    """Master, at test start: put its users, spawn rate and run time where the spawn
    messages carry them to the workers (Locust forwards only options it does not own).
    ``run_time_s``: the run time the plugin took over from Locust (``master.py``)."""
    options = environment.parsed_options
    if options is not None:
        parameters = asked_parameters(options)
        if run_time_s is not None:
            parameters = replace(parameters, run_time_s=run_time_s)
        vars(options).update(forwarded_options(parameters))


def refuse_swarm_without_model(web_ui: Any, environment: Environment) -> None:
    """Master waiting for tests: answer ``POST /swarm`` without a model as Locust answers
    a form it cannot use (``success: false`` and why) and start nothing; its workers
    would otherwise send every request to a model named ``""``."""
    def check() -> Any:
        if request.method != "POST" or not request.path.endswith("/swarm"):
            return None
        options = environment.parsed_options
        if (request.form.get("model") or getattr(options, "model", None) or "").strip():
            return None
        message = ("loadgen: --model: name the model of the test (the model field of "
                   "POST /swarm, or LOADGEN_MODEL)")
        logger.error(message)
        return jsonify({"success": False, "message": message, "host": environment.host})

    web_ui.app.before_request(check)


def select_user_classes(environment: Environment, server: str) -> None:
    """Keep only the user classes for ``server`` (classes declare it as ``server``).

    Raises ConfigError when none is left (e.g. ``--server saxml TritonUser``).
    """
    chosen = [cls for cls in environment.user_classes if getattr(cls, "server", None) == server]
    if not chosen:
        names = ", ".join(cls.__name__ for cls in environment.user_classes) or "none"
        raise ConfigError(f"--server: no user class for {server!r} among: {names}",
                          field="--server", rule="user class")
    environment.user_classes[:] = chosen


def install(events: Events) -> None:
    """Add the options and the plugin to Locust (call from the locustfile)."""
    # Asked now, while importing the locustfile: git runs as a subprocess, which yields
    # to other greenlets, and once a worker's runner exists one of them may be starting
    # the test before the plugin has registered for it.
    revision = loadgen_revision()

    def on_parser(parser: Any, **_: Any) -> None:
        add_arguments(parser)

    def on_init(environment: Environment, runner: Any = None, web_ui: Any = None,
                **_: Any) -> None:
        options = environment.parsed_options
        # Workers, and a master whose tests start from its web API (the GKE Deployments),
        # learn the model with each test; the master refuses a test without one.
        waits_for_tests = isinstance(runner, WorkerRunner) or (
            isinstance(runner, MasterRunner) and not getattr(options, "headless", False))
        try:
            settings = settings_from(options, model_required=not waits_for_tests)
            if not isinstance(runner, WorkerRunner):
                # Workers run what the master dispatches.
                select_user_classes(environment, settings.server)
        except ConfigError as exc:
            logger.error("loadgen: %s", exc.message)
            raise SystemExit(2) from exc
        if options is not None:
            # Recorded back so a master hands the same id to its workers.
            options.test_id = settings.test_id
        if not isinstance(runner, WorkerRunner):
            logger.info("loadgen: test id %s (server %s, model %s, accelerator %s%s)",
                        settings.test_id, settings.server, settings.model,
                        settings.accelerator or "unset", ", streamed" if settings.stream else "")
        if isinstance(runner, MasterRunner):
            # Requests (and records) happen on the workers; they learn -u/-r/-t from this.
            run_time = take_over_run_time(environment, runner)
            if web_ui is not None:
                refuse_swarm_without_model(web_ui, environment)
            _listen(environment.events.test_start,
                    partial(forward_run_parameters, run_time_s=run_time))
            return
        # Listening before anything that could yield: a worker's runner is already taking
        # the master's messages, and missing test_start would lose the test id.
        plugin = MetricsPlugin(environment, settings, revision=revision)
        plugin.register(environment.events)
        try:
            # Now rather than mid-test: creating the client blocks every greenlet briefly.
            pubsub.warm_up()
        except ConfigError as exc:
            logger.error("loadgen: %s", exc.message)
            raise SystemExit(2) from exc
        plugin.start()

    _listen(events.init_command_line_parser, on_parser)
    _listen(events.init, on_init)
