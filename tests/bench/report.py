"""Report cost: import time of the report module, and rendering a compared report.

``python -m tests.bench.report`` prints every figure and writes them to
``bench-results/report.json``.

* import: ``shared.metrics.loadtest.report`` in a fresh interpreter (median of several), next
  to a bare interpreter and to ``matplotlib.pyplot`` (what an eager import would add);
  it also checks that matplotlib stays unimported;
* render: one report compared with a baseline (two 600-point per-second series): the
  HTML page and the four charts, cold (first chart pays for the matplotlib import) and
  warm (median); baseline in the same run: the same charts drawn through pyplot's
  global figure state, the usual way.
"""

from __future__ import annotations

import io
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import timedelta

from tests.bench.results import REPO, write_results
from tests.fake_metrics import START, FakeSource, make_series, make_summary

SAMPLES = int(os.environ.get("BENCH_SAMPLES", "7"))
POINTS = 600


def _source() -> FakeSource:
    """Two tests just under 10 minutes (charted per second): ``POINTS`` buckets each."""
    duration = POINTS - 0.1
    return (FakeSource()
            .add(make_summary("run-a", duration_s=duration))
            .add(make_summary("run-b", duration_s=duration, start=START + timedelta(hours=1)),
                 scale=1.2))


def _import_ms(code: str) -> float:
    times = []
    for _ in range(SAMPLES):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _report_imports_matplotlib() -> bool:
    code = "import sys, shared.metrics.loadtest.report; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO,
                         capture_output=True, text=True)
    return out.stdout.strip() == "True"


def _render_once() -> dict[str, float]:
    from shared.metrics.loadtest.report import CHART_NAMES, build_report, chart_png, render_html

    timings: dict[str, float] = {}
    start = time.perf_counter()
    report = build_report(_source(), "run-a", "run-b")
    render_html(report, lambda name: f"{name}.png")
    timings["html"] = (time.perf_counter() - start) * 1000
    for name in CHART_NAMES:
        begin = time.perf_counter()
        chart_png(report, name)
        timings[name] = (time.perf_counter() - begin) * 1000
    timings["total"] = (time.perf_counter() - start) * 1000
    return timings


def _pyplot_once() -> float:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [make_series("run-a", POINTS), make_series("run-b", POINTS, scale=1.2)]
    start = time.perf_counter()
    for field_sets in (("p50_ms", "p90_ms", "p99_ms"), ("qps",), ("errors",),
                       ("tokens_per_s",)):
        plt.figure(figsize=(9, 3.6), dpi=100)
        for points in runs:
            xs = [p.offset_s for p in points]
            for field in field_sets:
                plt.plot(xs, [getattr(p, field) for p in points], label=field)
        plt.legend()
        plt.grid(True)
        plt.tight_layout()
        plt.savefig(io.BytesIO(), format="png")
        plt.close()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    figures: dict[str, object] = {}
    bare = _import_ms("pass")
    report = _import_ms("import shared.metrics.loadtest.report")
    pyplot = _import_ms("import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot")
    figures["import_ms"] = {"bare_interpreter": round(bare, 1),
                            "shared.metrics.loadtest.report": round(report, 1),
                            "shared.metrics.report_over_bare": round(report - bare, 1),
                            "matplotlib.pyplot_over_bare": round(pyplot - bare, 1)}
    figures["report_imports_matplotlib"] = _report_imports_matplotlib()

    cold = _render_once()
    warm = [_render_once() for _ in range(SAMPLES)]
    figures["render_compare_ms"] = {
        "cold": {k: round(v, 1) for k, v in cold.items()},
        "warm_median": {k: round(statistics.median(w[k] for w in warm), 1) for k in cold},
        "pyplot_baseline_warm_median": round(
            statistics.median(_pyplot_once() for _ in range(SAMPLES)), 1),
    }
    print(json.dumps(figures, indent=2))
    write_results("report", figures)


if __name__ == "__main__":
    main()
