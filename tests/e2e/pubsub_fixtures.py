"""Fixtures and helpers for driving Pub/Sub over real sockets.

Kept out of conftest.py (owned elsewhere); test modules import the fixtures
they use. ``pubsub`` gives every test a fresh in-process stand-in (the tests of
the stand-in itself use its broker); ``pubsub_backend`` starts the stand-in and
Google's emulator once per session each, for the contract suite that holds one
to the other. Clients are the real google-cloud-pubsub ones, pointed at a
server via PUBSUB_EMULATOR_HOST.

``SANDBOX_PUBSUB`` is what ``ACCELOPS_SANDBOX_PUBSUB`` asks the whole-sandbox
tests to run on; a test that depends on one of the emulator's known departures
from Pub/Sub (``Divergence``) is marked with ``skip_on_emulator(...)``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from sandbox.common.httpserver import free_port
from sandbox.pubsub import PubSubServer, start_pubsub
from sandbox.pubsub.emulator import (
    BACKENDS,
    EmulatorNotInstalledError,
    backend_from_env,
    emulator_command,
    find_emulator,
)
from tests.processes import serving

PROJECT = "sandbox-project"
#: The Pub/Sub the whole-sandbox tests run on ($ACCELOPS_SANDBOX_PUBSUB, else the stand-in).
SANDBOX_PUBSUB = backend_from_env()
# Google's emulator is a JVM: on a busy 2-core machine it can take over a minute to listen.
EMULATOR_READY_SECONDS = 120.0


@dataclass(frozen=True)
class Divergence:
    """A documented Pub/Sub behaviour Google's emulator does not have.

    Each is pinned down by one test in test_pubsub_contract.py that asserts what
    each backend does.
    """

    summary: str


#: Google's emulator 0.8.x against https://cloud.google.com/pubsub/docs (probed with
#: google-cloud-pubsub; the numbers are those the contract tests allow for).
FILTERS_IGNORED = Divergence(
    "Google's emulator ignores subscription filters and delivers every message")
NO_DELIVERY_ATTEMPT_IN_PUSH = Divergence(
    "Google's emulator leaves deliveryAttempt out of push bodies, even with a dead-letter "
    "policy")
RETRIES_A_202 = Divergence(
    "Google's emulator retries a push answered 202 Accepted, which Pub/Sub takes as an ack")
BACKOFF_STRETCHED = Divergence(
    "Google's emulator waits about 3 s between push retries whatever the retry policy's "
    "maximum backoff")
NACK_IGNORES_BACKOFF = Divergence(
    "Google's emulator redelivers a nacked pull message at once, ignoring the retry "
    "policy's minimum backoff")
OVERSIZED_PUBLISH = Divergence(
    "Google's emulator accepts publish requests over Pub/Sub's 10 MB limit and never "
    "answers one over 11,000,000 bytes")
MESSAGE_IDS_RESTART = Divergence(
    "Google's emulator numbers messages from 1 again every time it starts, so a restarted "
    "sandbox reuses message ids")
ATTRIBUTE_LIMITS_UNENFORCED = Divergence(
    "Google's emulator does not enforce Pub/Sub's attribute limits (count, key and value "
    "size, goog prefix)")


def skip_on_emulator(divergence: Divergence) -> pytest.MarkDecorator:
    """Skip a whole-sandbox test when it runs on Google's emulator, which lacks the
    Pub/Sub behaviour the test relies on (it passes on the stand-in and on Pub/Sub)."""
    return pytest.mark.skipif(
        SANDBOX_PUBSUB == "emulator",
        reason=f"relies on documented Pub/Sub behaviour: {divergence.summary}",
    )


def topic_path(name: str) -> str:
    return f"projects/{PROJECT}/topics/{name}"


def subscription_path(name: str) -> str:
    return f"projects/{PROJECT}/subscriptions/{name}"


def wait_for(condition: Callable[[], bool], timeout: float = 30.0, interval: float = 0.02) -> bool:
    """Poll ``condition`` until true or ``timeout`` seconds pass (a bound for a busy
    machine: it returns as soon as the condition holds)."""
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if condition():
            return True
        time.sleep(interval)
    return condition()


@pytest.fixture
def pubsub(monkeypatch: pytest.MonkeyPatch) -> Iterator[PubSubServer]:
    """A fresh sandbox Pub/Sub; PUBSUB_EMULATOR_HOST points at it."""
    server = start_pubsub("127.0.0.1", 0, pull_wait_seconds=0.3)
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", server.address)
    try:
        yield server
    finally:
        server.stop(grace=0.5)


@contextlib.contextmanager
def _publisher_client() -> Iterator[Any]:
    """A real PublisherClient for whatever PUBSUB_EMULATOR_HOST names."""
    from google.cloud import pubsub_v1  # type: ignore[attr-defined,unused-ignore]

    client = pubsub_v1.PublisherClient()
    try:
        yield client
    finally:
        client.stop()


@contextlib.contextmanager
def _subscriber_client() -> Iterator[Any]:
    """A real SubscriberClient for whatever PUBSUB_EMULATOR_HOST names."""
    from google.cloud import pubsub_v1  # type: ignore[attr-defined,unused-ignore]

    client = pubsub_v1.SubscriberClient()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def publisher(pubsub: PubSubServer) -> Iterator[Any]:
    """A real PublisherClient talking to the sandbox."""
    with _publisher_client() as client:
        yield client


@pytest.fixture
def subscriber(pubsub: PubSubServer) -> Iterator[Any]:
    """A real SubscriberClient talking to the sandbox."""
    with _subscriber_client() as client:
        yield client


# ------------------------------------------------ either backend (contract tests)
@dataclass(frozen=True)
class PubSubBackend:
    """A running Pub/Sub endpoint: the stand-in or Google's emulator."""

    name: str  # "standin" | "emulator"
    address: str  # host:port, for PUBSUB_EMULATOR_HOST

    @property
    def is_emulator(self) -> bool:
        return self.name == "emulator"


def emulator_or_skip() -> Path:
    """The emulator's launcher; skips the test, saying how to install it, if missing."""
    try:
        return find_emulator()
    except EmulatorNotInstalledError as exc:
        pytest.skip(str(exc))


@contextlib.contextmanager
def running_backend(name: str, log_dir: Path) -> Iterator[PubSubBackend]:
    """Start the stand-in (in process) or Google's emulator (a process, its output in
    ``log_dir``) on a free 127.0.0.1 port; stopped when the block ends."""
    if name == "standin":
        server = start_pubsub("127.0.0.1", 0, pull_wait_seconds=0.5)
        try:
            yield PubSubBackend("standin", server.address)
        finally:
            server.stop(grace=0.5)
        return
    launcher = emulator_or_skip()
    port = free_port()
    with serving(emulator_command(launcher, port), port, log_dir / "pubsub-emulator.log",
                 ready_seconds=EMULATOR_READY_SECONDS):
        yield PubSubBackend("emulator", f"127.0.0.1:{port}")


@pytest.fixture(scope="session", params=BACKENDS)
def pubsub_backend(request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[PubSubBackend]:
    """Each backend once per session (the contract tests run on both in turn)."""
    with running_backend(request.param, tmp_path_factory.mktemp("pubsub")) as backend:
        yield backend


_unique = itertools.count(1)


@dataclass
class Contract:
    """Real clients on one backend, and resources with names no other test uses
    (a backend lives for the whole session)."""

    backend: PubSubBackend
    publisher: Any
    subscriber: Any
    project: str = PROJECT

    @classmethod
    @contextlib.contextmanager
    def connected(cls, backend: PubSubBackend) -> Iterator[Contract]:
        """Clients on ``backend`` (PUBSUB_EMULATOR_HOST names it while the block runs)."""
        with pytest.MonkeyPatch.context() as env:
            env.setenv("PUBSUB_EMULATOR_HOST", backend.address)
            with _publisher_client() as publisher, _subscriber_client() as subscriber:
                yield cls(backend, publisher, subscriber)

    def unique(self, prefix: str) -> str:
        return f"{prefix}-{next(_unique):05d}"

    def topic(self, prefix: str = "topic") -> str:
        """Create a topic; returns its path."""
        path = f"projects/{self.project}/topics/{self.unique(prefix)}"
        return str(self.publisher.create_topic(name=path).name)

    def subscription(self, topic: str, prefix: str = "sub", **settings: Any) -> str:
        """Create a subscription to ``topic`` with Subscription fields ``settings``."""
        path = f"projects/{self.project}/subscriptions/{self.unique(prefix)}"
        created = self.subscriber.create_subscription(
            request={"name": path, "topic": topic, **settings})
        return str(created.name)

    def publish(self, topic: str, data: bytes, **attributes: str) -> str:
        """Publish and wait for the message id."""
        return str(self.publisher.publish(topic, data, **attributes).result(timeout=10))

    def pull(self, subscription: str, count: int = 1, within: float = 5.0) -> list[Any]:
        """Pull until ``count`` messages came or ``within`` seconds passed (polling
        with return_immediately, so a wait never depends on a server's long poll)."""
        received: list[Any] = []
        give_up = time.monotonic() + within
        while True:
            response = self.subscriber.pull(
                request={"subscription": subscription, "max_messages": max(count, 10),
                         "return_immediately": True},
                timeout=10, retry=None)
            received.extend(response.received_messages)
            if len(received) >= count or time.monotonic() >= give_up:
                return received
            time.sleep(0.05)

    def ack(self, subscription: str, received: list[Any]) -> None:
        self.subscriber.acknowledge(subscription=subscription,
                                    ack_ids=[m.ack_id for m in received])

    def nack(self, subscription: str, received: list[Any]) -> None:
        """Give the messages back (an ack deadline of 0)."""
        self.subscriber.modify_ack_deadline(subscription=subscription,
                                            ack_ids=[m.ack_id for m in received],
                                            ack_deadline_seconds=0)


@pytest.fixture
def contract(pubsub_backend: PubSubBackend) -> Iterator[Contract]:
    """Real clients on the session's backend (both backends, one after the other)."""
    with Contract.connected(pubsub_backend) as connected:
        yield connected


@dataclass
class PushRequest:
    """One request received by the recording push endpoint."""

    at: float
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class RecordingEndpoint:
    """A stdlib HTTP server on 127.0.0.1 that records push requests.

    ``respond(n)`` (n = 1-based request number) picks the HTTP status, so a
    test can fail the first deliveries, fail them all, or ack at once.
    """

    def __init__(self, respond: Callable[[int], int] = lambda _n: 204, port: int = 0) -> None:
        self.requests: list[PushRequest] = []
        self.respond = respond
        self._lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                with endpoint._lock:
                    endpoint.requests.append(
                        PushRequest(
                            at=time.monotonic(),
                            path=self.path,
                            headers={k.lower(): v for k, v in self.headers.items()},
                            body=json.loads(raw),
                        )
                    )
                    status = endpoint.respond(len(endpoint.requests))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/push"

    def received(self) -> list[PushRequest]:
        with self._lock:
            return list(self.requests)

    def wait(self, count: int = 1, timeout: float = 10.0) -> bool:
        """Whether ``count`` requests have arrived, waiting up to ``timeout`` seconds."""
        return wait_for(lambda: len(self.received()) >= count, timeout)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def push_endpoint() -> Iterator[RecordingEndpoint]:
    """A recording HTTP push endpoint (acks with 204 unless told otherwise)."""
    endpoint = RecordingEndpoint()
    try:
        yield endpoint
    finally:
        endpoint.close()


@pytest.fixture
def push_endpoints() -> Iterator[Callable[..., RecordingEndpoint]]:
    """Start recording push endpoints on demand, ``push_endpoints(respond, port=0)``;
    every one is closed after the test."""
    started: list[RecordingEndpoint] = []

    def start(respond: Callable[[int], int] = lambda _n: 204, port: int = 0,
              ) -> RecordingEndpoint:
        endpoint = RecordingEndpoint(respond, port)
        started.append(endpoint)
        return endpoint

    try:
        yield start
    finally:
        for endpoint in started:
            endpoint.close()


_FUNCTION_SOURCE = """
import json

import functions_framework

OUT = {out!r}


@functions_framework.cloud_event
def on_message(event):
    with open(OUT, "a", encoding="utf-8") as handle:
        record = {{"id": event["id"], "type": event["type"], "source": event["source"],
                  "data": event.data}}
        handle.write(json.dumps(record) + "\\n")
"""


@dataclass
class FunctionApp:
    """A functions-framework CloudEvent function served by werkzeug on 127.0.0.1."""

    url: str
    events_file: Path

    def events(self) -> list[dict[str, Any]]:
        if not self.events_file.exists():
            return []
        lines = self.events_file.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line]


@pytest.fixture
def cloud_event_function(tmp_path: Path) -> Iterator[FunctionApp]:
    """Build a functions_framework app in-process and serve it on an ephemeral port."""
    import functions_framework
    from werkzeug.serving import make_server

    source = tmp_path / "main.py"
    events_file = tmp_path / "events.jsonl"
    source.write_text(textwrap.dedent(_FUNCTION_SOURCE.format(out=str(events_file))))
    app = functions_framework.create_app("on_message", str(source), "cloudevent")  # type: ignore[no-untyped-call,unused-ignore]
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield FunctionApp(url=f"http://127.0.0.1:{server.server_port}/", events_file=events_file)
    finally:
        server.shutdown()
        server.server_close()
