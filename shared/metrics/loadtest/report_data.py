"""What a load-test report shows, as data: one test (its summary and what each view says
about it), or a test and the baseline it is compared with. The report's pages and
tables read it; :mod:`shared.metrics.loadtest.report` builds it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from shared.metrics.loadtest.charts import Run, run_labels
from shared.metrics.loadtest.model import (
    Failure,
    RequestStats,
    SeriesPoint,
    TestComparison,
    TestSummary,
)

__all__ = ["Report", "Resolution", "TestData"]

Resolution = Literal["second", "minute"]


@dataclass(frozen=True)
class TestData:
    """One test as a report shows it: its summary and what each view says about it."""

    summary: TestSummary
    series: tuple[SeriesPoint, ...] = ()
    requests: tuple[RequestStats, ...] = ()
    failures: tuple[Failure, ...] = ()

    @property
    def test_id(self) -> str:
        return self.summary.test_id


@dataclass(frozen=True)
class Report:
    """Everything a report shows: one test, or a test and the baseline it is compared with.

    Both tests' series have the same resolution (``per``) so their charts overlay.
    """

    data: TestData
    per: Resolution
    baseline: TestData | None = None
    # Lines the page shows under the title, each naming two figures that disagree
    # (Locust's own aggregate against BigQuery's: ``locust_stats.aggregate_notes``).
    notes: tuple[str, ...] = ()

    @property
    def test(self) -> TestSummary:
        return self.data.summary

    @property
    def other(self) -> TestSummary | None:
        """The baseline test, if the report compares."""
        return self.baseline.summary if self.baseline is not None else None

    @property
    def comparison(self) -> TestComparison | None:
        other = self.other
        return TestComparison(test=self.test, other=other) if other is not None else None

    @property
    def runs(self) -> tuple[Run, ...]:
        """The series to chart: the test first, then its baseline."""
        tests = [self.data] + ([self.baseline] if self.baseline is not None else [])
        labels = run_labels([t.test_id for t in tests])
        return tuple(Run(label, t.series) for label, t in zip(labels, tests, strict=True))
