"""An in-memory ``MetricsSource`` over synthetic tests, for the report and dashboard tests.

It keeps the contract of the BigQuery source (:class:`shared.metrics.loadtest.model.MetricsSource`):
the plural methods answer for the ids they know and leave the others out,
``summary`` raises ``NotFoundError`` for an unknown id, every method raises a
``TransientError`` while "unreachable"; series come oldest first with the first and
last buckets partial, request rows most requests first, failures most frequent first,
recent tests newest first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from shared.errors import NotFoundError, UnavailableError
from shared.metrics.loadtest.model import (
    BaselineChoice,
    Baselines,
    Failure,
    RequestStats,
    SeriesPoint,
    TestSummary,
)

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
FAILURE_MESSAGE = "HTTPError('503 Server Error: Service Unavailable')"


def make_summary(test_id: str, *, duration_s: float = 300.0, start: datetime = START,
                 **fields: Any) -> TestSummary:
    """A plausible finished test with a run record; ``fields`` override any value.

    ``success_qps`` follows ``qps`` and ``error_rate`` unless given.
    """
    summary = TestSummary(
        test_id=test_id, model_name="llama-3-8b", server="vllm", accelerator="v5e-8",
        users=64, started=start, ended=start + timedelta(seconds=duration_s),
        duration_s=duration_s, requests=12_000, errors=60, error_rate=0.005, qps=40.0,
        p50_ms=210.0, p90_ms=480.0, p99_ms=900.0, input_tokens=2_400_000,
        output_tokens=1_500_000, tokens_per_s=5_000.0, max_ms=2_400.0, mean_ms=260.0,
        finished=True, spawn_rate=8.0, run_time_s=duration_s, locust_version="2.32.4",
        loadgen_revision="3f2c1ab", host="http://vllm.inference.svc:8000",
    )
    summary = replace(summary, **fields)
    if "success_qps" not in fields:
        summary = replace(summary, success_qps=summary.qps * (1 - summary.error_rate))
    return summary


def make_series(test_id: str, points: int, *, step_s: float = 1.0, scale: float = 1.0,
                start: datetime = START, users: int | None = 64,
                streamed: bool = False, per_token: bool | None = None,
                goodput: bool = False) -> list[SeriesPoint]:
    """``points`` buckets ``step_s`` apart with a smooth wave, a few errors, users ramping
    up over the first eight buckets, and the first and last buckets partial. A
    ``streamed`` series has times to first token and, unless ``per_token`` is False,
    times per output token; ``goodput`` adds the requests/s meeting SLOs."""
    tpot = streamed if per_token is None else per_token
    series = []
    for i in range(points):
        wave = 1.0 + 0.2 * math.sin(i / 10)
        requests = round(40 * step_s * wave)
        errors = 3 * int(i % 7 == 0)
        p50 = 200 * scale * wave
        series.append(SeriesPoint(
            test_id=test_id, bucket=start + timedelta(seconds=i * step_s),
            offset_s=i * step_s, requests=requests, errors=errors,
            qps=requests / step_s, p50_ms=p50, p90_ms=450 * scale * wave,
            p99_ms=850 * scale * wave, tokens_per_s=5_000 / scale * wave,
            success_qps=(requests - errors) / step_s, max_ms=1_200 * scale * wave,
            users=None if users is None else min(users, math.ceil(users * (i + 1) / 8)),
            ttft_p50_ms=0.3 * p50 if streamed else None,
            ttft_p90_ms=0.5 * p50 if streamed else None,
            ttft_p99_ms=0.8 * p50 if streamed else None,
            tpot_p50_ms=0.02 * p50 if tpot else None,
            tpot_p90_ms=0.03 * p50 if tpot else None,
            tpot_p99_ms=0.05 * p50 if tpot else None,
            goodput_qps=0.8 * (requests - errors) / step_s if goodput else None,
            partial=i in (0, points - 1),
        ))
    return series


def make_request_stats(summary: TestSummary) -> list[RequestStats]:
    """Locust's table for ``summary``: completions (every failure) and a model listing."""
    listing = summary.requests // 10
    completions = summary.requests - listing
    return [
        RequestStats(summary.test_id, "POST", "/v1/completions", completions, summary.errors,
                     summary.p50_ms, summary.p90_ms, summary.p99_ms, summary.max_ms,
                     summary.mean_ms, 1_830.5, summary.output_tokens),
        RequestStats(summary.test_id, "GET", "/v1/models", listing, 0, 4.0, 6.0, 9.5, 12.0,
                     4.4, 412.0, 0),
    ]


def make_failures(summary: TestSummary) -> list[Failure]:
    """One kind of failure for every failed request of ``summary``."""
    if not summary.errors:
        return []
    return [Failure(summary.test_id, "POST", "/v1/completions", FAILURE_MESSAGE,
                    summary.errors)]


@dataclass
class FakeSource:
    """Tests by id, with series, request rows and failures derived from each summary
    unless given to :meth:`add`."""

    tests: dict[str, TestSummary] = field(default_factory=dict)
    unreachable: bool = False
    calls: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._scales: dict[str, float] = {}
        self._requests: dict[str, list[RequestStats]] = {}
        self._failures: dict[str, list[Failure]] = {}

    def add(self, summary: TestSummary, *, scale: float = 1.0,
            requests: Sequence[RequestStats] | None = None,
            failures: Sequence[Failure] | None = None) -> FakeSource:
        """Add a test whose latencies are ``scale`` times (and tokens/s 1/scale) the usual;
        ``requests`` and ``failures`` replace the rows derived from the summary."""
        self.tests[summary.test_id] = summary
        self._scales[summary.test_id] = scale
        self._requests[summary.test_id] = (list(requests) if requests is not None
                                           else make_request_stats(summary))
        self._failures[summary.test_id] = (list(failures) if failures is not None
                                           else make_failures(summary))
        return self

    def summaries(self, test_ids: Sequence[str]) -> dict[str, TestSummary]:
        return {i: self.tests[i] for i in self._known("summaries", test_ids)}

    def summary(self, test_id: str) -> TestSummary:
        if not self._known("summary", [test_id]):
            raise NotFoundError(f"no load test with id {test_id!r}")
        return self.tests[test_id]

    def series(self, test_ids: Sequence[str], *,
               per: Literal["second", "minute"]) -> dict[str, list[SeriesPoint]]:
        step = 1.0 if per == "second" else 60.0
        answer = {}
        for test_id in self._known(f"series/{per}", test_ids):
            summary = self.tests[test_id]
            answer[test_id] = make_series(
                test_id, max(1, math.ceil(summary.duration_s / step)), step_s=step,
                scale=self._scales.get(test_id, 1.0), start=summary.started,
                users=summary.users, streamed=summary.ttft_p50_ms is not None,
                per_token=summary.tpot_p50_ms is not None, goodput=summary.has_slos)
        return answer

    def request_stats(self, test_ids: Sequence[str]) -> dict[str, list[RequestStats]]:
        return {i: self._requests[i] for i in self._known("request_stats", test_ids)}

    def failures(self, test_ids: Sequence[str]) -> dict[str, list[Failure]]:
        return {i: self._failures[i] for i in self._known("failures", test_ids)}

    def baselines(self, test_id: str, limit: int = 50) -> Baselines:
        """The other single-model tests, those of the same model and server first, then
        newest first; the default is the latest earlier one of the same model and
        server. An unknown test has no default and nothing alike."""
        self._known("baselines", [test_id])
        test = self.tests.get(test_id)

        def alike(s: TestSummary) -> bool:
            return test is not None and (s.model_name, s.server) == (test.model_name,
                                                                     test.server)

        others = sorted((s for s in self.tests.values()
                         if s.test_id != test_id and not s.mixed_models),
                        key=lambda s: (not alike(s), -s.started.timestamp(), s.test_id))
        earlier = [s for s in others if alike(s) and test is not None
                   and s.started < test.started]
        return Baselines(
            earlier[0].test_id if earlier else None,
            tuple(BaselineChoice(s.test_id, s.model_name, s.server, s.started, alike(s))
                  for s in others[:limit]))

    def recent_tests(self, limit: int = 50) -> list[TestSummary]:
        self._known("recent_tests", [])
        newest = sorted(self.tests.values(), key=lambda s: s.started, reverse=True)
        return newest[:limit]

    def _known(self, call: str, test_ids: Sequence[str]) -> list[str]:
        self.calls.append((call, ",".join(test_ids)))
        if self.unreachable:
            raise UnavailableError("BigQuery did not answer in time")
        return [i for i in dict.fromkeys(test_ids) if i in self.tests]
