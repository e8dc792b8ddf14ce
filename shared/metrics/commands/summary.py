"""A load test's summary as ``accelops report`` and ``accelops loadtest`` print it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from shared.metrics.loadtest.model import MetricsSource, TestSummary
from shared.metrics.loadtest.report import write_html

__all__ = ["format_summary", "print_outcome"]


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} ms"


def _slos(s: TestSummary) -> str:
    return ", ".join(f"{name} <= {value:g} ms" for name, value in (
        ("TTFT", s.slo_ttft_ms), ("TPOT", s.slo_tpot_ms), ("latency", s.slo_latency_ms))
        if value is not None)


def format_summary(s: TestSummary) -> str:
    lines = [
        f"  test        {s.test_id}  ({s.server or '?'} / {s.model_name or '?'} on "
        f"{s.accelerator or '?'}, {s.users or '?'} users, {s.duration_s:.1f}s)",
        f"  requests    {s.requests}  ({s.qps:.1f}/s, {s.success_qps:.1f}/s successful), "
        f"errors {s.errors} ({s.error_rate:.1%})",
        f"  latency     p50 {_ms(s.p50_ms)}   p90 {_ms(s.p90_ms)}   p99 {_ms(s.p99_ms)}"
        "   (successful requests)",
    ]
    if s.ttft_p50_ms is not None:
        lines.append(f"  first token p50 {_ms(s.ttft_p50_ms)}   p90 {_ms(s.ttft_p90_ms)}   "
                     f"p99 {_ms(s.ttft_p99_ms)}")
    if s.tpot_p50_ms is not None:
        lines.append(f"  per token   p50 {_ms(s.tpot_p50_ms)}   p90 {_ms(s.tpot_p90_ms)}   "
                     f"p99 {_ms(s.tpot_p99_ms)}   (time per output token)")
    if s.goodput is not None and s.goodput_qps is not None:
        lines.append(f"  goodput     {s.goodput:.1%} of requests met every SLO "
                     f"({s.goodput_qps:.1f}/s; {_slos(s)})")
    lines.append(f"  tokens      {s.output_tokens} out, {s.tokens_per_s:.0f}/s")
    if s.mixed_models:
        lines.append(f"  warning     requests named several models: {s.models_seen}")
    return "\n".join(lines)


def print_outcome(source: MetricsSource, summary: TestSummary, notes: Sequence[str],
                  report_dir: Path | None) -> None:
    """What ``accelops loadtest`` prints once every request is in BigQuery, wherever the
    test ran: the summary, where Locust's aggregate differs, the report (unless
    ``report_dir`` is None) and how to compare."""
    print(format_summary(summary))
    for note in notes:
        print(f"  note: {note}")
    if report_dir is not None:
        print(f"  report      {write_html(source, summary.test_id, report_dir, notes=notes)}")
    print(f"compare with another run:  accelops report {summary.test_id} --compare "
          "OTHER_TEST_ID")
