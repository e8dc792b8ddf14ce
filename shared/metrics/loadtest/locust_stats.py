"""Locust's own aggregate of a run, and where it disagrees with BigQuery's figures.

Locust keeps each request name's response times as a histogram rounded to about two
significant digits (147 ms counts as 150, 3432 as 3400), merges the workers'
histograms on the master, and reads its percentiles from the merged histogram, over
failed requests too. The views compute exact percentiles over every successful
request's own record. The two agree on counts and roughly on percentiles; where they
do not, the report says so, naming both numbers, so nobody quotes Locust's figure as
the test's.

Pure: the entries are what ``locust --json-file`` writes (one object per request name,
with ``num_requests``, ``num_failures`` and ``response_times``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.metrics.loadtest.model import TestSummary

__all__ = ["PERCENTILES", "TOLERANCE", "LocustAggregate", "aggregate_notes",
           "locust_aggregate", "locust_percentile"]

PERCENTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
# A relative difference the report lets pass unremarked: under Locust's own rounding
# (up to 5% for times of 10 ms and more), not worth a line.
TOLERANCE = 0.05


@dataclass(frozen=True)
class LocustAggregate:
    """Locust's "Aggregated" row: requests, failures and percentiles in ms (None when
    it counted no request)."""

    requests: int
    failures: int
    percentiles: Mapping[str, float | None]


def locust_percentile(histogram: Mapping[int, int], requests: int, fraction: float) -> int:
    """The response time ``fraction`` of ``requests`` finished within, read from a
    rounded histogram exactly as Locust reads it
    (``locust.stats.calculate_response_time_percentile``): walk from the slowest bucket
    down until no more than ``int(requests * fraction)`` requests are left."""
    within = int(requests * fraction)
    counted = 0
    for millis in sorted(histogram, reverse=True):
        counted += histogram[millis]
        if requests - counted <= within:
            return millis
    return 0


def locust_aggregate(entries: Iterable[Mapping[str, Any]]) -> LocustAggregate:
    """Locust's totals from its ``--json-file`` entries: the histograms merged, as the
    master merges its workers' and as its "Aggregated" row reads them.

    Raises KeyError, TypeError or ValueError for entries that are not Locust's.
    """
    histogram: dict[int, int] = {}
    requests = failures = 0
    for entry in entries:
        requests += int(entry["num_requests"])
        failures += int(entry["num_failures"])
        for millis, count in dict(entry["response_times"]).items():
            # JSON object keys are text; Locust's are rounded integers.
            key = int(float(millis))
            histogram[key] = histogram.get(key, 0) + int(count)
    timed = sum(histogram.values())
    percentiles: dict[str, float | None] = {
        name: (float(locust_percentile(histogram, timed, q)) if timed else None)
        for name, q in PERCENTILES}
    return LocustAggregate(requests, failures, percentiles)


def _differs(locust: float, exact: float, tolerance: float) -> bool:
    return abs(locust - exact) > tolerance * max(abs(exact), 1.0)


def aggregate_notes(locust: LocustAggregate, summary: TestSummary,
                    tolerance: float = TOLERANCE) -> tuple[str, ...]:
    """One line per figure where Locust's aggregate and the views differ (percentiles by
    more than ``tolerance`` of the view's value, counts at all), each naming both."""
    notes = []
    if locust.requests != summary.requests:
        notes.append(f"Locust counted {locust.requests} requests, BigQuery holds "
                     f"{summary.requests}: the report's figures are BigQuery's.")
    exact = {"p50": summary.p50_ms, "p90": summary.p90_ms, "p99": summary.p99_ms}
    for name, _ in PERCENTILES:
        theirs, ours = locust.percentiles.get(name), exact[name]
        if theirs is None or ours is None or not _differs(theirs, ours, tolerance):
            continue
        notes.append(f"Locust's aggregate {name} is {theirs:g} ms, BigQuery's {ours:.1f} ms "
                     "(Locust rounds response times to two significant digits and counts "
                     "failed requests; BigQuery's is exact over every successful request).")
    return tuple(notes)
