"""The load generator end to end: real Locust processes, fake inference servers over HTTP,
and every record read back from the sandbox Pub/Sub with the real client.

Locust runs as a subprocess (it monkey-patches the standard library with gevent, which
must not happen inside pytest). What Locust itself reports is the count the records
must match: its ``--json-file``, written from the final statistics at shutdown (the
``--csv`` stats file is rewritten once a second and misses the last second's requests).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from sandbox.pubsub import PubSubServer
from shared.metrics.record import MetricRecord
from tests.e2e import pubsub_fixtures as fx

pubsub = fx.pubsub
publisher = fx.publisher
subscriber = fx.subscriber

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
LOCUSTFILE = REPO / "services" / "loadgen" / "locustfile.py"
TOPIC = "loadtest-metrics"
SUBSCRIPTION = fx.subscription_path("loadtest-metrics-check")
FIELDS = tuple(MetricRecord.model_fields)

Reply = tuple[int, dict[str, Any] | list[Any]]


class FakeServer:
    """A stdlib HTTP/1.1 server on 127.0.0.1 answering POSTs with ``reply(path, body)``."""

    def __init__(self, reply: Callable[[str, Any], Reply]) -> None:
        self.requests = 0
        lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as Locust's client expects
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    server.requests += 1
                status, payload = reply(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()


def triton_reply(path: str, body: Any) -> Reply:
    """Triton's v2 JSON answer for model ``toy-lm``; 404 for any other, as Triton does."""
    if path != "/v2/models/toy-lm/infer":
        model = path.split("/")[3]
        return 404, {"error": f"Request for unknown model: '{model}' is not found"}
    prompt = body["inputs"][0]["data"][0]
    return 200, {"model_name": "toy-lm", "model_version": "1", "outputs": [
        {"name": "text_output", "datatype": "BYTES", "shape": [1, 1],
         "data": ["tokens from a toy model"]},
        {"name": "num_input_tokens", "datatype": "INT32", "shape": [1, 1],
         "data": [len(prompt.split())]},
    ]}


def saxml_reply(path: str, body: Any) -> Reply:
    """A Saxml HTTP proxy: a list of ``[text, score]`` samples."""
    if path != "/generate" or body.get("model") != "/sax/test/lm":
        return 404, {"detail": "model not published"}
    return 200, [["a short generated answer", -1.25]]


@pytest.fixture
def triton() -> Iterator[FakeServer]:
    server = FakeServer(triton_reply)
    yield server
    server.close()


@pytest.fixture
def saxml() -> Iterator[FakeServer]:
    server = FakeServer(saxml_reply)
    yield server
    server.close()


@pytest.fixture
def metrics_topic(pubsub: PubSubServer, publisher: Any, subscriber: Any) -> str:
    """The metrics topic with a pull subscription to read records back."""
    topic = fx.topic_path(TOPIC)
    publisher.create_topic(name=topic)
    subscriber.create_subscription(name=SUBSCRIPTION, topic=topic)
    return topic


@dataclass
class Run:
    """A finished Locust run: exit code, log, and its own request counts."""

    returncode: int
    output: str
    requests: int
    failures: int


def locust_command(tmp_path: Path, host: str, *options: str,
                   seconds: int | None = 3) -> list[str]:
    """A headless Locust run with 2 users against ``host``; stats go to ``stats.json``."""
    limit = ["-t", f"{seconds}s"] if seconds is not None else []
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "-u", "2",
            "-r", "2", *limit, "--host", host, "--only-summary",
            "--json-file", str(tmp_path / "stats"), "--metrics-project", fx.PROJECT, *options]


def finished(tmp_path: Path, returncode: int, output: str) -> Run:
    """Locust's counts from ``stats.json`` (one entry per request name)."""
    entries = json.loads((tmp_path / "stats.json").read_text())
    return Run(returncode, output, sum(e["num_requests"] for e in entries),
               sum(e["num_failures"] for e in entries))


def run_locust(tmp_path: Path, host: str, *options: str, seconds: int = 3,
               emulator: str | None = None) -> Run:
    """Run Locust to the end; ``emulator`` overrides where it finds Pub/Sub."""
    env = dict(os.environ)
    if emulator is not None:
        env["PUBSUB_EMULATOR_HOST"] = emulator
    done = subprocess.run(locust_command(tmp_path, host, *options, seconds=seconds),
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    return finished(tmp_path, done.returncode, done.stdout + done.stderr)


@dataclass
class Message:
    """One pulled message: its attributes and the records of its JSON array."""

    attributes: dict[str, str]
    records: list[dict[str, Any]]


def pull_all(subscriber: Any) -> list[Message]:
    """Every message on the check subscription (acknowledged), until a pull comes back empty."""
    messages: list[Message] = []
    while True:
        response = subscriber.pull(
            # A few at a time: against an emulator the client's channel keeps gRPC's
            # 4 MB receive limit.
            request={"subscription": SUBSCRIPTION, "max_messages": 10}, timeout=10)
        if not response.received_messages:
            return messages
        for received in response.received_messages:
            body = json.loads(received.message.data.decode("utf-8"))
            assert isinstance(body, list), "a message's data is a JSON array of records"
            messages.append(Message(dict(received.message.attributes), body))
        subscriber.acknowledge(request={"subscription": SUBSCRIPTION, "ack_ids": [
            m.ack_id for m in response.received_messages]})


def check_records(messages: list[Message], test_id: str) -> list[MetricRecord]:
    """Records of all messages: valid, of this test, counted by the attributes, unique."""
    records = []
    for message in messages:
        assert message.attributes == {"test_id": test_id, "records": str(len(message.records))}
        for raw in message.records:
            assert tuple(raw) == FIELDS
            records.append(MetricRecord.model_validate(raw))
    assert {r.test_id for r in records} == {test_id}
    keys = [(r.start_time, r.response_time, r.request_name) for r in records]
    assert len(set(keys)) == len(keys), "a record arrived twice"
    return records


def test_every_triton_request_arrives_once_and_a_partial_batch_is_flushed_at_quit(
        tmp_path: Path, metrics_topic: str, subscriber: Any, triton: FakeServer) -> None:
    # Batches far larger than the run and no flush by age: only the final flush sends.
    run = run_locust(tmp_path, triton.url, "--model", "toy-lm", "--accelerator", "cpu",
                     "--bad-request-ratio", "0.2", "--metrics-batch-size", "100000",
                     "--metrics-flush-interval", "60", "--exit-code-on-error", "0")

    assert run.returncode == 0, run.output
    found = re.search(r"loadgen: test id (\S+) ", run.output)
    assert found, run.output
    test_id = found.group(1)
    messages = pull_all(subscriber)
    records = check_records(messages, test_id)
    assert len(messages) == 1
    assert 0 < run.requests == len(records) <= triton.requests
    failed = [r for r in records if r.failed]
    assert len(failed) == run.failures > 0
    assert all(r.model_name == "loadgen-no-such-model" for r in failed)
    assert all("HTTP 404: Request for unknown model" in (r.exception or "") for r in failed)
    ok = [r for r in records if not r.failed]
    assert {(r.server, r.accelerator, r.model_name, r.model_method, r.users) for r in ok} == {
        ("triton", "cpu", "toy-lm", "infer", 2)}
    assert all(r.num_output_tokens == 5 and r.num_input_tokens for r in ok)
    assert f"{len(records)} records published in 1 messages" in run.output


def test_records_are_flushed_by_age_while_the_test_runs(
        tmp_path: Path, metrics_topic: str, subscriber: Any, triton: FakeServer) -> None:
    run = run_locust(tmp_path, triton.url, "--model", "toy-lm", "--test-id", "by-age-1",
                     "--metrics-batch-size", "100000", "--metrics-flush-interval", "0.3")

    assert run.returncode == 0, run.output
    messages = pull_all(subscriber)
    records = check_records(messages, "by-age-1")
    assert len(messages) >= 4
    assert len(records) == run.requests


def test_saxml_records_arrive_in_batches_of_the_configured_size(
        tmp_path: Path, metrics_topic: str, subscriber: Any, saxml: FakeServer) -> None:
    run = run_locust(tmp_path, saxml.url, "--server", "saxml", "--model", "/sax/test/lm",
                     "--accelerator", "v5litepod-8", "--test-id", "saxml-run-1",
                     "--metrics-batch-size", "100", "--metrics-flush-interval", "60")

    assert run.returncode == 0, run.output
    messages = pull_all(subscriber)
    records = check_records(messages, "saxml-run-1")
    assert len(records) == run.requests > 100
    sizes = sorted((len(m.records) for m in messages), reverse=True)
    assert sizes[:-1] == [100] * (len(sizes) - 1)
    assert 0 < sizes[-1] <= 100
    assert {(r.server, r.model_name, r.model_method, r.request_name, r.accelerator)
            for r in records} == {("saxml", "/sax/test/lm", "generate", "/generate",
                                   "v5litepod-8")}
    assert all(r.num_output_tokens == 4 and r.tokenizer == "whitespace" for r in records)


def test_when_pubsub_is_unreachable_locust_fails_and_says_how_many_records_were_lost(
        tmp_path: Path, triton: FakeServer) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{probe.getsockname()[1]}"
    run = run_locust(tmp_path, triton.url, "--model", "toy-lm", "--test-id", "lost-1",
                     "--metrics-publish-timeout", "2", seconds=2, emulator=closed)

    assert run.returncode == 1
    lost = re.search(r"(\d+) records of test lost-1 were not published", run.output)
    assert lost, run.output
    assert int(lost.group(1)) == run.requests > 0


def test_sigterm_stops_the_users_and_publishes_their_records_before_exit(
        tmp_path: Path, metrics_topic: str, subscriber: Any, triton: FakeServer) -> None:
    # How a pod ends on GKE: no run time limit, a SIGTERM instead.
    process = subprocess.Popen(
        locust_command(tmp_path, triton.url, "--model", "toy-lm", "--test-id", "sigterm-1",
                       "--metrics-batch-size", "100000", "--metrics-flush-interval", "60",
                       seconds=None),
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert fx.wait_for(lambda: triton.requests > 100, timeout=15)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    finally:
        process.kill()
    run = finished(tmp_path, process.returncode, output)

    assert run.returncode == 0, run.output
    records = check_records(pull_all(subscriber), "sigterm-1")
    assert len(records) == run.requests > 100
