"""Job lifecycle events through ``ingest_metrics`` into BigQuery, and the views over them.

Events go in as the emitting functions send them: push deliveries with
``kind=job_event``, out of order, one message delivered twice, one event published
again in a later message with another time. Every figure ``job_lifecycle`` and
``job_usage_daily`` return is then checked against :func:`lifecycle` and :func:`daily`,
walks over the events sent (first copy of each event id, intervals split at UTC
midnights in Python), never against the emulator's own output. Times are relative to
today's UTC midnight, so open runs and slices count up to the real now, as the views'
``CURRENT_TIMESTAMP()`` does: those figures are checked between the truth just before
and just after the query.
"""

from __future__ import annotations

import base64
import json
import re
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared import bigquery
from shared.cli import main
from shared.config import MetricsConfig
from shared.metrics.job_event import JOB_EVENT_KIND, PER_SLICE, JobEventRecord, job_event_id
from shared.metrics.names import Names
from shared.metrics.run import KIND_ATTRIBUTE
from shared.metrics.schema import VIEWS, apply_schema
from shared.metrics.usage.sql import (
    JOB_EVENTS_UNIQUE,
    JOB_LIFECYCLE,
    JOB_USAGE_DAILY,
    USAGE_COLUMNS,
)
from shared.metrics.usage.views import BigQueryJobs, totals
from tests.bigquery_fixtures import PROJECT, count, fresh_dataset
from tests.functional.test_ingest_metrics import envelope

MIDNIGHT = datetime.combine(datetime.now(UTC).date(), time(), UTC)  # today, 00:00 UTC
Event = dict[str, Any]
EPS = 1e-6


def day(n: int, hour: int, minute: int = 0) -> datetime:
    """``hour``:``minute`` UTC, ``n`` days from today (negative: before)."""
    return MIDNIGHT + timedelta(days=n, hours=hour, minutes=minute)


@dataclass(frozen=True)
class Job:
    request_id: str
    team: str | None
    tpu_type: str | None
    slices: int | None = 1
    chips_per_slice: int | None = 16

    def ev(self, event: str, at: datetime, slice_index: int | None = None,
           **extra: Any) -> Event:
        record = {"event_id": job_event_id(self.request_id, event, slice_index),
                  "event": event, "at": at.isoformat(), "request_id": self.request_id,
                  "team": self.team, "tpu_type": self.tpu_type,
                  "jobset": None if event == "rejected" else f"{self.team}/{self.request_id}",
                  "slices": self.slices, "chips_per_slice": self.chips_per_slice,
                  "slice_index": slice_index, **extra}
        if event in PER_SLICE:
            record["pool"] = f"{self.request_id}-s{slice_index}"
        JobEventRecord.model_validate({k: v for k, v in record.items() if v is not None})
        return record


CROSS = Job("r-cross", "research", "v5litepod-16", slices=2)
OPEN = Job("r-open", "research", "v4-32")
QUEUED = Job("r-queued", "research", "v4-32")
CANCELLED = Job("r-cancelled", "serving", "v5litepod-16")
WITHDRAWN = Job("r-withdrawn", "serving", "v5litepod-16")
FAILED = Job("r-failed", "serving", "v5litepod-16")
STOCKOUT = Job("r-stockout", "serving", "v5litepod-16")
BAD_TYPE = Job("r-bad-type", "research", "v9-1", slices=None, chips_per_slice=None)
NO_TEAM = Job("r-no-team", None, None, slices=None, chips_per_slice=None)
UNSEEN_SLICES = Job("r-unseen-slices", "research", "v5litepod-8", chips_per_slice=8)

CROSS_RUNNING = CROSS.ev("running", day(-2, 22))
# r-cross: two slices of 16 chips; the run crosses midnight two days ago (22:00-02:00),
# slice 0 up 21:00-02:10, slice 1 21:30-02:20 (idle before and after the run).
# r-open: running since 23:30 yesterday, its slice up since 23:20. r-queued: waiting
# since midnight. r-cancelled: cancelled while running, slice up 30 min after it.
# r-withdrawn: cancelled before admission. r-failed: failed after an hour.
# r-stockout: a slice never became ready, cancelled. r-bad-type: submitted then
# rejected; r-no-team: rejected before its team could be read. r-unseen-slices: ran
# for an hour on a slice whose events were never recorded.
LATER: tuple[Event, ...] = (  # sent first: the ends before the starts
    CROSS.ev("finished", day(-1, 2), outcome="succeeded"),
    CROSS.ev("slice_deleted", day(-1, 2, 10), 0),
    CROSS.ev("slice_deleted", day(-1, 2, 20), 1),
    CANCELLED.ev("finished", day(-1, 11), outcome="cancelled", reason="cancelled by alice"),
    CANCELLED.ev("slice_deleted", day(-1, 11, 30), 0),
    FAILED.ev("finished", day(-1, 15), outcome="failed", reason="exit code 1"),
    FAILED.ev("slice_deleted", day(-1, 15, 5), 0),
)
EARLIER: tuple[Event, ...] = (
    CROSS.ev("submitted", day(-2, 20)),
    CROSS.ev("admitted", day(-2, 20, 30)),
    CROSS.ev("slice_requested", day(-2, 20, 30), 0),
    CROSS.ev("slice_requested", day(-2, 20, 30), 1),
    CROSS.ev("slice_ready", day(-2, 21), 0),
    CROSS.ev("slice_ready", day(-2, 21, 30), 1),
    CROSS_RUNNING,
    OPEN.ev("submitted", day(-1, 23)),
    OPEN.ev("admitted", day(-1, 23, 5)),
    OPEN.ev("slice_ready", day(-1, 23, 20), 0),
    OPEN.ev("running", day(-1, 23, 30)),
    QUEUED.ev("submitted", day(0, 0)),
    CANCELLED.ev("submitted", day(-1, 10)),
    CANCELLED.ev("admitted", day(-1, 10, 10)),
    CANCELLED.ev("slice_ready", day(-1, 10, 40), 0),
    CANCELLED.ev("running", day(-1, 10, 45)),
    WITHDRAWN.ev("submitted", day(-1, 12)),
    WITHDRAWN.ev("finished", day(-1, 12, 30), outcome="cancelled"),
    FAILED.ev("submitted", day(-1, 13)),
    FAILED.ev("admitted", day(-1, 13, 20)),
    FAILED.ev("slice_requested", day(-1, 13, 20), 0),
    FAILED.ev("slice_ready", day(-1, 13, 50), 0),
    FAILED.ev("running", day(-1, 14)),
    STOCKOUT.ev("submitted", day(-1, 16)),
    STOCKOUT.ev("admitted", day(-1, 16, 1)),
    STOCKOUT.ev("slice_requested", day(-1, 16, 1), 0),
    STOCKOUT.ev("finished", day(-1, 17, 59), outcome="cancelled"),
    STOCKOUT.ev("slice_deleted", day(-1, 18), 0),
    BAD_TYPE.ev("submitted", day(-1, 9)),
    BAD_TYPE.ev("rejected", day(-1, 9), reason="tpu.type: not a known TPU type",
                field="tpu.type", rule="known TPU type"),
    NO_TEAM.ev("rejected", day(-1, 9, 30), reason="team: Field required", field="team",
               rule="required"),
    UNSEEN_SLICES.ev("submitted", day(-1, 5)),
    UNSEEN_SLICES.ev("admitted", day(-1, 5)),
    UNSEEN_SLICES.ev("running", day(-1, 6)),
    UNSEEN_SLICES.ev("finished", day(-1, 7), outcome="succeeded"),
)
# The same transition observed again by a later run, with the time it was observed.
REPUBLISHED = dict(CROSS_RUNNING, at=day(-2, 22, 30).isoformat())
# In delivery order: later events first, one message twice, then the republished event.
DELIVERIES: tuple[tuple[str, tuple[Event, ...]], ...] = (
    ("jobs-1", LATER), ("jobs-2", EARLIER), ("jobs-2", EARLIER), ("jobs-3", (REPUBLISHED,)))


# ------------------------------------------------------------------ the truth, in Python
def first_copies() -> list[Event]:
    """Each event id once, the first delivered."""
    seen: dict[str, Event] = {}
    for _, events in DELIVERIES:
        for event in events:
            seen.setdefault(event["event_id"], event)
    return list(seen.values())


def at(event: Event) -> datetime:
    return datetime.fromisoformat(event["at"])


def split(start: datetime, end: datetime) -> Iterator[tuple[date, float]]:
    """The hours of [start, end) on each UTC day."""
    while start < end:
        cut = min(end, datetime.combine(start.date() + timedelta(days=1), time(), UTC))
        yield start.date(), (cut - start).total_seconds() / 3600
        start = cut


@dataclass
class Truth:
    """One job as its events tell it, at ``now``."""

    request_id: str
    team: str | None
    tpu_type: str | None
    chips: int | None
    times: dict[str, datetime]
    outcome: str | None
    reason: str | None
    runs: list[tuple[datetime, datetime, int]]  # (from, until, chips): used
    held: list[tuple[datetime, datetime, int]]  # ready slices

    def wait(self, start: str, end: str) -> float | None:
        if start in self.times and end in self.times:
            return (self.times[end] - self.times[start]).total_seconds()
        return None

    def hours(self, intervals: list[tuple[datetime, datetime, int]]) -> float:
        return sum((b - a).total_seconds() / 3600 * chips for a, b, chips in intervals)


def lifecycle(now: datetime) -> dict[str, Truth]:
    by_job: dict[str, list[Event]] = {}
    for event in first_copies():
        by_job.setdefault(event["request_id"], []).append(event)
    jobs = {}
    for request_id, events in by_job.items():
        describing = next((e for e in events if e["event"] == "submitted"), events[0])
        times = {e["event"]: at(e) for e in events if e["event"] not in PER_SLICE}
        chips = (describing["slices"] * describing["chips_per_slice"]
                 if describing["slices"] is not None else None)
        runs = ([(times["running"], times.get("finished", now), chips)]
                if "running" in times else [])
        held = []
        for e in events:
            if e["event"] == "slice_ready":
                deleted = [at(d) for d in events if d["event"] == "slice_deleted"
                           and d["slice_index"] == e["slice_index"]]
                held.append((at(e), deleted[0] if deleted else now, e["chips_per_slice"]))
        finished = [e for e in events if e["event"] in ("finished", "rejected")]
        jobs[request_id] = Truth(
            request_id, describing["team"], describing["tpu_type"], chips, times,
            next((e["outcome"] for e in finished if e["event"] == "finished"), None),
            finished[0].get("reason") if finished else None, runs, held)
    return jobs


Key = tuple[date, str | None, str | None]


def daily(now: datetime) -> dict[Key, dict[str, Any]]:
    """job_usage_daily's figures per (day, team, TPU type), from the events."""
    result: dict[Key, dict[str, Any]] = {}

    def row(when: date, job: Truth) -> dict[str, Any]:
        return result.setdefault((when, job.team, job.tpu_type), {
            "jobs_submitted": 0, "jobs_rejected": 0, "jobs_started": 0, "jobs_finished": 0,
            "jobs_failed": 0, "waits": [], "provisionings": [], "runs": [],
            "chip_hours_used": 0.0, "idle_chip_hours": 0.0})

    for job in lifecycle(now).values():
        for event, column in (("submitted", "jobs_submitted"), ("rejected", "jobs_rejected"),
                              ("running", "jobs_started"), ("finished", "jobs_finished")):
            if event in job.times:
                row(job.times[event].date(), job)[column] += 1
        if job.outcome == "failed":
            row(job.times["finished"].date(), job)["jobs_failed"] += 1
        for start, end, column in (("submitted", "admitted", "waits"),
                                   ("admitted", "running", "provisionings")):
            if (seconds := job.wait(start, end)) is not None:
                row(job.times[end].date(), job)[column].append(seconds)
        if "finished" in job.times and "running" in job.times:
            row(job.times["finished"].date(), job)["runs"].append(job.wait("running", "finished"))
        used: dict[date, float] = {}
        held: dict[date, float] = {}
        for intervals, sums in ((job.runs, used), (job.held, held)):
            for start, end, chips in intervals:
                for when, hours in split(start, end):
                    sums[when] = sums.get(when, 0.0) + hours * chips
        for when in used.keys() | held.keys():
            figures = row(when, job)
            figures["chip_hours_used"] += used.get(when, 0.0)
            figures["idle_chip_hours"] += max(held.get(when, 0.0) - used.get(when, 0.0), 0.0)
    return result


def percentile_cont(values: Sequence[float], fraction: float) -> float | None:
    """Linear interpolation between the closest ranks, as PERCENTILE_CONT documents."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(fraction * 100) - 1]


def mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


# ------------------------------------------------------------------ the store
def push(client: Any, events: Sequence[Event], message_id: str) -> None:
    event = envelope(message_id=message_id)
    event["message"]["data"] = base64.b64encode(json.dumps(list(events)).encode()).decode()
    event["message"]["attributes"] = {KIND_ATTRIBUTE: JOB_EVENT_KIND}
    response = client.post("/", json=event)
    assert response.status_code == 200, response.get_data(as_text=True)


@dataclass
class Store:
    names: Names
    config: MetricsConfig
    config_path: Path
    endpoint: str


@pytest.fixture(scope="module")
def store(bigquery_endpoint: str, ingest_client: Any,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """One dataset holding the :data:`DELIVERIES`, sent through ingest_metrics."""
    config = fresh_dataset()
    path = tmp_path_factory.mktemp("jobs") / "config.yaml"
    path.write_text(yaml.safe_dump({"metrics": config.model_dump()}))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("BIGQUERY_EMULATOR_HOST", bigquery_endpoint)
        env.setenv("ACCELOPS_PROJECT", PROJECT)
        env.setenv("ACCELOPS_CONFIG", str(path))
        apply_schema(PROJECT, config)
        for message_id, events in DELIVERIES:
            push(ingest_client, events, message_id)
        yield Store(Names.of(PROJECT, config), config, path, bigquery_endpoint)


def query(store: Store, view: str) -> tuple[list[dict[str, Any]], datetime, datetime]:
    """The view's rows, and the instants just before and after the query."""
    before = datetime.now(UTC)
    rows = bigquery.query(PROJECT, f"SELECT * FROM {store.names.sql(view)}")
    return rows, before, datetime.now(UTC)


def between(value: float | None, low: float | None, high: float | None, what: Any) -> None:
    if low is None or high is None:
        assert value is None, what
        assert low is None, what
        assert high is None, what
        return
    assert value is not None, what
    assert min(low, high) - EPS <= value <= max(low, high) + EPS, (what, value, low, high)


# ------------------------------------------------------------------ job_lifecycle
def test_every_lifecycle_figure_matches_python_over_the_raw_events(store):
    rows, before, after = query(store, JOB_LIFECYCLE)
    low, high = lifecycle(before), lifecycle(after)

    assert sorted(r["request_id"] for r in rows) == sorted(low)
    for row in rows:
        job, late = low[row["request_id"]], high[row["request_id"]]
        assert (row["team"], row["tpu_type"], row["chips"]) == (job.team, job.tpu_type,
                                                                job.chips)
        for event in ("submitted", "rejected", "admitted", "running", "finished"):
            assert row[f"{event}_at"] == job.times.get(event), (job.request_id, event)
        assert (row["outcome"], row["reason"]) == (job.outcome, job.reason)
        assert row["queue_wait_seconds"] == job.wait("submitted", "admitted")
        assert row["provisioning_seconds"] == job.wait("admitted", "running")
        run = [(b - a).total_seconds() for a, b, _ in job.runs]
        late_run = [(b - a).total_seconds() for a, b, _ in late.runs]
        between(row["run_seconds"], run[0] if run else None, late_run[0] if late_run else None,
                job.request_id)
        between(row["chip_hours_used"], job.hours(job.runs), late.hours(late.runs),
                job.request_id)
        between(row["slice_chip_hours"], job.hours(job.held), late.hours(late.held),
                job.request_id)
        between(row["idle_chip_hours"], max(job.hours(job.held) - job.hours(job.runs), 0),
                max(late.hours(late.held) - late.hours(late.runs), 0), job.request_id)


def test_a_job_is_described_by_its_durations_in_seconds_and_chip_hours(store):
    rows, _, _ = query(store, JOB_LIFECYCLE)
    [cross] = [r for r in rows if r["request_id"] == "r-cross"]

    assert (cross["queue_wait_seconds"], cross["provisioning_seconds"],
            cross["run_seconds"]) == (1800.0, 5400.0, 14400.0)
    assert cross["chip_hours_used"] == pytest.approx(128.0)  # 32 chips for 4 h
    # 21:00-02:10 and 21:30-02:20 of 16 chips: 160 held, 32 idle.
    assert cross["slice_chip_hours"] == pytest.approx(160.0)
    assert cross["idle_chip_hours"] == pytest.approx(32.0)
    assert (cross["outcome"], cross["still_running"], cross["slice_still_up"]) == (
        "succeeded", False, False)


def test_a_redelivered_message_and_a_republished_event_count_once_from_the_first(store):
    rows, _, _ = query(store, JOB_LIFECYCLE)
    [cross] = [r for r in rows if r["request_id"] == "r-cross"]

    assert cross["running_at"] == day(-2, 22)  # not 22:30, the later observation
    assert count(store.config, store.config.job_events_table, "request_id = 'r-cross'") == 18
    assert count(store.config, JOB_EVENTS_UNIQUE, "request_id = 'r-cross'") == 10


def test_a_running_job_counts_up_to_now_and_says_so(store):
    rows, before, after = query(store, JOB_LIFECYCLE)
    [running] = [r for r in rows if r["request_id"] == "r-open"]

    assert running["still_running"] is True
    assert running["slice_still_up"] is True
    assert running["finished_at"] is None
    hours = ((before - day(-1, 23, 30)).total_seconds() / 3600,
             (after - day(-1, 23, 30)).total_seconds() / 3600)
    between(running["chip_hours_used"], hours[0] * 16, hours[1] * 16, "r-open")
    assert running["idle_chip_hours"] == pytest.approx(16 * 10 / 60)  # 23:20-23:30


def test_a_cancelled_job_finishes_without_failing_and_idles_only_on_ready_slices(store):
    rows, _, _ = query(store, JOB_LIFECYCLE)
    jobs = {r["request_id"]: r for r in rows}

    assert jobs["r-cancelled"]["outcome"] == "cancelled"
    assert jobs["r-cancelled"]["idle_chip_hours"] == pytest.approx(16 * 35 / 60)
    # Cancelled while queued: no wait measured, no chip-hours.
    assert jobs["r-withdrawn"]["queue_wait_seconds"] is None
    assert jobs["r-withdrawn"]["chip_hours_used"] == jobs["r-withdrawn"]["slice_chip_hours"] == 0
    # A slice requested and deleted without ever being ready held nothing.
    assert jobs["r-stockout"]["slice_chip_hours"] == 0
    assert jobs["r-stockout"]["provisioning_seconds"] is None


def test_a_rejected_request_keeps_its_reason_and_its_team_when_it_had_one(store):
    rows, _, _ = query(store, JOB_LIFECYCLE)
    jobs = {r["request_id"]: r for r in rows}

    assert jobs["r-bad-type"]["rejected_at"] == day(-1, 9)
    assert jobs["r-bad-type"]["reason"] == "tpu.type: not a known TPU type"
    assert (jobs["r-bad-type"]["team"], jobs["r-bad-type"]["chips"]) == ("research", None)
    assert jobs["r-no-team"]["team"] is None
    assert jobs["r-no-team"]["chip_hours_used"] == 0


# ------------------------------------------------------------------ job_usage_daily
def test_every_daily_figure_matches_python_over_the_raw_events(store):
    rows, before, after = query(store, JOB_USAGE_DAILY)
    low, high = daily(before), daily(after)

    assert {(r["day"], r["team"], r["tpu_type"]) for r in rows} == set(low)
    for row in rows:
        key = (row["day"], row["team"], row["tpu_type"])
        want, late = low[key], high[key]
        for column in ("jobs_submitted", "jobs_rejected", "jobs_started", "jobs_finished",
                       "jobs_failed"):
            assert row[column] == want[column], (key, column)
        for column, values in (("queue_wait_seconds", "waits"),
                               ("provisioning_seconds", "provisionings"),
                               ("run_seconds", "runs")):
            between(row[f"{column}_avg"], mean(want[values]), mean(late[values]), key)
        assert (row["queue_waits"], row["provisionings"], row["runs"]) == (
            len(want["waits"]), len(want["provisionings"]), len(want["runs"])), key
        for column, values in (("queue_wait_seconds", "waits"),
                               ("provisioning_seconds", "provisionings")):
            for q in (50, 90):
                assert row[f"{column}_p{q}"] == pytest.approx(
                    percentile_cont(sorted(want[values]), q / 100)), (key, column, q)
        between(row["chip_hours_used"], want["chip_hours_used"], late["chip_hours_used"], key)
        between(row["idle_chip_hours"], want["idle_chip_hours"], late["idle_chip_hours"], key)


def test_a_run_across_utc_midnight_is_split_between_the_two_days(store):
    rows, _, _ = query(store, JOB_USAGE_DAILY)
    research = {r["day"]: r for r in rows
                if (r["team"], r["tpu_type"]) == ("research", "v5litepod-16")}

    first, second = research[day(-2, 0).date()], research[day(-1, 0).date()]
    assert first["chip_hours_used"] == pytest.approx(64.0)  # 22:00-24:00, 32 chips
    assert first["idle_chip_hours"] == pytest.approx(24.0)  # 48 + 40 held, 64 used
    assert second["chip_hours_used"] == pytest.approx(64.0)  # 00:00-02:00
    assert second["idle_chip_hours"] == pytest.approx(8.0)  # 2h10 + 2h20 of 16 chips, less 64
    # Each job on the day of each transition: submitted before midnight, finished after.
    assert (first["jobs_submitted"], first["jobs_started"], first["jobs_finished"]) == (1, 1, 0)
    assert (second["jobs_submitted"], second["jobs_finished"]) == (0, 1)
    assert second["run_seconds_avg"] == 14400.0


def test_failed_jobs_are_counted_but_cancelled_ones_are_not(store):
    rows, _, _ = query(store, JOB_USAGE_DAILY)
    [serving] = [r for r in rows if r["team"] == "serving"]

    assert (serving["jobs_submitted"], serving["jobs_started"], serving["jobs_finished"],
            serving["jobs_failed"]) == (4, 2, 4, 1)
    # Waits of 10, 20 and 1 minutes; r-withdrawn was never admitted.
    assert serving["queue_wait_seconds_avg"] == pytest.approx((600 + 1200 + 60) / 3)
    assert serving["queue_wait_seconds_p50"] == 600.0


def test_a_day_with_a_run_or_slice_still_up_is_marked_and_counts_to_now(store):
    rows, before, after = query(store, JOB_USAGE_DAILY)
    v4 = {r["day"]: r for r in rows if r["tpu_type"] == "v4-32"}

    today, yesterday = v4[day(0, 0).date()], v4[day(-1, 0).date()]
    assert today["still_open"] is yesterday["still_open"] is True
    assert yesterday["chip_hours_used"] == pytest.approx(16 * 0.5)  # 23:30-24:00
    hours = ((before - MIDNIGHT).total_seconds() / 3600, (after - MIDNIGHT).total_seconds() / 3600)
    between(today["chip_hours_used"], hours[0] * 16, hours[1] * 16, "today")
    assert today["jobs_submitted"] == 1  # r-queued, still waiting
    assert not [r for r in rows if r["team"] == "serving" and r["still_open"]]


def test_a_run_whose_slices_were_not_seen_idles_nothing_rather_than_less(store):
    rows, _, _ = query(store, JOB_USAGE_DAILY)
    [unseen] = [r for r in rows if r["tpu_type"] == "v5litepod-8"]

    assert (unseen["chip_hours_used"], unseen["idle_chip_hours"]) == (8.0, 0.0)


def test_rejections_are_counted_on_their_day_even_without_a_team(store):
    rows, _, _ = query(store, JOB_USAGE_DAILY)
    rejected = {(r["team"], r["tpu_type"]): r["jobs_rejected"] for r in rows
                if r["jobs_rejected"]}

    assert rejected == {("research", "v9-1"): 1, (None, None): 1}


def test_job_usage_daily_keeps_the_columns_budgets_read_in_order_and_type(store):
    # Read from the query's result: the client types each value by the result schema.
    # (bqemulator answers a view's tables.get without a schema, BigQuery with one.)
    rows, _, _ = query(store, JOB_USAGE_DAILY)
    kinds = {"day": date, "team": str, "tpu_type": str}
    kinds.update({c: int for c in USAGE_COLUMNS[3:8]})
    kinds.update({c: float for c in USAGE_COLUMNS[8:]})

    assert tuple(rows[0])[:len(USAGE_COLUMNS)] == USAGE_COLUMNS
    for row in rows:
        for column, kind in kinds.items():
            assert row[column] is None or type(row[column]) is kind, (column, row[column])
    assert all(row[c] is not None for row in rows for c in USAGE_COLUMNS[8:10]
               if row["team"] == "serving")


# ------------------------------------------------------------------ reader and report
def test_the_reader_returns_a_teams_window_with_totals_that_add_up(store):
    source = BigQueryJobs(store.names)
    # Reaching back into yesterday: yesterday and today, whole days.
    rows = source.job_usage(datetime.now(UTC) - day(-1, 12), team="serving")

    assert {(r.day, r.team) for r in rows} == {(day(-1, 0).date(), "serving")}
    per_group, total = totals(rows)
    assert [(t.team, t.tpu_type) for t in per_group] == [("serving", "v5litepod-16")]
    assert total.jobs_failed == 1
    assert total.queue_wait_seconds_avg == pytest.approx((600 + 1200 + 60) / 3)
    assert source.queries == 1


def test_the_slowest_waits_come_first_and_a_job_still_queued_counts_its_wait_so_far(store):
    before = datetime.now(UTC)
    waits = BigQueryJobs(store.names).slowest_waits(timedelta(days=3), limit=3)
    after = datetime.now(UTC)

    by_id = {w.request_id: w for w in waits}
    assert [w.wait_seconds for w in waits] == sorted((w.wait_seconds for w in waits),
                                                     reverse=True)
    assert "r-cross" in by_id  # 30 min
    if "r-queued" in by_id:  # waiting since midnight: in the top 3 after 20 minutes
        assert by_id["r-queued"].still_queued
        between(by_id["r-queued"].wait_seconds, (before - MIDNIGHT).total_seconds(),
                (after - MIDNIGHT).total_seconds(), "r-queued")
    everything = BigQueryJobs(store.names).slowest_waits(timedelta(days=3))
    ids = {w.request_id for w in everything}
    # Rejected and cancelled-before-admission requests never waited in the queue.
    assert ids == {"r-cross", "r-open", "r-queued", "r-cancelled", "r-failed", "r-stockout",
                   "r-unseen-slices"}


def cells_of(line: str) -> list[str]:
    return re.split(r" {2,}", line.strip())


def test_report_jobs_prints_every_day_team_and_type_with_the_total(store, capsys,
                                                                   monkeypatch):
    monkeypatch.setenv("BIGQUERY_EMULATOR_HOST", store.endpoint)
    monkeypatch.setenv("ACCELOPS_PROJECT", PROJECT)
    monkeypatch.setenv("ACCELOPS_CONFIG", str(store.config_path))

    assert main(["report", "jobs", "--since", "7d"]) == 0

    out = capsys.readouterr().out
    now = datetime.now(UTC)
    expected = daily(now)
    days_table = out.split("Per day:\n")[1].split("\n\n")[0].splitlines()[1:]
    printed = {}
    for line in days_table:
        cells = cells_of(line)
        key = (date.fromisoformat(cells[0].rstrip(" *")), None if cells[1] == "—" else cells[1],
               None if cells[2] == "—" else cells[2])
        printed[key] = cells
    assert set(printed) == set(expected)
    for key, cells in printed.items():
        assert [int(c) for c in cells[3:8]] == [expected[key][c] for c in (
            "jobs_submitted", "jobs_rejected", "jobs_started", "jobs_finished", "jobs_failed")]
        if key[2] != "v4-32":  # still running: grows while the test runs
            assert float(cells[-2]) == round(expected[key]["chip_hours_used"], 1), key
            assert float(cells[-1]) == round(expected[key]["idle_chip_hours"], 1), key
    [total] = [cells_of(line) for line in out.splitlines() if line.startswith("Total")]
    assert int(total[1]) == sum(e["jobs_submitted"] for e in expected.values())
    assert "Slowest queue waits" in out
    assert "still queued" in out
    assert "a run or a slice still up: counted up to now" in out


def test_report_jobs_of_one_team_shows_only_that_team(store, capsys, monkeypatch):
    monkeypatch.setenv("BIGQUERY_EMULATOR_HOST", store.endpoint)
    monkeypatch.setenv("ACCELOPS_PROJECT", PROJECT)
    monkeypatch.setenv("ACCELOPS_CONFIG", str(store.config_path))

    assert main(["report", "jobs", "--since", "7d", "--team", "serving"]) == 0

    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith("team serving")
    assert "research" not in out
    assert "r-failed" in out
    assert "r-cross" not in out


def test_report_jobs_refuses_a_window_it_cannot_read_and_load_test_options(capsys):
    assert main(["report", "jobs", "--since", "a week"]) == 1
    assert "'a week' is not a duration like 7d, 36h or 2w" in capsys.readouterr().err

    assert main(["report", "jobs", "--compare", "lt-2"]) == 1
    assert "--compare is for load tests, not `accelops report jobs`" in capsys.readouterr().err


def test_team_is_only_for_the_jobs_report(capsys):
    assert main(["report", "savings", "--team", "research"]) == 1
    assert "--team is for `accelops report jobs`" in capsys.readouterr().err

    assert main(["report", "lt-1", "--team", "research"]) == 1
    assert "--team is for `accelops report jobs`, not a load test" in capsys.readouterr().err


# ------------------------------------------------------------------ BigQuery, not the emulator
JOB_VIEWS = (JOB_EVENTS_UNIQUE, JOB_LIFECYCLE, JOB_USAGE_DAILY)


def job_view_sql() -> dict[str, str]:
    names = Names(PROJECT, "d", "requests", "rejections", "test_runs", "pool_actions",
                  "job_events")
    return {view.name: view.sql(names) for view in VIEWS if view.name in JOB_VIEWS}


def test_no_job_view_measures_a_duration_in_a_unit_the_emulator_counts_differently():
    # TIMESTAMP_DIFF in HOUR or SECOND counts whole units in BigQuery and unit boundaries
    # in the emulator (test_pool_savings names that difference); microseconds agree.
    measured = 0
    for name, sql in job_view_sql().items():
        for start in (m.end() for m in re.finditer(r"TIMESTAMP_DIFF\(", sql)):
            depth, end = 1, start
            while depth:
                depth += {"(": 1, ")": -1}.get(sql[end], 0)
                end += 1
            assert sql[start:end - 1].rsplit(",", 1)[-1].strip() == "MICROSECOND", name
            measured += 1
    assert set(job_view_sql()) == set(JOB_VIEWS)
    assert measured >= 5  # queue wait, provisioning, run, slices held; per-day parts


def test_no_job_view_indexes_approx_quantiles_or_leaves_at_unquoted():
    for name, sql in job_view_sql().items():
        assert "APPROX_QUANTILES" not in sql, name
        assert not re.search(r"(?<![.`\w])at(?![`\w])", sql), name
