"""``make bench`` (dashboard part): what a compared report page costs the metrics store.

``python -m tests.bench.dashboard`` prints every figure and writes them to
``bench-results/dashboard.json``.

Two 10-minute tests (6,000 requests each, charted per second) are ingested into a
bqemulator process through ``ingest_metrics``. A browser opening a compared page
asks for the page and its charts; the figures are BigQuery queries and wall time for
that whole visit:

* dashboard: the app as it is, through Flask's test client: cold (a new process: no
  kept reports), warm (the same visit again) and a visit that takes the default
  baseline (no ``compare`` argument);
* baseline in the same run: the page as it was built before — every request (page
  and each chart) reading each test's summary and series on its own, with no kept
  report — over the same data, emulator and renderer.

Queries are counted at the metrics source (``BigQueryMetrics.queries``); the sandbox's
BigQuery answers locally in milliseconds, so production's latency per query
(hundreds of ms) makes the query count the figure that matters.
"""

from __future__ import annotations

import base64
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROWS = int(os.environ.get("BENCH_DASHBOARD_ROWS", "6000"))
SAMPLES = int(os.environ.get("BENCH_SAMPLES", "5"))
CHARTS = ("latency", "throughput", "errors", "tokens")


def _records(test_id: str, start: float, slow: float) -> list[dict[str, Any]]:
    return [{
        "test_id": test_id, "request_type": "POST", "request_name": "/v2/models/toy-lm/generate",
        "response_length": 380, "response_time": slow * (20.0 + (i * 37 % 101) / 5),
        "start_time": start + i / 10, "exception": None if i % 40 else "HTTPError: 503",
        "model_name": "toy-lm", "server": "triton", "accelerator": "cpu", "users": 8,
        "num_output_tokens": 16,
    } for i in range(ROWS)]


def _ingest(client: Any, records: list[dict[str, Any]], prefix: str) -> None:
    for number in range(0, len(records), 500):
        data = json.dumps(records[number:number + 500]).encode()
        body = {"message": {"data": base64.b64encode(data).decode(),
                            "messageId": f"{prefix}-{number}", "attributes": {}},
                "subscription": "projects/p/subscriptions/s"}
        response = client.post("/", json=body)
        if response.status_code != 200:
            raise RuntimeError(f"ingest failed: {response.status_code}")


def _visit(get: Callable[[str], Any], page: str) -> None:
    """Fetch a page and every chart it links to, as a browser would."""
    import re

    html = get(page).get_data(as_text=True)
    for src in re.findall(r'<img src="([^"]+)"', html):
        if get(src.replace("&amp;", "&")).status_code != 200:
            raise RuntimeError(f"chart {src} failed")


def _visit_ms(client: Any, path: str) -> float:
    start = time.perf_counter()
    _visit(client.get, path)
    return (time.perf_counter() - start) * 1000


def _timed(action: Callable[[], None]) -> float:
    start = time.perf_counter()
    action()
    return (time.perf_counter() - start) * 1000


def _before(source: Any, test_id: str, compare: str) -> None:
    """One visit as the dashboard served it before: the page and each chart rebuilt
    the report from per-test queries (summary and series of each test)."""
    from shared.metrics.loadtest.report import chart_png, render_html
    from shared.metrics.loadtest.report_data import Report, TestData

    def report() -> Report:
        summaries = [source.summary(test_id), source.summary(compare)]
        per = "second"
        series = [source.series([t], per=per).get(t, []) for t in (test_id, compare)]
        return Report(TestData(summaries[0], tuple(series[0])), per,
                      TestData(summaries[1], tuple(series[1])))

    render_html(report(), lambda name: f"{name}.png")
    for name in CHARTS:
        chart_png(report(), name)


def main() -> int:
    from services.dashboard.app import create_app
    from shared.metrics.loadtest.views import BigQueryMetrics
    from shared.metrics.names import Names
    from tests.bench.results import write_results
    from tests.bigquery_fixtures import PROJECT, metrics_dataset

    with tempfile.TemporaryDirectory() as tmp, metrics_dataset(Path(tmp)) as dataset:
        ingest = dataset.ingest
        start = time.time() - 7200
        print(f"ingesting 2 tests x {ROWS:,} requests ...", flush=True)
        _ingest(ingest, _records("bench-a", start, 1.0), "a")
        _ingest(ingest, _records("bench-b", start + 3600, 1.2), "b")
        names = Names.of(PROJECT, dataset.config)
        page = "/tests/bench-b?compare=bench-a"

        figures: dict[str, Any] = {"rows_per_test": ROWS, "samples": SAMPLES}
        for label, visit_path in (("compared", page), ("default_baseline", "/tests/bench-b")):
            cold_ms, cold_queries, warm_ms = [], [], []
            warm_queries = 0
            for _ in range(SAMPLES):
                source = BigQueryMetrics(names)
                client = create_app(lambda source=source: source).test_client()
                cold_ms.append(_visit_ms(client, visit_path))
                cold_queries.append(source.queries)
                before = source.queries
                warm_ms.append(_visit_ms(client, visit_path))
                warm_queries = source.queries - before
            figures[label] = {
                "cold_ms": round(statistics.median(cold_ms), 1),
                "cold_queries": cold_queries[0],
                "warm_ms": round(statistics.median(warm_ms), 1),
                "warm_queries": warm_queries,
            }
        before_ms, before_queries = [], 0
        for _ in range(SAMPLES):
            source = BigQueryMetrics(names)
            before_ms.append(_timed(lambda source=source: _before(source, "bench-b", "bench-a")))
            before_queries = source.queries
        figures["before"] = {"visit_ms": round(statistics.median(before_ms), 1),
                             "queries": before_queries}

    compared, before = figures["compared"], figures["before"]
    print(f"\ncompared page + {len(CHARTS)} charts, {ROWS:,} requests per test "
          f"(median of {SAMPLES}):")
    print(f"  dashboard cold   {compared['cold_ms']:>8.1f} ms  "
          f"{compared['cold_queries']:>3} BigQuery queries")
    print(f"  dashboard warm   {compared['warm_ms']:>8.1f} ms  "
          f"{compared['warm_queries']:>3} BigQuery queries")
    default = figures["default_baseline"]
    print(f"  default baseline {default['cold_ms']:>8.1f} ms  "
          f"{default['cold_queries']:>3} BigQuery queries (cold, includes choosing it)")
    print(f"  before (baseline){before['visit_ms']:>8.1f} ms  "
          f"{before['queries']:>3} BigQuery queries (every visit)")
    write_results("dashboard", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
