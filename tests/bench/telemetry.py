"""``make bench`` (telemetry part): what lifecycle telemetry costs per job, on the sandbox.

N jobs (1, 10 and 50 by default; single-slice v5litepod-8, the research team's quota
admits 32 at once) run through their whole life on the sandbox: submit_job, Kueue,
reconcile_slices creating and reaping their node pools, the pods, ingest_metrics
writing the transitions to BigQuery. Counted at the wire, per job:

* Pub/Sub messages with ``kind=job_event`` published on the metrics topic: a pull
  subscription on the topic receives each message published to it once;
* BigQuery insert requests ``ingest_metrics`` makes for the ``job_events`` table:
  ``ingest_metrics`` reaches bqemulator through a counting proxy, which counts the
  ``insertAll`` requests it forwards.

Baseline in the same run: one message per transition (no batching). The transitions
the N jobs published are published again, each as a message of its own, through the
same topic and ``ingest_metrics``; the proxy counts the inserts they cause. (They keep
their row keys: the views see no new transition.)

The sandbox runs its jobs part, BigQuery and ``ingest_metrics`` (not the inference
servers the metrics part also starts: nothing here needs them).
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sandbox.common.httpserver import free_port
from sandbox.demos.demo import follow_lifecycle
from sandbox.supervisor.runner import Sandbox
from sandbox.topology import FUNCTIONS, PROJECT, FunctionSpec
from shared.config import MetricsConfig, Topics
from shared.metrics.job_event import JOB_EVENT_KIND
from shared.metrics.run import KIND_ATTRIBUTE
from tests.bench.polling import wait_until
from tests.bench.results import write_results

SIZES = [int(n) for n in os.environ.get("BENCH_TELEMETRY_SIZES", "1,10,50").split(",")]
SPEED = float(os.environ.get("BENCH_TELEMETRY_SPEED", "60"))
RUN_SECONDS = 600  # simulated: each job's pods run ten minutes
TRANSITIONS_PER_JOB = 7  # submitted, admitted, slice requested / ready, running, finished,
# slice deleted (one slice each)
TOPIC = Topics().loadtest_metrics
SUBSCRIPTION = f"projects/{PROJECT}/subscriptions/bench-job-events"
INSERT_PATH = f"/tables/{MetricsConfig().job_events_table}/insertAll"


class CountingProxy:
    """An HTTP proxy to one upstream that counts the job_events insertAll requests."""

    def __init__(self) -> None:
        self.port = free_port()
        self.upstream: str | None = None  # host:port, set once the upstream has a port
        self.inserts = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.command == "POST" and urlsplit(self.path).path.endswith(INSERT_PATH):
                    with proxy._lock:
                        proxy.inserts += 1
                assert proxy.upstream is not None
                upstream = http.client.HTTPConnection(proxy.upstream, timeout=120)
                try:
                    headers = {k: v for k, v in self.headers.items()
                               if k.lower() not in ("host", "connection")}
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    answer = upstream.getresponse()
                    data = answer.read()
                finally:
                    upstream.close()
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection",
                                           "content-length"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

            def log_message(self, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class TelemetrySandbox(Sandbox):
    """The jobs part and BigQuery, with ingest_metrics reaching BigQuery through the
    counting proxy."""

    def __init__(self, state_dir: Path, proxy: CountingProxy) -> None:
        super().__init__(state_dir, speed=SPEED, parts={"jobs", "reports"})
        self.proxy = proxy

    @property
    def functions(self) -> list[FunctionSpec]:
        return [*super().functions, *(f for f in FUNCTIONS if f.target == "ingest_metrics")]

    def function_env(self, target: str) -> dict[str, str]:
        env = super().function_env(target)
        if target == "ingest_metrics":
            self.proxy.upstream = urlsplit(self.bigquery_url).netloc
            env["BIGQUERY_EMULATOR_HOST"] = self.proxy.url
        return env


def _request(i: int) -> dict[str, Any]:
    return {"name": f"tele-{i}", "team": "research", "request_id": f"tele-{i:04d}",
            "image": "us-docker.pkg.dev/acme/train/x:1",
            "tpu": {"type": "v5litepod-8", "slices": 1},
            "env": {"ACCELOPS_SANDBOX_RUN_SECONDS": str(RUN_SECONDS)}}


def _wait(condition: Any, what: str, timeout: float) -> Any:
    return wait_until(condition, what, timeout, interval=0.5)


@contextmanager
def _clients() -> Iterator[tuple[Any, Any]]:
    from google.cloud import pubsub_v1  # type: ignore[attr-defined,unused-ignore]

    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    try:
        yield publisher, subscriber
    finally:
        subscriber.close()
        publisher.transport.close()


def _pull_job_events(subscriber: Any) -> list[Any]:
    """Every job_event message on the bench subscription until it has no more."""
    found: list[Any] = []
    while True:
        response = subscriber.pull(subscription=SUBSCRIPTION, max_messages=1000, timeout=10)
        received = response.received_messages
        if not received:
            return found
        subscriber.acknowledge(subscription=SUBSCRIPTION, ack_ids=[m.ack_id for m in received])
        found.extend(m.message for m in received
                     if m.message.attributes.get(KIND_ATTRIBUTE) == JOB_EVENT_KIND)


def _distinct_rows(request_ids: list[str]) -> int:
    from shared import bigquery
    from shared.metrics.names import names_from_env

    names = names_from_env()
    sql = (f"SELECT COUNT(DISTINCT row_key) AS n FROM "  # the configured names
           f"{names.sql(names.job_events_table)} WHERE request_id IN UNNEST(@ids)")
    return int(bigquery.query(names.project, sql, {"ids": request_ids})[0]["n"])


def measure(sandbox: TelemetrySandbox, publisher: Any, subscriber: Any, first: int,
            n: int) -> dict[str, Any]:
    """N more jobs through their life; messages and inserts for them, and the baseline."""
    ids = [_request(i)["request_id"] for i in range(first, first + n)]
    inserts_before = sandbox.proxy.inserts
    started = time.monotonic()
    topic = publisher.topic_path(PROJECT, Topics().job_requests)
    for i in range(first, first + n):
        publisher.publish(topic, json.dumps(_request(i)).encode()).result(timeout=30)
    follow_lifecycle(first + n, timeout=900, progress=False)
    _wait(lambda: _distinct_rows(ids) >= TRANSITIONS_PER_JOB * n,
          "every transition in BigQuery", 120)
    seconds = time.monotonic() - started
    time.sleep(2.0)  # a redelivery in flight is part of the cost
    messages = _pull_job_events(subscriber)
    records = [r for m in messages for r in json.loads(m.data)]
    ours = [r for r in records if r["request_id"] in set(ids)]
    inserts = sandbox.proxy.inserts - inserts_before

    # The baseline: each transition its own message, through the same path.
    baseline_before = sandbox.proxy.inserts
    metrics_topic = publisher.topic_path(PROJECT, TOPIC)
    transitions = list({r["event_id"]: r for r in ours}.values())
    futures = [publisher.publish(metrics_topic, json.dumps([r]).encode(),
                                 **{KIND_ATTRIBUTE: JOB_EVENT_KIND}) for r in transitions]
    for future in futures:
        future.result(timeout=60)
    _wait(lambda: sandbox.proxy.inserts - baseline_before >= len(transitions),
          "ingest_metrics to insert every baseline message", 300)
    baseline_inserts = sandbox.proxy.inserts - baseline_before
    _pull_job_events(subscriber)  # the baseline's own messages, out of the next count
    return {
        "jobs": n, "transitions": len(transitions),
        # More than the transitions when one was published twice (a redelivery).
        "records_published": len(ours), "messages": len(messages), "inserts": inserts,
        "messages_per_job": round(len(messages) / n, 2),
        "inserts_per_job": round(inserts / n, 2),
        "baseline_messages": len(transitions), "baseline_inserts": baseline_inserts,
        "baseline_messages_per_job": round(len(transitions) / n, 2),
        "baseline_inserts_per_job": round(baseline_inserts / n, 2),
        "lifecycle_seconds": round(seconds, 1),
    }


def main() -> int:
    proxy = CountingProxy()
    results: dict[str, Any] = {"speed": SPEED, "sizes": {}}
    print(f"lifecycle telemetry per job on the sandbox (clock x{SPEED:g}; single-slice "
          f"v5litepod-8 jobs, {TRANSITIONS_PER_JOB} transitions each), counted at the wire")
    print(f"  {'jobs':>4} {'transitions':>11} {'records':>7} {'messages':>8} {'per job':>7} "
          f"{'inserts':>7} {'per job':>7}   baseline, a message per transition: messages "
          "and inserts per job")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            sandbox = TelemetrySandbox(Path(tmp), proxy)
            sandbox.start(progress=False)
            try:
                with sandbox.client_env(), _clients() as (publisher, subscriber):
                    subscriber.create_subscription(name=SUBSCRIPTION,
                                                   topic=publisher.topic_path(PROJECT, TOPIC),
                                                   ack_deadline_seconds=60)
                    first = 0
                    for n in SIZES:
                        figures = measure(sandbox, publisher, subscriber, first, n)
                        first += n
                        results["sizes"][str(n)] = figures
                        print(f"  {n:>4} {figures['transitions']:>11} "
                              f"{figures['records_published']:>7} {figures['messages']:>8} "
                              f"{figures['messages_per_job']:>7.2f} "
                              f"{figures['inserts']:>7} {figures['inserts_per_job']:>7.2f}   "
                              f"{figures['baseline_messages_per_job']:.2f} and "
                              f"{figures['baseline_inserts_per_job']:.2f}")
            finally:
                sandbox.stop()
    finally:
        proxy.stop()
    write_results("telemetry", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
