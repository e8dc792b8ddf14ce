"""Load test → Pub/Sub → ingest_metrics → BigQuery → views → report, on the sandbox.

Every process is separate (Locust, the Pub/Sub stand-in, functions-framework,
bqemulator, Triton); the test talks to them with the real clients.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from google.cloud import pubsub_v1

from sandbox.demos.loadtest import (
    STREAM_MODEL,
    LoadTest,
    new_test_id,
    run,
    run_test,
    wait_for_rows,
)
from sandbox.supervisor.runner import Sandbox
from sandbox.topology import PROJECT
from shared import bigquery
from shared.metrics.loadtest.report import write_html
from shared.metrics.loadtest.views import BigQueryMetrics
from tests.e2e.conftest import wait_for
from tests.e2e.locust_options import UNTIL, until
from tests.e2e.pubsub_fixtures import MESSAGE_IDS_RESTART, skip_on_emulator
from tests.functional.test_llm_metrics_views import Slos, good
from tests.functional.test_metrics_views import percentile

pytestmark = pytest.mark.e2e

SANDBOX_PARTS = {"metrics"}
TOPIC = f"projects/{PROJECT}/topics/loadtest-metrics"
# The run time the load tests ask for: only the bound of a run that never met its
# condition (each ends once Locust counted what its test asserts on).
RUN_BOUND = 50


def record(test_id: str, i: int, **change: Any) -> dict[str, Any]:
    base = {"test_id": test_id, "request_type": "POST",
            "request_name": "/v2/models/toy-lm/infer", "response_length": 200,
            "response_time": 10.0 + i, "start_time": time.time() + i / 100,
            "model_name": "toy-lm", "server": "triton", "accelerator": "cpu", "users": 1,
            "num_input_tokens": 3, "num_output_tokens": 8}
    base.update(change)
    return base


def publish(records: Any) -> str:
    publisher = pubsub_v1.PublisherClient()
    try:
        return str(publisher.publish(TOPIC, json.dumps(records).encode()).result(timeout=30))
    finally:
        publisher.transport.close()


def unique_rows(test_id: str) -> int:
    rows = bigquery.query(PROJECT, "SELECT COUNT(*) AS n FROM "
                          f"`{PROJECT}.loadtest.requests_unique` WHERE test_id = @t",
                          {"t": test_id})
    return int(rows[0]["n"])


def raw_rows(test_id: str) -> int:
    rows = bigquery.query(PROJECT, f"SELECT COUNT(*) AS n FROM `{PROJECT}.loadtest.requests` "
                          "WHERE test_id = @t", {"t": test_id})
    return int(rows[0]["n"])


def test_a_load_test_against_triton_ends_up_whole_in_the_views_and_the_report(
    sandbox: Sandbox, tmp_path: Path
):
    # Until Locust counted what is asserted below (a run of wall seconds can make none
    # on a busy machine); the run time is only its bound.
    test = LoadTest(test_id=new_test_id(), host=sandbox.triton_url, users=3,
                    duration_s=RUN_BOUND, bad_request_ratio=0.1, plugins=(UNTIL,),
                    plugin_options=tuple(until(requests=21, failures=1, successes=1)))
    source = BigQueryMetrics.from_env()

    summary = run(test, sandbox.env(), source, progress=lambda line: None)
    report = write_html(source, test.test_id, tmp_path)

    assert summary.requests > 20
    assert 0 < summary.errors < summary.requests
    assert summary.server == "triton"
    assert summary.model_name == "toy-lm"
    assert summary.output_tokens > 0
    assert summary.p50_ms > 0
    assert report.name == "index.html"
    assert test.test_id in report.read_text()
    assert sorted(p.stem for p in report.parent.glob("*.png")) == [
        "errors", "latency", "throughput", "tokens", "users"]  # not streamed: no ttft
    # The run record went out before the first request: nothing here was inferred.
    assert summary.model_inferred is False
    assert (summary.users, summary.run_time_s) == (3, float(RUN_BOUND))
    assert summary.locust_version


def test_a_streamed_load_test_with_slos_reports_ttft_tpot_and_goodput_of_its_rows(
    sandbox: Sandbox, tmp_path: Path
):
    # The sandbox's real tritonserver streaming toy-lm-stream, some requests to a model
    # it does not serve (never good), SLOs loose enough that most others meet them.
    test = LoadTest(test_id=new_test_id(), host=sandbox.triton_url, users=3,
                    duration_s=RUN_BOUND, model=STREAM_MODEL, stream=True, max_tokens=12,
                    bad_request_ratio=0.1, plugins=(UNTIL,),
                    slo_options=("--slo-ttft-ms", "5000", "--slo-tpot-ms", "500"),
                    plugin_options=tuple(until(requests=31, failures=1, successes=1)))
    source = BigQueryMetrics.from_env()

    summary = run(test, sandbox.env(), source, progress=lambda line: None)
    report = write_html(source, test.test_id, tmp_path)
    stored = bigquery.query(PROJECT, f"SELECT * FROM `{PROJECT}.loadtest.requests` "
                            "WHERE test_id = @t ORDER BY ingested_at", {"t": test.test_id})
    rows = list({row["row_key"]: row for row in reversed(stored)}.values())

    assert len(rows) == summary.requests > 30
    ok = [r for r in rows if r["exception"] is None]
    assert ok
    assert all(len(r["inter_token_latencies"]) == 11 for r in ok)
    for field, prefix in (("time_to_first_token", "ttft_"), ("time_per_output_token", "tpot_")):
        values = [r[field] for r in ok]
        for p in (50, 90, 99):
            assert getattr(summary, f"{prefix}p{p}_ms") == pytest.approx(
                percentile(values, p), rel=1e-9), f"{prefix}p{p}"
    gaps = [g for r in ok for g in r["inter_token_latencies"]]
    assert summary.itl_p99_ms == pytest.approx(percentile(gaps, 99), rel=1e-9)
    expected = sum(good(r, Slos(ttft=5000.0, tpot=500.0)) for r in rows)
    assert 0 < summary.good_requests == expected < summary.requests
    assert summary.goodput == pytest.approx(expected / len(rows))
    assert summary.goodput_qps == pytest.approx(expected / summary.duration_s)
    assert {"ttft", "tpot"} <= {p.stem for p in report.parent.glob("*.png")}
def raw_request_rows(test_id: str) -> list[dict[str, Any]]:
    """The test's rows as ingested, read from the table (not the views), each row key
    once: what every worker published."""
    rows = bigquery.query(PROJECT, "SELECT row_key, response_time, exception, start_time, "
                          f"users, worker FROM `{PROJECT}.loadtest.requests` "
                          "WHERE test_id = @t", {"t": test_id})
    return list({row["row_key"]: row for row in rows}.values())


def exact_percentile(values: list[float], fraction: float) -> float:
    # Linear interpolation between closest ranks: BigQuery's PERCENTILE_CONT.
    return statistics.quantiles(values, n=100, method="inclusive")[round(fraction * 100) - 1]


def test_a_two_worker_run_has_every_request_once_and_the_percentiles_of_all_raw_rows(
    sandbox: Sandbox, tmp_path: Path
):
    # At least 3 s after the first request, so whole seconds have every user running.
    test = LoadTest(test_id=new_test_id(), host=sandbox.triton_url, users=4,
                    duration_s=RUN_BOUND, workers=2, plugins=(UNTIL,),
                    plugin_options=tuple(until(requests=60, seconds=3)))
    source = BigQueryMetrics.from_env()

    done = run_test(test, sandbox.env(), source, progress=lambda line: None)
    report = write_html(source, test.test_id, tmp_path, notes=done.notes).read_text()

    rows = raw_request_rows(test.test_id)
    summary = done.summary
    # Locust's merged count, each worker's published count and the rows all agree.
    assert summary.requests == done.locust.requests == sum(done.locust.published) == len(rows)
    workers = {row["worker"] for row in rows}
    assert len(workers) == 2
    assert None not in workers
    assert len(done.locust.published) == 2
    assert all(n > 0 for n in done.locust.published)
    ok = [row["response_time"] for row in rows if row["exception"] is None]
    for name, fraction in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        assert getattr(summary, f"{name}_ms") == pytest.approx(
            exact_percentile(ok, fraction), rel=1e-9), name
    # Users: the run record's and the chart's are the test's total, not one worker's.
    assert summary.users == 4
    peaks: dict[int, dict[str, int]] = defaultdict(dict)
    for row in rows:
        second = peaks[int(row["start_time"].timestamp())]
        second[row["worker"]] = max(second.get(row["worker"], 0), row["users"])
    series = source.series([test.test_id], per="second")[test.test_id]
    assert [p.users for p in series] == [
        sum(peaks[int(p.bucket.timestamp())].values()) for p in series]
    assert max(p.users or 0 for p in series) == 4
    # Where Locust's own aggregate differs from BigQuery's by more than 5 %, the report
    # names both numbers; where it does not, it says nothing.
    assert done.locust.aggregate is not None
    for name, fraction in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        theirs = done.locust.aggregate.percentiles[name]
        ours = exact_percentile(ok, fraction)
        assert theirs is not None
        line = f"Locust&#x27;s aggregate {name} is {theirs:g} ms, BigQuery&#x27;s {ours:.1f} ms"
        assert (line in report) == (abs(theirs - ours) > 0.05 * ours), name


def test_a_load_test_against_the_saxml_proxy_records_its_tokens(sandbox: Sandbox):
    test = LoadTest(test_id=new_test_id(), host=sandbox.saxml_url, server="saxml",
                    model="/sax/test/toy", users=2, duration_s=RUN_BOUND, plugins=(UNTIL,),
                    plugin_options=tuple(until(requests=5)))

    summary = run(test, sandbox.env(), BigQueryMetrics.from_env(), progress=lambda line: None)

    assert summary.server == "saxml"
    assert summary.errors == 0
    assert summary.output_tokens == summary.requests * 16


def test_a_redelivered_message_adds_no_duplicates_to_the_views(sandbox: Sandbox):
    test_id = new_test_id()
    data = json.dumps([record(test_id, i) for i in range(5)]).encode()
    message_id = publish(json.loads(data))
    assert wait_for(lambda: unique_rows(test_id) == 5)

    status = sandbox.redeliver("ingest_metrics", message_id, data)

    assert status == 200
    assert wait_for(lambda: raw_rows(test_id) >= 10 or None, timeout=60) is not None
    assert unique_rows(test_id) == 5
    assert BigQueryMetrics.from_env().summary(test_id).requests == 5


def test_a_poison_record_is_set_aside_and_its_batch_mates_are_stored(sandbox: Sandbox):
    test_id = new_test_id()
    records = [record(test_id, 0), record(test_id, 1, start_time="yesterday"),
               record(test_id, 2)]

    message_id = publish(records)

    assert wait_for(lambda: unique_rows(test_id) == 2)
    [rejection] = wait_for(lambda: bigquery.query(
        PROJECT, f"SELECT * FROM `{PROJECT}.loadtest.rejections` WHERE message_id = @m",
        {"m": message_id}))
    assert rejection["record_index"] == 1
    assert rejection["reason"].startswith("start_time:")


def test_bigquery_down_for_a_while_delays_the_rows_but_loses_none(sandbox: Sandbox):
    test_id = new_test_id()
    sandbox.stop_component("bigquery")
    try:
        publish([record(test_id, i) for i in range(7)])
        # Deliveries fail while BigQuery is down; Pub/Sub keeps the message.
        time.sleep(2.0)
    finally:
        sandbox.restart("bigquery")

    source = BigQueryMetrics.from_env()
    assert wait_for_rows(source, test_id, 7, timeout=45).requests == 7
    assert unique_rows(test_id) == 7


@skip_on_emulator(MESSAGE_IDS_RESTART)
def test_a_sandbox_restarted_from_its_state_keeps_delivering_with_fresh_message_ids(
    tmp_path: Path
):
    # Its own sandbox: this test stops and starts one from the same state directory.
    ids, test_id = [], new_test_id()
    for i in range(2):
        restarted = Sandbox(tmp_path / "state", parts={"metrics"}).start(progress=False)
        try:
            with restarted.client_env():
                ids.append(publish([record(test_id, i)]))
                assert wait_for(lambda n=i + 1: unique_rows(test_id) == n, timeout=30)
        finally:
            restarted.stop()

    assert ids[0] != ids[1]
