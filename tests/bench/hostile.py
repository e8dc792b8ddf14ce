"""``make bench`` (hostile part): worst-case handler time for hostile ~10 MB messages.

Both Pub/Sub handlers run in this process through functions-framework (push envelopes
in, base64 and all): ``ingest_metrics`` writing to a bqemulator process (a fresh
dataset for every message, since the emulator's inserts slow down as a table grows and
BigQuery's do not), ``submit_job`` against the sandbox Kubernetes API and Pub/Sub
(in-process, as the fuzz suite runs them). Each message is posted
``BENCH_HOSTILE_REPEATS`` times (3) under a fresh message id; the figures are the
median and max wall seconds of the POST, the median CPU seconds of this process (the
handler, and for submit_job the in-process stand-ins), the HTTP status, and what the
handler did (rows stored and rejected; JobSet created or rejection published), read
back after the clock stopped.

Hostile messages are just under Pub/Sub's 10 MB limit (≤ 9,999,000 bytes of data):
deep nesting (the whole data, one record or one field), numbers of 4,000 and of ~10
million digits, one huge string and many just over the string limit, millions of tiny
elements, lone surrogate escapes, 5,000 invalid records (ingest), bytes that are not
UTF-8, and a record too deep for the parser holding a string that never ends (a
bracket matcher that backtracks takes time quadratic in its length: hours at 10 MB).
submit_job refuses anything
over 256 KiB before decoding, so its classes are also measured scaled to 255 KiB,
where they reach the parser and the checks.

Baselines in the same run: ingest_metrics, a valid batch of 5,000 records of ~2 KB
(~10 MB, all stored); submit_job, a valid request of ~255 KiB that creates its JobSet
(deleted between repeats). Ratios are medians over the baseline's median.
"""

from __future__ import annotations

import base64
import gc
import itertools
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import functions_framework

from tests.bench.metrics import records
from tests.bench.results import REPO, write_results

MAIN = str(REPO / "functions" / "main.py")
PROJECT = "accelops-test"
REJECTIONS_SUB = f"projects/{PROJECT}/subscriptions/hostile-rejections"
REPEATS = int(os.environ.get("BENCH_HOSTILE_REPEATS", "3"))
MAX_DATA = 9_999_000  # Pub/Sub carries 10 MB; stay under it with room to spare
FULL = 9_990_000
SCALED = 255 * 1024  # submit_job accepts at most 256 KiB
BATCH = 5_000
DEEP = 1_100  # deeper than the JSON parser recurses (Python's limit is 1,000)
IMAGE = "us-docker.pkg.dev/acme/train/x:1"
_ids = itertools.count(1)
# A record of the load generator's, its start time fixed so that sizes are exact.
BASE_RECORD = {**records(1, "hostile")[0], "start_time": float(int(time.time()))}

Builder = Callable[[int], bytes]


# ------------------------------------------------------------------------ messages
def fill(head: bytes, unit: bytes, tail: bytes, size: int, sep: bytes = b",") -> bytes:
    """``head`` + as many ``unit``s (separated) as fit in ``size`` bytes + ``tail``."""
    n = max(1, (size - len(head) - len(tail) + len(sep)) // (len(unit) + len(sep)))
    return head + sep.join([unit] * n) + tail


def to_size(make: Callable[[int], bytes], size: int) -> bytes:
    """``make(k)`` for the ``k`` that makes it ``size`` bytes (it grows a byte per k)."""
    return make(size - len(make(0)))


def nested(size: int) -> bytes:
    return b"[" * (size // 2) + b"]" * (size // 2)


def record(size: int, **changes: Any) -> bytes:
    """One load-test record of ``size`` bytes, padded with its exception text."""
    value = {**BASE_RECORD, **changes, "exception": ""}
    text = json.dumps(value).encode()
    return text.replace(b'"exception": ""', b'"exception": "'
                        + b"x" * (size - len(text)) + b'"')


def batch(rec: bytes, count: int = BATCH) -> bytes:
    return b"[" + b", ".join([rec] * count) + b"]"


def record_with(key: str, raw: bytes) -> bytes:
    """A valid record whose ``key`` holds the raw JSON text ``raw``."""
    head = json.dumps({**BASE_RECORD, key: None}).encode()
    return head.replace(f'"{key}": null'.encode(), f'"{key}": '.encode() + raw)


def request_head(key: str, **base: Any) -> bytes:
    """A job request's JSON text up to the value of ``key`` (its last member)."""
    body = {"name": "hostile", "team": "research", "image": IMAGE,
            "tpu": {"type": "v5litepod-16", "slices": 1}, **base}
    body.pop(key, None)
    return json.dumps(body).encode()[:-1] + f', "{key}": '.encode()


def valid_request(request_id: str, size: int = SCALED) -> bytes:
    head = request_head("args", request_id=request_id)
    return fill(head + b"[", b'"' + b"a" * 4000 + b'"', b"]}", size, b", ")


def ingest_classes() -> dict[str, Builder]:
    over = b"x" * (65_536 + 1)
    valid, deep = record(1_990), record_with("exception", nested(1_000_000))
    return {
        "deep nesting": nested,
        "deep record after valid records": lambda n: b"[" + b", ".join(
            [valid] * ((n - len(deep) - 4) // (len(valid) + 2)) + [deep]) + b"]",
        "many too-deep records": lambda n: fill(b"[", nested(2 * DEEP), b"]", n),
        "4,000-digit integers": lambda n: fill(b"[", b"9" * 4_000, b"]", n),
        "one ~10 MB number": lambda n: to_size(lambda k: b"[9" + b"9" * k + b"]", n),
        "one ~10 MB string": lambda n: to_size(
            lambda k: b"[" + record_with("exception", b'"' + b"x" * k + b'"') + b"]", n),
        "strings just over the limit": lambda n: fill(
            b"[", record_with("exception", b'"' + over + b'"'), b"]", n),
        "[0,0,...]": lambda n: fill(b"[", b"0", b"]", n),
        "[{},{},...]": lambda n: fill(b"[", b"{}", b"]", n),
        "lone surrogates": lambda n: fill(b"[", b'"' + b"\\ud800" * 10_000 + b'"', b"]", n),
        "5,000 invalid records": lambda n: batch(
            record(n // BATCH - 2, response_time="fast")),
        "not UTF-8": lambda n: b"\xff" * n,
        "whitespace after a too-deep record": lambda n: to_size(
            lambda k: b"[" + nested(2 * DEEP) + b"," + b" " * k + b"0]", n),
        # A matcher that retried its string pattern at every \" would be quadratic here.
        'too deep, unterminated "\\"\\"…': lambda n: to_size(
            lambda k: b"[" + b"[" * DEEP + b'"' + b'\\"' * (k // 2), n),
    }


def submit_classes() -> dict[str, Builder]:
    return {
        "deep nesting": nested,
        "deep nesting in one field": lambda n: to_size(
            lambda k: request_head("args") + nested(k) + b"}", n),
        "4,000-digit integers": lambda n: fill(request_head("args") + b"[", b"9" * 4_000,
                                               b"]}", n),
        "one huge number": lambda n: to_size(lambda k: request_head("tpu")
                                             + b'{"type": "v5litepod-16", "slices": 9'
                                             + b"9" * k + b"}}", n),
        "one huge string": lambda n: to_size(
            lambda k: request_head("command") + b'["' + b"x" * k + b'"]}', n),
        "strings just over the limit": lambda n: fill(
            request_head("args") + b"[", b'"' + b"x" * 4_097 + b'"', b"]}", n),
        "[0,0,...]": lambda n: fill(b"[", b"0", b"]", n),
        "[{},{},...]": lambda n: fill(b"[", b"{}", b"]", n),
        "lone surrogates": lambda n: fill(
            request_head("args") + b"[", b'"' + b"\\ud800" * 680 + b'"', b"]}", n),
        "not UTF-8": lambda n: b"\xff" * n,
    }


def same(data: bytes) -> Callable[[int], bytes]:
    """The same data for every repeat (only the message id changes)."""
    return lambda _: data


def envelope(message_id: str, data: bytes, subscription: str) -> bytes:
    return json.dumps({
        "message": {"data": base64.b64encode(data).decode("ascii"), "messageId": message_id,
                    "publishTime": "2026-11-21T10:00:00Z",
                    "attributes": {"origin": "bench-hostile"}},
        "subscription": f"projects/{PROJECT}/subscriptions/{subscription}"}).encode()


# ------------------------------------------------------------------------- measuring
@dataclass
class Outcome:
    status: int
    seconds: float
    cpu_seconds: float  # this process's: the handler, plus in-process stand-ins
    what: str  # what the handler did, read back after the clock stopped
    expected: bool


@dataclass
class Measured:
    name: str
    data_bytes: int
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(o.seconds for o in self.outcomes)

    @property
    def as_expected(self) -> bool:
        return all(o.expected for o in self.outcomes)

    def figures(self, baseline: float) -> dict[str, Any]:
        return {"class": self.name, "data_bytes": self.data_bytes,
                "statuses": [o.status for o in self.outcomes],
                "seconds": [round(o.seconds, 4) for o in self.outcomes],
                "median_s": round(self.median, 4),
                "max_s": round(max(o.seconds for o in self.outcomes), 4),
                "median_cpu_s": round(statistics.median(o.cpu_seconds
                                                        for o in self.outcomes), 4),
                "ratio_to_baseline": round(self.median / baseline, 2),
                "outcomes": [o.what for o in self.outcomes],
                "as_expected": self.as_expected}


Poster = Callable[[str, bytes], Outcome]


def timed_post(client: Any, body: bytes) -> tuple[int, float, float]:
    gc.collect()  # not the previous message's garbage
    cpu, start = time.process_time(), time.perf_counter()
    response = client.post("/", data=body, content_type="application/json")
    return (response.status_code, time.perf_counter() - start,
            time.process_time() - cpu)


def measure(function: str, name: str, data_for: Callable[[int], bytes], post: Poster,
            repeats: int = REPEATS) -> Measured:
    size = len(data_for(0))
    if size > MAX_DATA:
        raise SystemExit(f"{function}: {name} is {size:,} bytes, over {MAX_DATA:,}")
    measured = Measured(name, size)
    for i in range(repeats):
        measured.outcomes.append(post(f"h{next(_ids)}", data_for(i)))
    statuses = "/".join(str(s) for s in sorted({o.status for o in measured.outcomes}))
    print(f"{function}: {name} {size / 1e6:.2f} MB ... {measured.median:.2f} s "
          f"(max {max(o.seconds for o in measured.outcomes):.2f}; HTTP {statuses}; "
          f"{measured.outcomes[0].what})"
          + ("" if measured.as_expected else "  !! unexpected outcome"), flush=True)
    return measured


def table(function: str, baseline: Measured, rows: list[Measured]) -> dict[str, Any]:
    """Print the table; the worst case is taken over the classes of ~10 MB."""
    base = baseline.median
    print(f"\n{function} (baseline: {baseline.name}; {REPEATS} repeats each)")
    print(f"  {'class':<40} {'data bytes':>11} {'status':>6} {'median s':>9} {'max s':>8} "
          f"{'cpu s':>7} {'x baseline':>10}  outcome")
    for m in [baseline, *rows]:
        f = m.figures(base)
        status = "/".join(str(s) for s in sorted(set(f["statuses"])))
        print(f"  {m.name:<40} {m.data_bytes:>11,} {status:>6} {f['median_s']:>9.3f} "
              f"{f['max_s']:>8.3f} {f['median_cpu_s']:>7.3f} {f['ratio_to_baseline']:>10.2f}"
              f"  {m.outcomes[0].what}" + ("" if m.as_expected else "  !!"))
    worst = max((m for m in rows if m.data_bytes > MAX_DATA // 2), key=lambda m: m.median)
    print(f"  worst case at ~10 MB: {worst.name}: {worst.median:.3f} s, "
          f"{worst.median / base:.2f}x the baseline")
    return {"baseline": baseline.figures(base), "classes": [m.figures(base) for m in rows],
            "worst_at_10mb": {"class": worst.name, "median_s": round(worst.median, 4),
                              "ratio_to_baseline": round(worst.median / base, 2)}}


def clipped(text: str, chars: int = 80) -> str:
    return text if len(text) <= chars else text[:chars - 1] + "…"


def quiet_logs(stream: TextIO) -> None:
    """Keep the handlers' log lines (their cost is real) out of the printed figures."""
    from shared.log import configure

    configure()
    for handler in logging.getLogger("accelops").handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(stream)


# -------------------------------------------------------------------- ingest_metrics
def run_ingest(tmp: Path) -> dict[str, Any]:
    from shared import bigquery
    from shared.metrics.schema import apply_schema
    from tests.bigquery_fixtures import bigquery_emulator, fresh_dataset

    with bigquery_emulator(tmp / "bqemulator.log") as emulator:
        os.environ.update(BIGQUERY_EMULATOR_HOST=emulator.url, ACCELOPS_PROJECT=PROJECT)
        bigquery.reset_client()
        client = functions_framework.create_app("ingest_metrics", MAIN,
                                                "cloudevent").test_client()

        def count(table: str, message_id: str, reason: str = "''") -> tuple[int, str]:
            found = bigquery.query(
                PROJECT, f"SELECT COUNT(*) AS n, MIN({reason}) AS reason "
                f"FROM `{PROJECT}.{table}` WHERE message_id = @m", {"m": message_id})[0]
            return int(found["n"]), str(found["reason"] or "")

        def post(message_id: str, data: bytes, valid: bool = False) -> Outcome:
            # A fresh dataset each time: bqemulator's inserts slow down as a table grows
            # (BigQuery's do not), which would favour whatever ran first.
            config = fresh_dataset()
            apply_schema(PROJECT, config)
            path = tmp / f"{config.dataset}.yaml"
            path.write_text(f"metrics:\n  dataset: {config.dataset}\n")
            os.environ["ACCELOPS_CONFIG"] = str(path)
            status, seconds, cpu = timed_post(client, envelope(message_id, data, "metrics"))
            stored, _ = count(f"{config.dataset}.{config.table}", message_id)
            rejected, reason = count(f"{config.dataset}.{config.rejections_table}",
                                     message_id, "reason")
            what = f"{stored:,} stored, {rejected:,} rejected" + (
                f": {clipped(reason)}" if reason else "")
            expected = status == 200 and (
                (stored, rejected) == (BATCH, 0) if valid else rejected > 0)
            return Outcome(status, seconds, cpu, what, expected)

        post("warm-up", json.dumps(records(10, "hostile-warm-up")).encode())
        valid = batch(record(FULL // BATCH - 2))
        baseline = measure("ingest_metrics", f"valid batch ({BATCH:,} records)",
                           same(valid), lambda i, d: post(i, d, valid=True))
        if not baseline.as_expected:
            raise SystemExit(f"the baseline was not stored: {baseline.outcomes}")
        rows = []
        for name, build in ingest_classes().items():
            rows.append(measure("ingest_metrics", name, same(build(FULL)), post))
        bigquery.reset_client()

    return table("ingest_metrics", baseline, rows)


# ------------------------------------------------------------------------ submit_job
def run_submit(tmp: Path) -> dict[str, Any]:
    from sandbox.kubeapi import install_crds, start_kube_api
    from sandbox.pubsub import start_pubsub
    from shared import kube, pubsub
    from shared.kube import JOBSETS
    from tests.jobs_fixtures import jobs_environment, provision_jobs

    kube_api = start_kube_api()
    install_crds(kube_api.store)
    pubsub_api = start_pubsub(pull_wait_seconds=0.3)
    try:
        os.environ.update(jobs_environment(kube_api, pubsub_api, tmp))
        cluster = provision_jobs(pubsub_api, REJECTIONS_SUB,
                                 topics=("job-rejections", "slices-reconcile"))
        broker = pubsub_api.broker
        client = functions_framework.create_app("submit_job", MAIN, "cloudevent").test_client()

        def post(message_id: str, data: bytes, valid: bool = False) -> Outcome:
            status, seconds, cpu = timed_post(client, envelope(message_id, data, "submit"))
            rejections = broker.pull(REJECTIONS_SUB, 1000, timeout=0.0)
            if rejections:
                broker.acknowledge(REJECTIONS_SUB, [d.ack_id for d in rejections])
            jobsets = cluster.list(JOBSETS)
            for jobset in jobsets:  # each repeat creates again
                cluster.delete(JOBSETS, jobset["metadata"]["name"],
                               jobset["metadata"]["namespace"])
            if rejections:
                attrs = rejections[0].message.attributes
                what = clipped(f"rejected: {attrs.get('rejection_field')}: "
                               f"{attrs.get('rejection_rule', '')}")
            else:
                what = f"{len(jobsets)} JobSet created"
            counts = (len(jobsets), len(rejections))
            return Outcome(status, seconds, cpu, what,
                           status == 200 and counts == ((1, 0) if valid else (0, 1)))

        post("warm-up", valid_request("warm-up", 2_000), valid=True)
        baseline = measure("submit_job", "valid request (~255 KiB)",
                           lambda i: valid_request(f"hostile-baseline-{i}"),
                           lambda i, d: post(i, d, valid=True))
        if not baseline.as_expected:
            raise SystemExit(f"the baseline JobSet was not created: {baseline.outcomes}")
        rows = []
        for size, label in ((FULL, "~10 MB"), (SCALED, "255 KiB")):
            for name, build in submit_classes().items():
                rows.append(measure("submit_job", f"{name} ({label})", same(build(size)),
                                    post))
    finally:
        kube.reset_client()
        pubsub.reset_client()
        pubsub_api.stop()
        kube_api.stop()
    return table("submit_job", baseline, rows)


def main() -> int:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, \
            (Path(tmp) / "handlers.log").open("w", encoding="utf-8") as log:
        quiet_logs(log)
        ingest = run_ingest(Path(tmp))
        submit = run_submit(Path(tmp))
    runtime = time.perf_counter() - started
    print(f"\ntotal runtime {runtime:.0f} s")
    write_results("hostile", {"repeats": REPEATS, "ingest_metrics": ingest,
                              "submit_job": submit, "runtime_s": round(runtime, 1)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
