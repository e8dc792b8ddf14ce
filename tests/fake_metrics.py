"""An in-memory ``MetricsSource`` over synthetic tests, for the report and dashboard tests.

It keeps the contract of the BigQuery source: ``NotFoundError`` for an unknown test
id, ``TransientError`` while "unreachable", series oldest first, recent tests newest
first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Literal

from shared.errors import NotFoundError, UnavailableError
from shared.metrics.model import SeriesPoint, TestSummary

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def make_summary(test_id: str, *, duration_s: float = 300.0, start: datetime = START,
                 **fields: object) -> TestSummary:
    """A plausible summary; ``fields`` override any value."""
    summary = TestSummary(
        test_id=test_id, model_name="llama-3-8b", server="vllm", accelerator="v5e-8",
        users=64, started=start, ended=start + timedelta(seconds=duration_s),
        duration_s=duration_s, requests=12_000, errors=60, error_rate=0.005, qps=40.0,
        p50_ms=210.0, p90_ms=480.0, p99_ms=900.0, input_tokens=2_400_000,
        output_tokens=1_500_000, tokens_per_s=5_000.0,
    )
    return replace(summary, **fields)


def make_series(test_id: str, points: int, *, step_s: float = 1.0, scale: float = 1.0,
                start: datetime = START) -> list[SeriesPoint]:
    """``points`` buckets ``step_s`` apart with a smooth ramp and a few errors."""
    series = []
    for i in range(points):
        wave = 1.0 + 0.2 * math.sin(i / 10)
        requests = round(40 * step_s * wave)
        series.append(SeriesPoint(
            test_id=test_id, bucket=start + timedelta(seconds=i * step_s),
            offset_s=i * step_s, requests=requests, errors=3 * int(i % 7 == 0),
            qps=requests / step_s, p50_ms=200 * scale * wave, p90_ms=450 * scale * wave,
            p99_ms=850 * scale * wave, tokens_per_s=5_000 / scale * wave,
        ))
    return series


@dataclass
class FakeSource:
    """Tests by id, with per-second and per-minute series derived from each summary."""

    tests: dict[str, TestSummary] = field(default_factory=dict)
    unreachable: bool = False
    calls: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._scales: dict[str, float] = {}

    def add(self, summary: TestSummary, *, scale: float = 1.0) -> FakeSource:
        """Add a test whose latencies are ``scale`` times (and tokens/s 1/scale) the usual."""
        self.tests[summary.test_id] = summary
        self._scales[summary.test_id] = scale
        return self

    def summary(self, test_id: str) -> TestSummary:
        self._check("summary", test_id)
        return self.tests[test_id]

    def series(self, test_id: str, *, per: Literal["second", "minute"]) -> list[SeriesPoint]:
        self._check(f"series/{per}", test_id)
        summary = self.tests[test_id]
        step = 1.0 if per == "second" else 60.0
        count = max(1, math.ceil(summary.duration_s / step))
        return make_series(test_id, count, step_s=step, scale=self._scales.get(test_id, 1.0),
                           start=summary.started)

    def recent_tests(self, limit: int = 50) -> list[TestSummary]:
        self._check("recent_tests", "")
        newest = sorted(self.tests.values(), key=lambda s: s.started, reverse=True)
        return newest[:limit]

    def _check(self, call: str, test_id: str) -> None:
        self.calls.append((call, test_id))
        if self.unreachable:
            raise UnavailableError("BigQuery did not answer in time")
        if test_id and test_id not in self.tests:
            raise NotFoundError(f"no load test with id {test_id!r}")
