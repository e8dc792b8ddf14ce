"""Fixtures and helpers for driving the sandbox Pub/Sub over real sockets.

Kept out of conftest.py (owned elsewhere); test modules import the fixtures
they use. Every test gets a fresh server on an ephemeral 127.0.0.1 port and
real google-cloud-pubsub clients pointed at it via PUBSUB_EMULATOR_HOST.
"""

from __future__ import annotations

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

from sandbox.pubsub import PubSubServer, start_pubsub

PROJECT = "sandbox-project"


def topic_path(name: str) -> str:
    return f"projects/{PROJECT}/topics/{name}"


def subscription_path(name: str) -> str:
    return f"projects/{PROJECT}/subscriptions/{name}"


def wait_for(condition: Callable[[], bool], timeout: float = 5.0, interval: float = 0.02) -> bool:
    """Poll ``condition`` until true or ``timeout`` seconds pass."""
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


@pytest.fixture
def publisher(pubsub: PubSubServer) -> Iterator[Any]:
    """A real PublisherClient talking to the sandbox."""
    from google.cloud import pubsub_v1

    client = pubsub_v1.PublisherClient()
    try:
        yield client
    finally:
        client.stop()


@pytest.fixture
def subscriber(pubsub: PubSubServer) -> Iterator[Any]:
    """A real SubscriberClient talking to the sandbox."""
    from google.cloud import pubsub_v1

    client = pubsub_v1.SubscriberClient()
    try:
        yield client
    finally:
        client.close()


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

    def __init__(self) -> None:
        self.requests: list[PushRequest] = []
        self.respond: Callable[[int], int] = lambda _n: 204
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

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
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
