"""Reading how jobs fared: typed rows of ``job_usage_daily`` and the slowest queue waits.

A window covers whole UTC days (:mod:`shared.metrics.window`), optionally one team's.
Two parameterised queries per read: the days of ``job_usage_daily`` and the longest
queue waits of ``job_lifecycle`` among the jobs submitted in the window — those
admitted, and those still waiting, whose wait so far counts (a job waiting for hours
is what a reader of this report is looking for). The sums per team and TPU type are
done here (:func:`totals`) from the same rows the daily table shows, so they always
add up; averages over several days are weighted by how many waits, provisionings and
runs each day's average is over, so they are exact.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Protocol

from shared.metrics.reader import DatasetReader
from shared.metrics.usage.sql import JOB_LIFECYCLE, JOB_USAGE_DAILY
from shared.metrics.window import first_day

__all__ = ["SLOWEST_WAITS", "BigQueryJobs", "JobUsage", "JobsSource", "QueueWait", "UsageTotal",
           "totals"]

#: How many of the slowest queue waits a report lists.
SLOWEST_WAITS = 10


@dataclass(frozen=True)
class JobUsage:
    """One row of ``job_usage_daily``: one UTC day of one team's jobs of one TPU type."""

    day: date
    team: str | None
    tpu_type: str | None
    jobs_submitted: int = 0
    jobs_rejected: int = 0
    jobs_started: int = 0
    jobs_finished: int = 0
    jobs_failed: int = 0
    queue_wait_seconds_avg: float | None = None
    provisioning_seconds_avg: float | None = None
    run_seconds_avg: float | None = None
    chip_hours_used: float = 0.0
    idle_chip_hours: float = 0.0
    # How many durations each average is over; still_open: a run or slice counted on
    # this day has not ended, so the day's chip-hours grow until it does.
    queue_waits: int = 0
    provisionings: int = 0
    runs: int = 0
    still_open: bool = False


@dataclass(frozen=True)
class UsageTotal:
    """A team's and TPU type's sums over a window (both None: everyone's)."""

    team: str | None
    tpu_type: str | None
    jobs_submitted: int
    jobs_rejected: int
    jobs_started: int
    jobs_finished: int
    jobs_failed: int
    queue_wait_seconds_avg: float | None
    provisioning_seconds_avg: float | None
    run_seconds_avg: float | None
    chip_hours_used: float
    idle_chip_hours: float


@dataclass(frozen=True)
class QueueWait:
    """A job's wait for admission; ``admitted_at`` None: still waiting, counted to now."""

    request_id: str
    team: str | None
    tpu_type: str | None
    jobset: str | None
    submitted_at: datetime
    admitted_at: datetime | None
    wait_seconds: float

    @property
    def still_queued(self) -> bool:
        return self.admitted_at is None


class JobsSource(Protocol):
    """Where the job figures are read from; raises ``TransientError`` when unreachable."""

    def job_usage(self, since: timedelta, team: str | None = None) -> list[JobUsage]:
        """The days of the window (see :func:`shared.metrics.window.first_day`), oldest
        first; only ``team``'s when given."""
        ...

    def slowest_waits(self, since: timedelta, team: str | None = None,
                      limit: int = SLOWEST_WAITS) -> list[QueueWait]:
        """The ``limit`` longest queue waits of jobs submitted in the window, longest
        first."""
        ...


def _average(rows: list[JobUsage], value: str, weight: str) -> float | None:
    weighted = [(getattr(row, value), getattr(row, weight)) for row in rows
                if getattr(row, value) is not None and getattr(row, weight)]
    count = sum(n for _, n in weighted)
    return sum(v * n for v, n in weighted) / count if count else None


def _total(team: str | None, tpu_type: str | None, rows: list[JobUsage]) -> UsageTotal:
    return UsageTotal(
        team, tpu_type,
        jobs_submitted=sum(r.jobs_submitted for r in rows),
        jobs_rejected=sum(r.jobs_rejected for r in rows),
        jobs_started=sum(r.jobs_started for r in rows),
        jobs_finished=sum(r.jobs_finished for r in rows),
        jobs_failed=sum(r.jobs_failed for r in rows),
        queue_wait_seconds_avg=_average(rows, "queue_wait_seconds_avg", "queue_waits"),
        provisioning_seconds_avg=_average(rows, "provisioning_seconds_avg", "provisionings"),
        run_seconds_avg=_average(rows, "run_seconds_avg", "runs"),
        chip_hours_used=sum(r.chip_hours_used for r in rows),
        idle_chip_hours=sum(r.idle_chip_hours for r in rows))


def totals(rows: Iterable[JobUsage]) -> tuple[list[UsageTotal], UsageTotal]:
    """Each team's and TPU type's sums (most chip-hours used first) and the grand total."""
    rows = list(rows)
    groups: dict[tuple[str | None, str | None], list[JobUsage]] = {}
    for row in rows:
        groups.setdefault((row.team, row.tpu_type), []).append(row)
    per_group = [_total(team, tpu_type, members)
                 for (team, tpu_type), members in groups.items()]
    per_group.sort(key=lambda t: (-t.chip_hours_used, t.team or "", t.tpu_type or ""))
    return per_group, _total(None, None, rows)


_USAGE_ORDER = "ORDER BY day, team, tpu_type"


class BigQueryJobs(DatasetReader):
    """``job_usage_daily`` and ``job_lifecycle`` of one dataset, read with parameterised
    queries; ``queries`` counts them."""

    def job_usage(self, since: timedelta, team: str | None = None) -> list[JobUsage]:
        params: dict[str, Any] = {"first_day": first_day(since).isoformat()}
        where = "day >= CAST(@first_day AS DATE)"
        if team is not None:
            params["team"] = team
            where += " AND team = @team"
        rows = self._rows(f"SELECT * FROM {self.names.sql(JOB_USAGE_DAILY)} "
                           f"WHERE {where} {_USAGE_ORDER}", params)
        return [_usage(row) for row in rows]

    def slowest_waits(self, since: timedelta, team: str | None = None,
                      limit: int = SLOWEST_WAITS) -> list[QueueWait]:
        # A job still waiting has neither an admission nor an end (rejected, or
        # cancelled while queued); its wait so far is measured as the views measure.
        params: dict[str, Any] = {"first_day": first_day(since).isoformat(), "limit": limit}
        where = "submitted_at >= TIMESTAMP(CAST(@first_day AS DATE))"
        if team is not None:
            params["team"] = team
            where += " AND team = @team"
        rows = self._rows(f"""SELECT * FROM (
  SELECT
    request_id, team, tpu_type, jobset, submitted_at, admitted_at,
    IFNULL(queue_wait_seconds,
           TIMESTAMP_DIFF(CURRENT_TIMESTAMP(), submitted_at, MICROSECOND) / 1000000)
      AS wait_seconds
  FROM {self.names.sql(JOB_LIFECYCLE)}
  WHERE {where}
    AND (admitted_at IS NOT NULL OR (rejected_at IS NULL AND finished_at IS NULL))
)
ORDER BY wait_seconds DESC, request_id
LIMIT @limit""", params)
        return [QueueWait(row["request_id"], row["team"], row["tpu_type"], row["jobset"],
                          row["submitted_at"], row["admitted_at"],
                          float(row["wait_seconds"])) for row in rows]


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _usage(row: dict[str, Any]) -> JobUsage:
    return JobUsage(
        day=row["day"], team=row["team"], tpu_type=row["tpu_type"],
        jobs_submitted=int(row["jobs_submitted"] or 0),
        jobs_rejected=int(row["jobs_rejected"] or 0),
        jobs_started=int(row["jobs_started"] or 0),
        jobs_finished=int(row["jobs_finished"] or 0),
        jobs_failed=int(row["jobs_failed"] or 0),
        queue_wait_seconds_avg=_float(row["queue_wait_seconds_avg"]),
        provisioning_seconds_avg=_float(row["provisioning_seconds_avg"]),
        run_seconds_avg=_float(row["run_seconds_avg"]),
        chip_hours_used=float(row["chip_hours_used"] or 0.0),
        idle_chip_hours=float(row["idle_chip_hours"] or 0.0),
        queue_waits=int(row["queue_waits"] or 0),
        provisionings=int(row["provisionings"] or 0),
        runs=int(row["runs"] or 0),
        still_open=bool(row["still_open"]))
