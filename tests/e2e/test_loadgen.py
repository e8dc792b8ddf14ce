"""The load generator end to end: real Locust processes, fake inference servers over HTTP
(and the sandbox's own Triton and Saxml stand-in where the protocol matters: streaming,
unpublished models), and every record read back from the sandbox Pub/Sub with the real
client.

Locust runs as a subprocess (it monkey-patches the standard library with gevent, which
must not happen inside pytest). What Locust itself reports is the count the records
must match: its ``--json-file``, written from the final statistics at shutdown (the
``--csv`` stats file is rewritten once a second and misses the last second's requests).
Run records (``kind=run``) arrive on the same topic and are checked against what the
command line asked for.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import requests

from sandbox.common.httpserver import free_port
from sandbox.pubsub import PubSubServer
from shared.metrics.record import MetricRecord
from shared.metrics.run import RunRecord
from tests.e2e import pubsub_fixtures as fx
from tests.e2e.inference_fixtures import (
    SAXML_MODEL,
    STREAM_MODEL,
    InferenceProcess,
    inference_target,
)
from tests.e2e.locust_options import UNTIL, until

pubsub = fx.pubsub
publisher = fx.publisher
subscriber = fx.subscriber

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
LOCUSTFILE = REPO / "services" / "loadgen" / "locustfile.py"
# The run time every run asks for: only the bound of a run whose condition never comes
# (each run ends by its --until-* condition first), below the 60-second flush interval
# the tests use to mean "no flush by age".
BOUND = 50
TOPIC = "loadtest-metrics"
SUBSCRIPTION = fx.subscription_path("loadtest-metrics-check")
FIELDS = tuple(MetricRecord.model_fields)
RUN_FIELDS = tuple(RunRecord.model_fields)
REVISION = "e2e-rev-1"

Reply = tuple[int, dict[str, Any] | list[Any]]


class _LoopbackServer:
    """A threaded stdlib HTTP server on a free 127.0.0.1 port, serving ``handler``."""

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._http.daemon_threads = True
        threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()


class FakeServer(_LoopbackServer):
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

        self._serve(Handler)


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


class StreamingServer(_LoopbackServer):
    """A Triton stand-in for ``generate_stream``: ``toy-lm-stream`` streams three token
    events; any other model streams one, then an error event (status 200, as Triton does
    once the stream has started)."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                events: list[dict[str, Any]] = [{"text_output": "one"}]
                if self.path == f"/v2/models/{STREAM_MODEL}/generate_stream":
                    events += [{"text_output": " two"}, {"text_output": " three"}]
                else:
                    events.append({"error": "model failed mid-stream"})
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for event in events:
                    data = b"data: " + json.dumps(event).encode() + b"\n\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._serve(Handler)


@pytest.fixture
def streaming() -> Iterator[StreamingServer]:
    server = StreamingServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def inference() -> Iterator[InferenceProcess]:
    """The sandbox's inference target: 2 ms per token, so a stream's first token comes
    well before its last."""
    with inference_target(ms_per_token=2.0) as process:
        yield process


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
                   seconds: int | None = BOUND, users: int = 2) -> list[str]:
    """A headless Locust run with 2 users against ``host``; stats go to ``stats.json``.
    The run ends when its ``--until-*`` options are met (``locust_until``), or at
    ``seconds`` at the latest."""
    limit = ["-t", f"{seconds}s"] if seconds is not None else []
    return [sys.executable, "-m", "locust", "-f", f"{LOCUSTFILE},{UNTIL}", "--headless",
            "-u", str(users), "-r", str(users), *limit, "--host", host, "--only-summary",
            "--json-file", str(tmp_path / "stats"), "--metrics-project", fx.PROJECT, *options]


def locust_env(emulator: str | None = None, revision: str | None = REVISION) -> dict[str, str]:
    """The test's environment; ``revision`` None leaves the load generator to ask git."""
    env = dict(os.environ)
    env.pop("ACCELOPS_LOADGEN_REVISION", None)
    if revision is not None:
        env["ACCELOPS_LOADGEN_REVISION"] = revision
    if emulator is not None:
        env["PUBSUB_EMULATOR_HOST"] = emulator
    return env


def finished(tmp_path: Path, returncode: int, output: str) -> Run:
    """Locust's counts from ``stats.json`` (one entry per request name)."""
    entries = json.loads((tmp_path / "stats.json").read_text())
    return Run(returncode, output, sum(e["num_requests"] for e in entries),
               sum(e["num_failures"] for e in entries))


def run_locust(tmp_path: Path, host: str, *options: str,
               emulator: str | None = None) -> Run:
    """Run Locust to the end; ``emulator`` overrides where it finds Pub/Sub."""
    done = subprocess.run(locust_command(tmp_path, host, *options),
                          cwd=tmp_path, env=locust_env(emulator), capture_output=True,
                          text=True, timeout=BOUND + 120, check=False)
    return finished(tmp_path, done.returncode, done.stdout + done.stderr)


@dataclass
class Message:
    """One pulled message: its attributes and its body (a JSON array of records, or a run
    record's object)."""

    attributes: dict[str, str]
    body: Any

    @property
    def is_run(self) -> bool:
        return self.attributes.get("kind") == "run"

    @property
    def records(self) -> list[dict[str, Any]]:
        assert isinstance(self.body, list), "a message's data is a JSON array of records"
        return self.body


def request_messages(messages: list[Message]) -> list[Message]:
    return [m for m in messages if not m.is_run]


def check_runs(messages: list[Message], test_id: str) -> list[RunRecord]:
    """The run records among the messages: valid, of this test, as the contract says."""
    runs = []
    for message in messages:
        if not message.is_run:
            continue
        assert message.attributes == {"kind": "run", "test_id": test_id}
        assert isinstance(message.body, dict)
        assert tuple(message.body) == RUN_FIELDS
        runs.append(RunRecord.model_validate(message.body))
    return runs


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
            messages.append(Message(dict(received.message.attributes), body))
        subscriber.acknowledge(request={"subscription": SUBSCRIPTION, "ack_ids": [
            m.ack_id for m in response.received_messages]})


def check_records(messages: list[Message], test_id: str) -> list[MetricRecord]:
    """Records of all request messages: valid, of this test, counted by the attributes,
    unique."""
    records = []
    for message in request_messages(messages):
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
                     "--metrics-flush-interval", "60", "--exit-code-on-error", "0",
                     *until(requests=20, failures=1, successes=1))

    assert run.returncode == 0, run.output
    found = re.search(r"loadgen: test id (\S+) ", run.output)
    assert found, run.output
    test_id = found.group(1)
    messages = pull_all(subscriber)
    records = check_records(messages, test_id)
    assert len(request_messages(messages)) == 1
    assert 0 < run.requests == len(records) <= triton.requests
    failed = [r for r in records if r.failed]
    assert len(failed) == run.failures > 0
    assert all(r.model_name == "loadgen-no-such-model" for r in failed)
    assert all("HTTP 404: Request for unknown model" in (r.exception or "") for r in failed)
    ok = [r for r in records if not r.failed]
    assert {(r.server, r.accelerator, r.model_name, r.model_method, r.users) for r in ok} == {
        ("triton", "cpu", "toy-lm", "infer", 2)}
    assert all(r.num_output_tokens == 5 and r.num_input_tokens for r in ok)
    assert all(r.time_to_first_token is None for r in records), "nothing was streamed"
    assert f"{len(records)} records and 2 run records published in 3 messages" in run.output


def test_records_are_flushed_by_age_while_the_test_runs(
        tmp_path: Path, metrics_topic: str, subscriber: Any, triton: FakeServer) -> None:
    # Requests for over three flush intervals: at least one batch closes by age before
    # the run stops (a lower bound on the run, which no load can shorten).
    run = run_locust(tmp_path, triton.url, "--model", "toy-lm", "--test-id", "by-age-1",
                     "--metrics-batch-size", "100000", "--metrics-flush-interval", "0.3",
                     *until(requests=2, seconds=1.0))

    assert run.returncode == 0, run.output
    messages = pull_all(subscriber)
    records = check_records(messages, "by-age-1")
    # Without age flushing the whole run would be one message, sent at test stop; under
    # a loaded machine the run may make few requests, so ask only for a second one.
    assert len(request_messages(messages)) >= 2
    assert len(records) == run.requests


def test_saxml_records_arrive_in_batches_of_the_configured_size(
        tmp_path: Path, metrics_topic: str, subscriber: Any, saxml: FakeServer) -> None:
    run = run_locust(tmp_path, saxml.url, "--server", "saxml", "--model", "/sax/test/lm",
                     "--accelerator", "v5litepod-8", "--test-id", "saxml-run-1",
                     "--metrics-batch-size", "100", "--metrics-flush-interval", "60",
                     *until(requests=250))

    assert run.returncode == 0, run.output
    messages = pull_all(subscriber)
    records = check_records(messages, "saxml-run-1")
    assert len(records) == run.requests > 100
    sizes = sorted((len(m.records) for m in request_messages(messages)), reverse=True)
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
                     "--metrics-publish-timeout", "2", *until(requests=5), emulator=closed)

    assert run.returncode == 1
    lost = re.search(r"(\d+) records of test lost-1 were not published", run.output)
    assert lost, run.output
    assert int(lost.group(1)) == run.requests > 0
    assert "2 run records of test lost-1 were not published" in run.output


def test_sigterm_stops_the_users_and_publishes_their_records_before_exit(
        tmp_path: Path, metrics_topic: str, subscriber: Any, triton: FakeServer) -> None:
    # How a pod ends on GKE: no run time limit, a SIGTERM instead.
    process = subprocess.Popen(
        locust_command(tmp_path, triton.url, "--model", "toy-lm", "--test-id", "sigterm-1",
                       "--metrics-batch-size", "100000", "--metrics-flush-interval", "60",
                       seconds=None),
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert fx.wait_for(lambda: triton.requests > 100, timeout=BOUND)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=BOUND)
    finally:
        process.kill()
    run = finished(tmp_path, process.returncode, output)

    assert run.returncode == 0, run.output
    messages = pull_all(subscriber)
    records = check_records(messages, "sigterm-1")
    assert len(records) == run.requests > 100
    runs = check_runs(messages, "sigterm-1")
    assert [(r.phase, r.run_time_s) for r in runs] == [("start", None), ("stop", None)]


def test_a_run_publishes_what_was_asked_for_at_its_start_and_its_stop(
        tmp_path: Path, metrics_topic: str, subscriber: Any, triton: FakeServer) -> None:
    # Credentials in --host must not reach Pub/Sub (Locust appends request paths to the
    # host as it is, so a query there cannot be run end to end; the unit tests strip it).
    host = triton.url.replace("http://", "http://loadgen:s3cret@")
    run = run_locust(tmp_path, host, "--model", "toy-lm", "--accelerator", "cpu",
                     "--test-id", "runs-1", *until(requests=5))

    assert run.returncode == 0, run.output
    messages = pull_all(subscriber)
    records = check_records(messages, "runs-1")
    start, stop = check_runs(messages, "runs-1")
    assert (start.phase, stop.phase) == ("start", "stop")
    for r in (start, stop):
        assert (r.test_id, r.model_name, r.server, r.accelerator) == (
            "runs-1", "toy-lm", "triton", "cpu")
        assert (r.users, r.spawn_rate, r.run_time_s) == (2, 2.0, float(BOUND))
        assert (r.locust_version, r.loadgen_revision) == (version("locust"), REVISION)
        assert r.host == triton.url
    assert start.at <= min(r.start_time for r in records)
    assert stop.at >= max(r.start_time for r in records)
    assert "s3cret" not in json.dumps([m.body for m in messages])


def git_revision() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=LOCUSTFILE.parent,
                          capture_output=True, text=True, check=True).stdout.strip()


def run_distributed(tmp_path: Path, url: str, test_id: str, *options: str,
                    seconds: int = BOUND, workers: int = 2,
                    ) -> tuple[Run, list[str]]:
    """A headless master with ``workers`` workers (all on 127.0.0.1) to the end: the
    master's run, and each worker's log."""
    port = free_port()
    common = ["--model", "toy-lm", "--accelerator", "cpu", "--metrics-project", fx.PROJECT,
              "--metrics-batch-size", "100000", "--metrics-flush-interval", "60"]
    # No revision variable: each worker asks git for the checkout's commit.
    env = locust_env(revision=None)
    processes = [subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", f"{LOCUSTFILE},{UNTIL}", "--worker",
         "--master-host", "127.0.0.1", "--master-port", str(port), *common],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(workers)]
    try:
        master = subprocess.run(
            [*locust_command(tmp_path, url, *common, "--test-id", test_id, *options,
                             users=4, seconds=seconds),
             "--master", "--expect-workers", str(workers), "--master-bind-host", "127.0.0.1",
             "--master-bind-port", str(port)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=BOUND + 120,
            check=False)
        outputs = [w.communicate(timeout=BOUND)[0] for w in processes]
    finally:
        for worker in processes:
            worker.kill()
    return finished(tmp_path, master.returncode, master.stdout + master.stderr), outputs


def test_every_worker_records_the_run_with_the_masters_users_spawn_rate_and_run_time(
        tmp_path: Path, metrics_topic: str, subscriber: Any, triton: FakeServer) -> None:
    run, outputs = run_distributed(tmp_path, triton.url, "dist-1", *until(requests=10))

    assert run.returncode == 0, run.output + "".join(outputs)
    messages = pull_all(subscriber)
    records = check_records(messages, "dist-1")
    assert len(records) == run.requests > 0
    runs = check_runs(messages, "dist-1")
    assert sorted(r.phase for r in runs) == ["start", "start", "stop", "stop"]
    assert {(r.users, r.spawn_rate, r.run_time_s) for r in runs} == {(4, 4.0, float(BOUND))}
    assert {(r.model_name, r.host, r.loadgen_revision) for r in runs} == {
        ("toy-lm", triton.url, git_revision())}
    # Each worker stamps its own identity: the client id it logs with the test id.
    logged = {found.group(1) for output in outputs
              if (found := re.search(r"loadgen: test id dist-1 on worker (\S+)", output))}
    assert len(logged) == 2
    assert {r.worker for r in records} == logged


def test_a_masters_run_time_ends_the_test_with_every_workers_requests_in_its_count(
        tmp_path: Path, metrics_topic: str, subscriber: Any, triton: FakeServer) -> None:
    # No --until-*: the run time alone ends the test, as in production. Locust's own
    # timer would quit the workers and leave their last reports out of the totals.
    run, outputs = run_distributed(tmp_path, triton.url, "dist-t", seconds=4)

    assert run.returncode == 0, run.output + "".join(outputs)
    assert "run time of 4s reached" in run.output
    records = check_records(pull_all(subscriber), "dist-t")
    assert len(records) == run.requests > 0
    per_worker = Counter(r.worker for r in records)
    assert len(per_worker) == 2


def web_stats(base: str) -> dict[str, Any]:
    return requests.get(f"{base}/stats/requests", timeout=10).json()


def test_a_test_started_through_a_waiting_masters_web_api_runs_on_all_its_workers(
        tmp_path: Path, metrics_topic: str, subscriber: Any, triton: FakeServer) -> None:
    # As the GKE Deployments run it: a master waiting for tests (no --headless, no
    # model), workers that learn everything from it; the test comes with POST /swarm.
    port, web = free_port(), free_port()
    env = {**locust_env(), "GOOGLE_CLOUD_PROJECT": fx.PROJECT, "LOADGEN_SERVER": "triton"}
    env.pop("LOADGEN_MODEL", None)
    image = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE)]
    processes = [subprocess.Popen(
        [*image, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port",
         str(port), "--web-host", "127.0.0.1", "--web-port", str(web)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)]
    processes += [subprocess.Popen(
        [*image, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(2)]
    base = f"http://127.0.0.1:{web}"
    try:
        assert wait_until(lambda: len(web_stats(base).get("workers", [])) == 2, BOUND)
        # Without a model the master refuses the test: no records, a line saying why.
        refused = requests.post(f"{base}/swarm", data={
            "user_count": 2, "spawn_rate": 2, "host": triton.url, "test_id": "swarm-0"},
            timeout=10).json()
        assert refused["success"] is False
        assert refused["message"].startswith("loadgen: --model: name the model of the test")
        assert web_stats(base)["state"] == "ready"
        started = requests.post(f"{base}/swarm", data={
            "user_count": 4, "spawn_rate": 4, "run_time": "3s", "host": triton.url,
            "model": "toy-lm", "test_id": "swarm-1"}, timeout=10)
        assert started.json()["success"] is True
        assert wait_until(lambda: web_stats(base)["state"] == "stopped", BOUND)
        time.sleep(3)  # the stats endpoint caches its answer for a moment
        counted = web_stats(base)["stats"][-1]["num_requests"]
    finally:
        for process in processes:
            process.terminate()
        outputs = [process.communicate(timeout=BOUND)[0] for process in processes]

    assert "loadgen: --model: name the model of the test" in outputs[0]
    messages = pull_all(subscriber)
    records = check_records(messages, "swarm-1")
    assert len(records) == counted > 0
    assert len({r.worker for r in records}) == 2
    assert {r.model_name for r in records} == {"toy-lm"}
    runs = check_runs(messages, "swarm-1")
    assert {(r.phase, r.users, r.spawn_rate, r.run_time_s) for r in runs} == {
        ("start", 4, 4.0, 3.0), ("stop", 4, 4.0, 3.0)}


def wait_until(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if condition():
                return True
        except requests.RequestException:
            pass  # the web UI is not up yet
        time.sleep(0.2)
    return False


def test_streamed_requests_record_their_token_timings_and_the_run_its_slos(
        tmp_path: Path, metrics_topic: str, subscriber: Any,
        inference: InferenceProcess) -> None:
    run = run_locust(tmp_path, inference.triton_url, "--stream", "--model", STREAM_MODEL,
                     "--max-tokens", "32", "--bad-request-ratio", "0.5", "--test-id", "ttft-1",
                     "--slo-ttft-ms", "250", "--slo-tpot-ms", "20",
                     "--exit-code-on-error", "0", *until(requests=10, failures=1, successes=3))

    assert run.returncode == 0, run.output
    messages = pull_all(subscriber)
    records = check_records(messages, "ttft-1")
    assert len(records) == run.requests > 0
    ok = [r for r in records if not r.failed]
    assert {(r.model_name, r.model_method, r.request_name, r.tokenizer) for r in ok} == {
        (STREAM_MODEL, "generate_stream", f"/v2/models/{STREAM_MODEL}/generate_stream",
         "server")}
    assert all(r.num_output_tokens == 32 and r.num_input_tokens for r in ok)
    assert all(r.time_to_first_token is not None and 0 < r.time_to_first_token < r.response_time
               for r in ok)
    # 32 tokens 2 ms apart: the server spends >= 62 ms between the first event and the last.
    # Had the stream been buffered, the first token would arrive with the last; a busy
    # machine can only delay this process's reads, so a quarter of the spread is asked for.
    spread = statistics.median(r.response_time - (r.time_to_first_token or 0.0) for r in ok)
    assert spread > 15.0
    # One gap per token event after the first; TPOT from the same clock as the response
    # time, so it is exactly the rest of the stream over the tokens after the first.
    for r in ok:
        ttft = r.time_to_first_token or 0.0
        assert len(r.inter_token_latencies) == 31
        assert r.time_per_output_token == pytest.approx((r.response_time - ttft) / 31,
                                                        abs=1e-9)
        assert sum(r.inter_token_latencies) <= r.response_time - ttft + 0.032  # rounding
    # The server spends 2 ms per token, >= 62 ms from the first to the last: the gaps
    # add up to that, as the spread above does (a quarter of it asked for: a busy
    # machine may read several events at once, which only moves time between gaps).
    assert statistics.median(r.time_per_output_token or 0.0 for r in ok) > 15.0 / 31
    assert statistics.median(sum(r.inter_token_latencies) for r in ok) > 15.0
    failed = [r for r in records if r.failed]
    assert len(failed) == run.failures > 0, (len(failed), run.failures, run.output[-2000:])
    assert all("HTTP 404: Request for unknown model" in (r.exception or "") for r in failed)
    assert all((r.time_to_first_token, r.time_per_output_token, r.inter_token_latencies)
               == (None, None, []) for r in failed)
    runs = check_runs(messages, "ttft-1")
    assert [r.model_name for r in runs] == [STREAM_MODEL, STREAM_MODEL]
    assert {(r.slo_ttft_ms, r.slo_tpot_ms, r.slo_latency_ms) for r in runs} == {
        (250.0, 20.0, None)}


def test_an_error_event_in_a_stream_fails_the_request_with_the_servers_message(
        tmp_path: Path, metrics_topic: str, subscriber: Any,
        streaming: StreamingServer) -> None:
    run = run_locust(tmp_path, streaming.url, "--stream", "--model", STREAM_MODEL,
                     "--bad-request-ratio", "0.5", "--test-id", "stream-err",
                     "--exit-code-on-error", "0", *until(requests=10, failures=1, successes=1))

    assert run.returncode == 0, run.output
    records = check_records(pull_all(subscriber), "stream-err")
    assert len(records) == run.requests > 0
    failed = [r for r in records if r.failed]
    assert len(failed) == run.failures > 0
    assert {(r.exception, r.time_to_first_token) for r in failed} == {
        ("CatchResponseError: stream error: model failed mid-stream", None)}
    ok = [r for r in records if not r.failed]
    assert ok
    assert all((r.num_output_tokens, r.tokenizer) == (3, "whitespace") for r in ok)
    assert all(r.response_length > 0 and r.time_to_first_token is not None for r in ok)
    assert all(len(r.inter_token_latencies) == 2 and r.time_per_output_token is not None
               for r in ok)
    assert all((r.time_per_output_token, r.inter_token_latencies) == (None, [])
               for r in failed)


def test_requests_for_a_model_the_saxml_proxy_does_not_serve_fail_with_its_error(
        tmp_path: Path, metrics_topic: str, subscriber: Any,
        inference: InferenceProcess) -> None:
    run = run_locust(tmp_path, inference.saxml_url, "--server", "saxml", "--model", SAXML_MODEL,
                     "--max-tokens", "8", "--bad-request-ratio", "0.3", "--test-id", "sax-404",
                     "--exit-code-on-error", "0", *until(requests=10, failures=1, successes=1))

    assert run.returncode == 0, run.output
    records = check_records(pull_all(subscriber), "sax-404")
    assert len(records) == run.requests > 0
    failed = [r for r in records if r.failed]
    assert len(failed) == run.failures > 0
    assert {r.exception for r in failed} == {
        "CatchResponseError: HTTP 400: model /sax/loadgen/no-such-model not found: "
        "rpc error: code = NotFound desc = NotFound"}
    ok = [r for r in records if not r.failed]
    assert ok
    assert all((r.model_name, r.num_output_tokens, r.tokenizer) == (SAXML_MODEL, 8, "server")
               for r in ok)
