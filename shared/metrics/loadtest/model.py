"""What the views return, as typed rows: the report and dashboard read only these."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

__all__ = ["BaselineChoice", "Baselines", "Failure", "MetricsSource", "RequestStats",
           "SeriesPoint", "TestComparison", "TestSummary"]


@dataclass(frozen=True)
class TestSummary:
    """One row of the ``test_summary`` view.

    ``model_name``, ``server`` and ``accelerator`` come from the test's run record;
    without one, ``model_inferred`` is set and the model is the one most requests
    named. ``model_count`` > 1 means the requests named several models (``models_seen``,
    most requested first): such a test is flagged and is no one's baseline. Latency
    fields cover successful requests only; ``ttft_*``, ``tpot_*`` and ``itl_*`` streamed
    ones only (None if none; ``itl_*`` over every gap between two tokens). ``slo_*`` are
    the SLOs given with the test; ``good_requests`` (succeeded and met every one),
    ``goodput`` (their share of all requests) and ``goodput_qps`` are None without SLOs.
    """

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
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    input_tokens: int
    output_tokens: int
    tokens_per_s: float
    success_qps: float = 0.0
    max_ms: float | None = None
    mean_ms: float | None = None
    ttft_p50_ms: float | None = None
    ttft_p90_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_p50_ms: float | None = None
    tpot_p90_ms: float | None = None
    tpot_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p90_ms: float | None = None
    itl_p99_ms: float | None = None
    itl_mean_ms: float | None = None
    itl_gaps: int = 0
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    slo_latency_ms: float | None = None
    good_requests: int | None = None
    goodput: float | None = None
    goodput_qps: float | None = None
    model_inferred: bool = False
    model_count: int = 1
    models_seen: str | None = None
    finished: bool = False
    spawn_rate: float | None = None
    run_time_s: float | None = None
    locust_version: str | None = None
    loadgen_revision: str | None = None
    host: str | None = None

    @property
    def successes(self) -> int:
        return self.requests - self.errors

    @property
    def mixed_models(self) -> bool:
        return self.model_count > 1

    @property
    def has_slos(self) -> bool:
        return any(v is not None for v in (self.slo_ttft_ms, self.slo_tpot_ms,
                                             self.slo_latency_ms))


@dataclass(frozen=True)
class SeriesPoint:
    """One bucket of a test's time series (``test_timeseries`` per minute,
    ``test_timeseries_seconds`` per second); ``offset_s`` counts from the test's start.

    ``partial`` marks the first and last buckets, which the test only partly covered:
    their counts are not rates over the whole bucket.
    """

    test_id: str
    bucket: datetime
    offset_s: float
    requests: int
    errors: int
    qps: float
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    tokens_per_s: float
    success_qps: float = 0.0
    max_ms: float | None = None
    users: int | None = None
    ttft_p50_ms: float | None = None
    ttft_p90_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_p50_ms: float | None = None
    tpot_p90_ms: float | None = None
    tpot_p99_ms: float | None = None
    # Requests per second that succeeded and met the test's SLOs; None without SLOs.
    goodput_qps: float | None = None
    partial: bool = False


@dataclass(frozen=True)
class RequestStats:
    """One row of Locust's statistics table (``test_requests_by_name``): latency over
    successful requests, ``mean_bytes`` over all."""

    test_id: str
    request_type: str
    request_name: str
    requests: int
    failures: int
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    mean_ms: float | None
    mean_bytes: float | None
    output_tokens: int


@dataclass(frozen=True)
class Failure:
    """One distinct failure of a test (``test_failures``) and how often it happened."""

    test_id: str
    request_type: str
    request_name: str
    message: str
    occurrences: int


@dataclass(frozen=True)
class BaselineChoice:
    """A test a report can be compared with (``test_comparison``: single-model tests)."""

    test_id: str
    model_name: str | None
    server: str | None
    started: datetime
    # Same model and server as the test being reported: offered first.
    alike: bool


@dataclass(frozen=True)
class Baselines:
    """The baselines offered for one test: ``default`` is the previous test of the same
    model and server (None when there is none), ``choices`` alike tests first, then
    newest first."""

    default: str | None
    choices: tuple[BaselineChoice, ...]


@dataclass(frozen=True)
class TestComparison:
    """Two tests side by side: ``other`` is the baseline ``test`` is compared with."""

    test: TestSummary
    other: TestSummary

    def change(self, field: str) -> float | None:
        """Relative change of a numeric summary field, test vs other (0.1 = +10 %)."""
        before, after = getattr(self.other, field), getattr(self.test, field)
        if before is None or after is None or before == 0:
            return None
        return (float(after) - float(before)) / float(before)

    @property
    def warnings(self) -> tuple[str, ...]:
        """Why the comparison may mislead: the same test twice, different servers or
        models, different SLOs (for goodput), a test that mixed models."""
        test, other = self.test, self.other
        found: list[str] = []
        if test.test_id == other.test_id:
            found.append("the test is compared with itself")
        for field, what in (("server", "servers"), ("model_name", "models"),
                            ("accelerator", "accelerators")):
            mine, theirs = getattr(test, field), getattr(other, field)
            if mine != theirs:
                found.append(f"different {what}: {mine or 'unknown'} and {theirs or 'unknown'}")
        slos = ("slo_ttft_ms", "slo_tpot_ms", "slo_latency_ms")
        if ((test.has_slos or other.has_slos)
                and [getattr(test, f) for f in slos] != [getattr(other, f) for f in slos]):
            found.append("different SLOs: goodput was judged against different objectives")
        for summary in (test, other):
            if summary.mixed_models:
                found.append(f"{summary.test_id} sent requests to several models "
                             f"({summary.models_seen})")
        return tuple(found)


class MetricsSource(Protocol):
    """Where reports read from: the BigQuery views in production and the sandbox.

    The plural methods take every test of a page at once, so a page costs one query
    per view whatever it compares. Methods raise ``TransientError`` when the source is
    unreachable; ids the source does not know are simply absent from the answers.
    """

    def summaries(self, test_ids: Sequence[str]) -> dict[str, TestSummary]: ...

    def summary(self, test_id: str) -> TestSummary:
        """One test; raises ``shared.errors.NotFoundError`` for an unknown id."""
        ...

    def series(self, test_ids: Sequence[str], *,
               per: Literal["second", "minute"]) -> dict[str, list[SeriesPoint]]:
        """Each test's time series, oldest first."""
        ...

    def request_stats(self, test_ids: Sequence[str]) -> dict[str, list[RequestStats]]:
        """Each test's rows per request type and name, most requests first."""
        ...

    def failures(self, test_ids: Sequence[str]) -> dict[str, list[Failure]]:
        """Each test's distinct failures, most frequent first."""
        ...

    def baselines(self, test_id: str, limit: int = 50) -> Baselines:
        """What ``test_id`` can be compared with, and its default baseline."""
        ...

    def recent_tests(self, limit: int = 50) -> list[TestSummary]:
        """The most recent tests, newest first."""
        ...
