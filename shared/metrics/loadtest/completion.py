"""The end of a load test: waiting until BigQuery holds every request Locust counted.

Locust's own request count (the master's, which merges its workers' reports) is the
number of rows the views must end up with, whether Locust ran on this machine or on
the cluster: a lost or duplicated row shows up as a failure rather than a slightly
wrong chart.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime

from shared.errors import AccelopsError, NotFoundError
from shared.metrics.loadtest.model import MetricsSource, TestSummary

__all__ = ["ROWS_TIMEOUT", "LoadTestError", "new_test_id", "wait_for_rows"]

# A bound, not an estimate: the wait ends as soon as every row is counted.
ROWS_TIMEOUT = 180.0


class LoadTestError(AccelopsError):
    """A load test that did not run, or whose records did not all arrive."""


def new_test_id(now: datetime | None = None) -> str:
    """A sortable, unique test id such as ``lt-20261121-140512-9f3a``."""
    at = (now or datetime.now(UTC)).astimezone(UTC)
    return f"lt-{at:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def wait_for_rows(source: MetricsSource, test_id: str, expected: int,
                  timeout: float = ROWS_TIMEOUT,
                  progress: Callable[[str], None] = lambda line: None) -> TestSummary:
    """Poll the summary view until it counts ``expected`` requests for the test.

    Raises LoadTestError when they do not all arrive in time, or more arrive (which
    would mean duplicates got past the views).
    """
    deadline = time.monotonic() + timeout
    seen = -1
    while True:
        try:
            summary = source.summary(test_id)
            count = summary.requests
        except NotFoundError:
            summary, count = None, 0
        if count != seen:
            progress(f"  rows in BigQuery: {count}/{expected}")
            seen = count
        if summary is not None and count == expected:
            return summary
        if count > expected:
            raise LoadTestError(f"{count} rows for {expected} requests: duplicates in the views")
        if time.monotonic() > deadline:
            raise LoadTestError(f"only {count} of {expected} rows reached BigQuery within "
                                f"{timeout:.0f}s (see the ingest_metrics log)")
        time.sleep(0.5)
