"""The LLM figures of the views — time to first token, time per output token, inter-token
latency and goodput — against the same computed in Python from the raw rows.

Streamed records go in through ``ingest_metrics`` (one message delivered twice, as
Pub/Sub may); the raw requests table is then read back with the BigQuery client,
de-duplicated here by row key, and every figure the views give is recomputed from
those rows: percentiles with ``statistics.quantiles(..., method="inclusive")``
(PERCENTILE_CONT's interpolation), goodput by judging each row against the run
record's SLOs in plain Python. Never against a view's own output.
"""

from __future__ import annotations

import random
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from shared import bigquery
from shared.metrics.loadtest.views import BigQueryMetrics
from shared.metrics.record import MAX_INTER_TOKEN_LATENCIES
from tests.bigquery_fixtures import PROJECT
from tests.functional.test_ingest_metrics import stored_records
from tests.functional.test_metrics_views import (
    START,
    Record,
    ingest,
    percentile,
    run_envelope,
    run_record,
)

SLOS = {"slo_ttft_ms": 40.0, "slo_tpot_ms": 5.0, "slo_latency_ms": 180.0}


@dataclass(frozen=True)
class Slos:
    ttft: float | None = None
    tpot: float | None = None
    latency: float | None = None


def streamed_records(test_id: str, n: int, *, seed: int, per_second: int = 50) -> list[Record]:
    """``n`` records of a streamed test: every 15th fails mid-stream (no token timings),
    every 11th generates one token (no TPOT, no gaps), every 13th was not streamed
    (no TTFT); the rest have 2-40 tokens whose gaps and TPOT agree with each other."""
    rng = random.Random(seed)
    template = stored_records()[0]
    records = []
    for i in range(n):
        record: Record = dict(template, test_id=test_id, start_time=START + i / per_second,
                              request_name="/v2/models/toy-lm-stream/generate_stream",
                              model_method="generate_stream", tokenizer="server",
                              exception=None)
        if i % 15 == 14:
            record.update(exception="CatchResponseError: stream error: model crashed",
                          response_time=round(rng.uniform(5, 50), 3), num_output_tokens=None)
        elif i % 13 == 12:
            record.update(response_time=round(rng.uniform(20, 200), 3), num_output_tokens=16,
                          model_method="infer")
        else:
            tokens = 1 if i % 11 == 10 else rng.randint(2, 40)
            ttft = round(rng.lognormvariate(3.2, 0.5), 3)
            gaps = [round(rng.lognormvariate(1.0, 0.6), 3) for _ in range(tokens - 1)]
            end = round(ttft + sum(gaps), 3)
            record.update(response_time=end, num_output_tokens=tokens,
                          time_to_first_token=ttft,
                          time_per_output_token=(end - ttft) / (tokens - 1) if tokens > 1
                          else None,
                          inter_token_latencies=gaps)
        records.append(record)
    return records


def raw_rows(store: Any) -> list[dict[str, Any]]:
    """The requests table as stored (redelivered copies included), read back with the
    BigQuery client, then each row key once: the first copy ingested."""
    rows = bigquery.query(PROJECT, f"SELECT * FROM `{PROJECT}.{store.dataset}.{store.table}` "
                                   "ORDER BY ingested_at")
    unique: dict[str, dict[str, Any]] = {}
    for row in rows:
        unique.setdefault(row["row_key"], row)
    return list(unique.values())


def ok_values(rows: Sequence[dict[str, Any]], field: str) -> list[float]:
    return [r[field] for r in rows if r["exception"] is None and r[field] is not None]


def gaps_of(rows: Sequence[dict[str, Any]]) -> list[float]:
    return [g for r in rows if r["exception"] is None for g in (r["inter_token_latencies"] or ())]


def good(row: dict[str, Any], slos: Slos) -> bool:
    """The goodput definition, written out in Python: succeeded, and within every SLO
    given; a streamed request of fewer than two tokens meets the TPOT SLO."""
    if row["exception"] is not None:
        return False
    if slos.latency is not None and not row["response_time"] <= slos.latency:
        return False
    ttft, tpot = row["time_to_first_token"], row["time_per_output_token"]
    if slos.ttft is not None and (ttft is None or ttft > slos.ttft):
        return False
    if slos.tpot is not None:
        if ttft is None:
            return False
        if tpot is None:
            return row["num_output_tokens"] is not None and row["num_output_tokens"] < 2
        return bool(tpot <= slos.tpot)
    return True


def assert_p50_p90_p99(row: Any, prefix: str, values: Sequence[float], context: str) -> None:
    for p in (50, 90, 99):
        expected = percentile(values, p)
        actual = getattr(row, f"{prefix}p{p}_ms")
        assert actual == pytest.approx(expected, rel=1e-9), f"{context}: {prefix}p{p}"


def ingest_with_run(client: Any, records: Sequence[Record], test_id: str, stop_at: float,
                    **slos: float) -> None:
    ingest(client, records, test_id, batch=200)
    ingest(client, records[:200], test_id, batch=200)  # the first message redelivered
    for phase, at in (("start", START - 0.5), ("stop", stop_at)):
        record = run_record(test_id, phase, at, model_name="toy-lm-stream", **slos)
        response = client.post("/", json=run_envelope(record, f"{test_id}-{phase}"))
        assert response.status_code == 200


# ------------------------------------------------------------------ the summary
def test_ttft_tpot_and_inter_token_percentiles_match_python_over_the_raw_rows(
        ingest_client, metrics_store):
    records = streamed_records("llm-q", 700, seed=21)
    ingest_with_run(ingest_client, records, "llm-q", START + 15, **SLOS)

    summary = BigQueryMetrics.from_env().summary("llm-q")
    rows = raw_rows(metrics_store)

    assert len(rows) == summary.requests == 700
    assert_p50_p90_p99(summary, "", ok_values(rows, "response_time"), "latency")
    assert_p50_p90_p99(summary, "ttft_", ok_values(rows, "time_to_first_token"), "TTFT")
    assert_p50_p90_p99(summary, "tpot_", ok_values(rows, "time_per_output_token"), "TPOT")
    gaps = gaps_of(rows)
    assert_p50_p90_p99(summary, "itl_", gaps, "ITL")
    assert summary.itl_gaps == len(gaps)
    assert summary.itl_mean_ms == pytest.approx(statistics.fmean(gaps), rel=1e-9)


def test_goodput_is_the_share_and_rate_of_requests_meeting_every_slo(
        ingest_client, metrics_store):
    records = streamed_records("llm-g", 700, seed=22)
    ingest_with_run(ingest_client, records, "llm-g", START + 15, **SLOS)

    summary = BigQueryMetrics.from_env().summary("llm-g")
    rows = raw_rows(metrics_store)

    slos = Slos(SLOS["slo_ttft_ms"], SLOS["slo_tpot_ms"], SLOS["slo_latency_ms"])
    expected = sum(good(r, slos) for r in rows)
    assert 0 < expected < summary.requests - summary.errors  # the SLOs do bite
    assert (summary.slo_ttft_ms, summary.slo_tpot_ms, summary.slo_latency_ms) == (
        40.0, 5.0, 180.0)
    assert summary.good_requests == expected
    assert summary.goodput == pytest.approx(expected / len(rows), rel=1e-12)
    duration = 15.5  # from the run's start record to its stop record
    assert summary.duration_s == pytest.approx(duration)
    assert summary.goodput_qps == pytest.approx(expected / duration, rel=1e-12)
    # Failed requests are never good, even within every SLO by their numbers.
    failed = [r for r in rows if r["exception"] is not None]
    assert failed
    assert all(r["response_time"] <= slos.latency for r in failed)


@pytest.mark.parametrize("slos", [{"slo_latency_ms": 120.0}, {"slo_ttft_ms": 25.0},
                                  {"slo_tpot_ms": 3.0}],
                         ids=["latency only", "ttft only", "tpot only"])
def test_each_slo_alone_judges_only_its_own_measure(ingest_client, metrics_store, slos):
    records = streamed_records("llm-one", 400, seed=23)
    ingest_with_run(ingest_client, records, "llm-one", START + 8, **slos)

    summary = BigQueryMetrics.from_env().summary("llm-one")
    rows = raw_rows(metrics_store)

    judge = Slos(slos.get("slo_ttft_ms"), slos.get("slo_tpot_ms"), slos.get("slo_latency_ms"))
    assert summary.good_requests == sum(good(r, judge) for r in rows)
    # A latency SLO counts the requests that were not streamed; a TTFT or TPOT SLO
    # cannot be met without a first token.
    not_streamed = [r for r in rows if r["exception"] is None
                    and r["time_to_first_token"] is None]
    assert not_streamed
    assert any(good(r, judge) for r in not_streamed) == ("slo_latency_ms" in slos)


def test_a_test_without_slos_has_no_goodput_rather_than_zero(ingest_client, metrics_store):
    records = streamed_records("llm-n", 200, seed=24)
    ingest_with_run(ingest_client, records, "llm-n", START + 5)

    summary = BigQueryMetrics.from_env().summary("llm-n")

    assert summary.has_slos is False
    assert (summary.good_requests, summary.goodput, summary.goodput_qps) == (None, None, None)
    assert summary.tpot_p50_ms is not None


def test_rows_of_an_older_load_generator_read_as_no_tpot_and_no_gaps(
        ingest_client, metrics_store):
    # The stored event's records predate TTFT, TPOT and gaps: no such keys at all.
    records = [dict(r, test_id="llm-old") for r in stored_records()]
    assert not {"time_per_output_token", "inter_token_latencies"} & set(records[0])
    ingest(ingest_client, records, "old")

    summary = BigQueryMetrics.from_env().summary("llm-old")
    [point] = BigQueryMetrics.from_env().series(["llm-old"], per="second")["llm-old"]

    assert summary.requests == len(records)
    assert (summary.tpot_p50_ms, summary.itl_p50_ms, summary.itl_gaps) == (None, None, 0)
    assert (summary.goodput, point.tpot_p50_ms, point.goodput_qps) == (None, None, None)


# ------------------------------------------------------------------ per second
def test_per_second_ttft_tpot_and_goodput_match_python_for_every_second(
        ingest_client, metrics_store):
    records = streamed_records("llm-s", 500, seed=25, per_second=100)
    ingest_with_run(ingest_client, records, "llm-s", START + 6, **SLOS)
    slos = Slos(SLOS["slo_ttft_ms"], SLOS["slo_tpot_ms"], SLOS["slo_latency_ms"])

    series = BigQueryMetrics.from_env().series(["llm-s"], per="second")["llm-s"]
    by_second: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in raw_rows(metrics_store):
        by_second[int(row["start_time"].timestamp())].append(row)

    assert [int(p.bucket.timestamp()) for p in series] == sorted(by_second)
    for point in series:
        rows = by_second[int(point.bucket.timestamp())]
        context = f"second {point.offset_s}"
        assert_p50_p90_p99(point, "ttft_", ok_values(rows, "time_to_first_token"), context)
        assert_p50_p90_p99(point, "tpot_", ok_values(rows, "time_per_output_token"), context)
        assert point.goodput_qps == sum(good(r, slos) for r in rows), context


# ------------------------------------------------------------------ bounds
def test_a_record_with_more_gaps_than_the_bound_keeps_its_first_ones(
        ingest_client, metrics_store):
    [record] = streamed_records("llm-long", 1, seed=26)
    gaps = [float(i % 97) + 0.5 for i in range(MAX_INTER_TOKEN_LATENCIES + 500)]
    record.update(inter_token_latencies=gaps, num_output_tokens=len(gaps) + 1)
    ingest(ingest_client, [record], "long")

    [row] = raw_rows(metrics_store)

    assert row["inter_token_latencies"] == gaps[:MAX_INTER_TOKEN_LATENCIES]
