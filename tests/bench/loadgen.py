"""``make bench`` (load generation): requests/s from 1, 2 and 4 Locust workers, and how far
Locust's own aggregate percentiles are from the exact ones in BigQuery.

One sandbox (the metrics part: Pub/Sub, ingest_metrics, BigQuery, a real Triton on CPU);
the same target (``toy-lm``), users and run time for every run, each run as
``accelops loadtest --workers N`` makes it (a master and N worker processes), and a
single Locust process as the baseline in the same run. Per run:

* requests and requests/s (rows in BigQuery over the test's duration, from the views);
* Locust's aggregate p50/p90/p99 (the master's merged histograms, read as Locust reads
  them) against the views' exact percentiles over every request's own record, and the
  relative error of Locust's figure. Locust's figures count failed requests too: the
  runs have none, so both cover the same requests.

Prints every figure and writes them to ``bench-results/loadgen.json``. The machine's
cores bound the load: on 2 cores the workers share them with Triton and the sandbox.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from sandbox.demos.loadtest import LoadTest, new_test_id, run_test
from sandbox.supervisor.runner import Sandbox
from shared.metrics.loadtest.views import BigQueryMetrics
from tests.bench.results import write_results

USERS = int(os.environ.get("BENCH_LOADGEN_USERS", "8"))
SECONDS = int(os.environ.get("BENCH_LOADGEN_SECONDS", "15"))
# 0: one Locust process (the baseline); N: a master and N workers.
WORKERS = tuple(int(n) for n in os.environ.get("BENCH_LOADGEN_WORKERS", "0,1,2,4").split(","))


def _error(locust: float | None, exact: float | None) -> float | None:
    if locust is None or not exact:
        return None
    return round((locust - exact) / exact * 100, 2)


def _one(sandbox: Sandbox, workers: int) -> dict[str, Any]:
    test = LoadTest(test_id=new_test_id(), host=sandbox.triton_url, users=USERS,
                    duration_s=SECONDS, workers=workers)
    done = run_test(test, sandbox.env(), BigQueryMetrics.from_env(), progress=lambda _: None)
    summary, aggregate = done.summary, done.locust.aggregate
    assert aggregate is not None
    exact = {"p50": summary.p50_ms, "p90": summary.p90_ms, "p99": summary.p99_ms}
    figures: dict[str, Any] = {
        "workers": workers, "test_id": test.test_id, "requests": summary.requests,
        "failures": summary.errors, "duration_s": round(summary.duration_s, 2),
        "requests_per_s": round(summary.qps, 1),
        "bigquery_ms": {k: round(v, 2) if v is not None else None for k, v in exact.items()},
        "locust_ms": dict(aggregate.percentiles),
        "locust_error_pct": {k: _error(aggregate.percentiles[k], exact[k]) for k in exact},
        "report_notes": list(done.notes),
    }
    label = f"{workers} workers" if workers else "1 process"
    print(f"{label:>10}: {summary.requests} requests, {summary.qps:.1f}/s; "
          + ", ".join(f"{k} {exact[k]:.1f} ms (Locust {aggregate.percentiles[k]:g}, "
                      f"{figures['locust_error_pct'][k]:+.1f}%)" for k in exact
                      if exact[k] is not None and aggregate.percentiles[k] is not None))
    return figures


def main() -> int:
    figures: dict[str, Any] = {"users": USERS, "run_time_s": SECONDS, "cores": os.cpu_count(),
                               "runs": []}
    with tempfile.TemporaryDirectory(prefix="accelops-bench-loadgen-") as tmp:
        sandbox = Sandbox(Path(tmp), parts={"metrics"}).start(progress=False)
        try:
            with sandbox.client_env():
                for workers in WORKERS:
                    figures["runs"].append(_one(sandbox, workers))
        finally:
            sandbox.stop()
    write_results("loadgen", figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
