"""What the views return, as typed rows: the report and dashboard read only these."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

__all__ = ["MetricsSource", "SeriesPoint", "TestComparison", "TestSummary"]


@dataclass(frozen=True)
class TestSummary:
    """One row of the ``test_summary`` view."""

    test_id: str
    model_name: str | None
    server: str | None
    accelerator: str | None
    users: int | None
    started: datetime
    ended: datetime
    duration_s: float
    requests: int
    errors: int
    error_rate: float
    qps: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    input_tokens: int
    output_tokens: int
    tokens_per_s: float


@dataclass(frozen=True)
class SeriesPoint:
    """One bucket of a test's time series (``test_timeseries`` per minute,
    ``test_timeseries_seconds`` per second); ``offset_s`` counts from the test's start."""

    test_id: str
    bucket: datetime
    offset_s: float
    requests: int
    errors: int
    qps: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    tokens_per_s: float


@dataclass(frozen=True)
class TestComparison:
    """Two tests side by side: ``other`` is the baseline ``test`` is compared with."""

    test: TestSummary
    other: TestSummary

    def change(self, field: str) -> float | None:
        """Relative change of a numeric summary field, test vs other (0.1 = +10 %)."""
        before = float(getattr(self.other, field))
        after = float(getattr(self.test, field))
        if before == 0:
            return None
        return (after - before) / before


class MetricsSource(Protocol):
    """Where reports read from: the BigQuery views in production and the sandbox.

    Methods raise ``shared.errors.NotFoundError`` for an unknown test id and
    ``TransientError`` when the source is unreachable.
    """

    def summary(self, test_id: str) -> TestSummary: ...

    def series(self, test_id: str, *, per: Literal["second", "minute"]) -> list[SeriesPoint]:
        """The test's time series, oldest first."""
        ...

    def recent_tests(self, limit: int = 50) -> list[TestSummary]:
        """The most recent tests, newest first."""
        ...
