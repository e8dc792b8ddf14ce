"""Reports and the dashboard reading the real views of ingested records."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from services.dashboard.app import create_app
from shared.errors import NotFoundError
from shared.metrics.report import write_report
from shared.metrics.views import BigQueryMetrics
from tests.functional.test_ingest_metrics import envelope, stored_records

TEST_ID = "lt-20261121-100000-ab12"


def ingest_run(client, test_id: str, n: int, latency_ms: float, message: str,
               hour: int) -> None:
    template = stored_records()[0]
    start = datetime(2026, 11, 21, hour, 0, tzinfo=UTC).timestamp()
    records = [dict(template, test_id=test_id, response_time=latency_ms + i % 10,
                    start_time=start + i * 0.1,
                    exception="HTTPError 503" if i % 25 == 0 else None) for i in range(n)]
    assert client.post("/", json=envelope(records, message_id=message)).status_code == 200


@pytest.fixture
def two_runs(ingest_client, metrics_store):
    ingest_run(ingest_client, "run-a", 200, 20.0, "ma", hour=10)
    ingest_run(ingest_client, "run-b", 300, 40.0, "mb", hour=11)
    return metrics_store


def test_the_summary_view_gives_counts_rates_and_percentiles(two_runs):
    summary = BigQueryMetrics.from_env().summary("run-a")

    assert summary.requests == 200
    assert summary.errors == 8
    assert summary.error_rate == pytest.approx(0.04)
    assert summary.duration_s == pytest.approx(19.9)
    assert summary.qps == pytest.approx(200 / 19.9)
    assert 20.0 <= summary.p50_ms <= summary.p90_ms <= summary.p99_ms <= 29.0
    assert summary.tokens_per_s == pytest.approx(16 * 200 / 19.9)


@pytest.mark.parametrize("minority_first", [True, False])
def test_the_summary_names_the_model_most_requests_aimed_at(ingest_client, metrics_store,
                                                             minority_first):
    template = stored_records()[0]
    batches = [["no-such-model"] * 4, ["toy-lm"] * 6, ["toy-lm"] * 6]
    if not minority_first:
        batches.reverse()
    sent = []
    for number, models in enumerate(batches):
        records = [dict(template, test_id="run-m", model_name=model,
                        start_time=1795255200 + len(sent) + i) for i, model in enumerate(models)]
        sent += models
        ingest_client.post("/", json=envelope(records, message_id=f"mm{number}"))

    summary = BigQueryMetrics.from_env().summary("run-m")

    assert summary.model_name == max(set(sent), key=sent.count) == "toy-lm"


def test_the_per_second_series_covers_the_run_in_order(two_runs):
    series = BigQueryMetrics.from_env().series("run-b", per="second")

    assert [p.offset_s for p in series] == [float(s) for s in range(30)]
    assert sum(p.requests for p in series) == 300
    assert all(p.qps == p.requests for p in series)


def test_recent_tests_come_newest_first_and_unknown_tests_are_not_found(two_runs):
    source = BigQueryMetrics.from_env()

    assert [t.test_id for t in source.recent_tests()] == ["run-b", "run-a"]
    with pytest.raises(NotFoundError):
        source.summary("never-ran")


def test_a_comparison_report_is_written_from_the_views(two_runs, tmp_path):
    index = write_report(BigQueryMetrics.from_env(), "run-b", tmp_path / "out", compare="run-a")

    html = index.read_text()
    assert "run-a" in html
    assert "run-b" in html
    assert sorted(p.name for p in index.parent.glob("*.png")) == [
        "errors.png", "latency.png", "throughput.png", "tokens.png"]


def test_the_comparison_view_relates_each_run_to_the_previous_one(two_runs, ingest_client):
    ingest_run(ingest_client, "run-c", 100, 20.0, "mc", hour=12)
    from shared import bigquery

    rows = {r["test_id"]: r for r in bigquery.query(
        "accelops-test",
        f"SELECT * FROM `accelops-test.{two_runs.dataset}.test_comparison`")}

    assert [rows[t]["previous_test_id"] for t in ("run-a", "run-b", "run-c")] == [
        None, "run-a", "run-b"]
    # run-b was twice as slow as run-a; run-c as fast as run-a again.
    assert rows["run-b"]["p50_ms_change"] > 0.5
    assert rows["run-c"]["p50_ms_change"] < -0.3


def test_the_dashboard_serves_pages_and_charts_from_the_views(two_runs):
    client = create_app().test_client()

    page = client.get("/tests/run-b?compare=run-a")
    chart = client.get("/tests/run-b/charts/latency.png?compare=run-a")
    missing = client.get("/tests/never-ran")

    assert page.status_code == 200
    assert "run-a" in page.get_data(as_text=True)
    assert chart.status_code == 200
    assert chart.data.startswith(b"\x89PNG")
    assert missing.status_code == 404
    assert json.dumps("never-ran")[1:-1] in missing.get_data(as_text=True)


def test_the_minute_series_of_a_short_run_is_one_bucket(two_runs):
    [point] = BigQueryMetrics.from_env().series("run-a", per="minute")

    assert point.requests == 200
    assert point.qps == pytest.approx(200 / 60)
    assert point.offset_s == 0.0
    assert point.bucket == datetime(2026, 11, 21, 10, 0, tzinfo=UTC) + timedelta(0)


def test_accelops_report_prints_both_summaries_and_writes_the_compared_report(
    two_runs, tmp_path, capsys
):
    from shared.cli import main

    code = main(["report", "run-b", "--compare", "run-a", "--out", str(tmp_path)])

    out = capsys.readouterr().out
    assert code == 0
    assert "requests    300" in out
    assert "requests    200" in out
    index = tmp_path / "run-b-vs-run-a" / "index.html"
    assert f"report: {index}" in out
    assert "charts: errors.png, latency.png, throughput.png, tokens.png" in out
    assert index.exists()


def test_accelops_report_on_an_unknown_test_says_so_and_writes_nothing(two_runs, tmp_path,
                                                                        capsys):
    from shared.cli import main

    out_dir = tmp_path / "reports"
    code = main(["report", "never-ran", "--out", str(out_dir)])

    assert code == 1
    assert "no load test 'never-ran'" in capsys.readouterr().err
    assert not out_dir.exists()
