"""The sandbox's Cloud Scheduler fires cron jobs on the simulated clock: tests jump
the clock with ``advance`` and see exactly the firings it passed over (bounded,
real seconds at most)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest

from sandbox.cloud_scheduler.service import CloudScheduler, ScheduledJob
from sandbox.cluster.__main__ import parse_args
from sandbox.common.clock import SimClock
from sandbox.topology import SCHEDULES
from shared.deployment import system

START = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)  # a Saturday, before Berlin's spring-forward


class Recorder:
    """A publish callback recording (topic, simulated time) of each firing."""

    def __init__(self, clock: SimClock, failing: frozenset[str] = frozenset()) -> None:
        self.clock, self.failing = clock, failing
        self.calls: list[tuple[str, datetime]] = []
        self.lock = threading.Lock()

    def __call__(self, job: ScheduledJob) -> None:
        with self.lock:
            self.calls.append((job.topic, self.clock.now()))
        if job.topic in self.failing:
            raise RuntimeError("publish failed")

    def of(self, topic: str) -> list[datetime]:
        with self.lock:
            return [when for name, when in self.calls if name == topic]


@pytest.fixture
def clock() -> SimClock:
    return SimClock(speed=1.0, start=START)


@pytest.fixture
def run(clock: SimClock) -> Iterator[Callable[..., Recorder]]:
    schedulers: list[CloudScheduler] = []

    def start(*jobs: ScheduledJob, failing: frozenset[str] = frozenset()) -> Recorder:
        recorder = Recorder(clock, failing)
        schedulers.append(CloudScheduler(clock, list(jobs), recorder).start())
        return recorder

    yield start
    for scheduler in schedulers:
        scheduler.stop()


def wait_until(check: Callable[[], bool], seconds: float = 5.0) -> None:
    give_up = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < give_up, "timed out"
        time.sleep(0.01)


def settle() -> None:
    """Long enough for the scheduler thread to act on a jump (it polls every 0.2 s)."""
    time.sleep(0.4)


def advance_to(clock: SimClock, moment: datetime) -> None:
    clock.advance(moment.timestamp() - clock.time())


def test_a_daily_berlin_job_fires_at_its_local_times_as_the_clock_is_advanced(clock, run):
    recorder = run(ScheduledJob("pools", "30 2 * * *", "Europe/Berlin"))
    advance_to(clock, datetime(2026, 3, 29, 0, 59, 50, tzinfo=UTC))  # 01:59:50 CET
    settle()
    assert recorder.of("pools") == [], "02:30 does not exist that night: nothing yet"

    clock.advance(15)  # past 03:00 CEST, the first moment after the gap
    wait_until(lambda: len(recorder.of("pools")) == 1)
    [fired] = recorder.of("pools")
    assert datetime(2026, 3, 29, 1, 0, tzinfo=UTC) <= fired \
        < datetime(2026, 3, 29, 1, 0, 10, tzinfo=UTC)

    advance_to(clock, datetime(2026, 3, 30, 0, 30, 1, tzinfo=UTC))  # 02:30:01 CEST
    wait_until(lambda: len(recorder.of("pools")) == 2)
    settle()
    assert len(recorder.of("pools")) == 2


def test_a_clock_jump_over_many_periods_fires_once_like_a_scheduler_that_was_down(
        clock, run):
    recorder = run(ScheduledJob("ticks", "* * * * *"))
    clock.advance(10 * 60 + 1)
    wait_until(lambda: len(recorder.of("ticks")) == 1)
    settle()
    assert len(recorder.of("ticks")) == 1, "ten missed minutes are one tick, not a burst"

    clock.advance(60)  # the next minute boundary after the jump
    wait_until(lambda: len(recorder.of("ticks")) == 2)


def test_jobs_fire_on_the_simulated_clock_not_the_real_one(clock, run):
    recorder = run(ScheduledJob("ticks", "* * * * *"))
    settle()
    assert recorder.of("ticks") == [], "a real fraction of a second is no simulated minute"
    clock.advance(61)
    wait_until(lambda: len(recorder.of("ticks")) == 1)


def test_a_failing_publish_stops_neither_the_other_jobs_nor_its_own_next_ticks(
        clock, run, capsys):
    recorder = run(ScheduledJob("broken", "* * * * *"), ScheduledJob("fine", "* * * * *"),
                   failing=frozenset({"broken"}))
    for minute in (1, 2):
        clock.advance(60)
        wait_until(lambda minute=minute: len(recorder.of("fine")) == minute
                   and len(recorder.of("broken")) == minute)
    assert "scheduler: broken at '* * * * *' Etc/UTC failed: publish failed" \
        in capsys.readouterr().out


def test_stop_returns_promptly_while_the_next_firing_is_a_day_away(clock):
    scheduler = CloudScheduler(clock, [ScheduledJob("daily", "0 6 * * *", "America/New_York")],
                          lambda job: None).start()
    time.sleep(0.05)
    started = time.monotonic()
    scheduler.stop()
    assert time.monotonic() - started < 1.0


# ----------------------------------------------------------------------------- the flag


def test_a_schedule_flag_reads_topic_cron_time_zone_attributes_and_data():
    job = ScheduledJob.from_flag(
        'slices-reconcile|0 19 * * 1-5|Europe/Berlin|mode=cleanup-only,trigger=schedule'
        '|{"why": "a|b"}')
    assert (job.topic, job.schedule, job.time_zone, job.attributes, job.data) == (
        "slices-reconcile", "0 19 * * 1-5", "Europe/Berlin",
        {"mode": "cleanup-only", "trigger": "schedule"}, '{"why": "a|b"}')
    short = ScheduledJob.from_flag("ticks|*/5 * * * *|America/New_York")
    assert (short.attributes, short.data) == ({}, "{}")


def test_every_definition_job_survives_the_trip_through_its_flag():
    assert [(j.topic, j.schedule, j.time_zone, j.attributes, j.data) for j in SCHEDULES] \
        == [(j.topic, j.schedule, j.time_zone, j.attributes, j.data)
            for j in system.SCHEDULER_JOBS]
    assert [ScheduledJob.from_flag(job.flag()) for job in SCHEDULES] == list(SCHEDULES)


def test_the_cluster_process_takes_schedule_flags_and_refuses_a_bad_one_naming_it(capsys):
    common = ["--state-dir", "/nonexistent", "--project", "p", "--location", "l",
              "--cluster", "c", "--pubsub-host", "127.0.0.1:1",
              "--unschedulable-topic", "u"]
    args = parse_args([*common, "--schedule=ticks|*/5 * * * *|Europe/Berlin|trigger=schedule"])
    assert [(j.topic, j.schedule, j.time_zone) for j in args.schedule] \
        == [("ticks", "*/5 * * * *", "Europe/Berlin")]

    for bad, complaint in [("ticks=60", "is not TOPIC|CRON|TIME_ZONE"),
                           ("ticks|*/5 * * *|Etc/UTC", "has 4 fields"),
                           ("ticks|* * * * *|Mars/Base", "time zone 'Mars/Base'"),
                           ("ticks|* * * * *|Etc/UTC|trigger", "attribute 'trigger'")]:
        with pytest.raises(SystemExit):
            parse_args([*common, f"--schedule={bad}"])
        assert complaint in capsys.readouterr().err


def test_an_attribute_the_flag_cannot_carry_is_refused_when_writing_it():
    with pytest.raises(ValueError, match="cannot be written"):
        ScheduledJob("ticks", "* * * * *", attributes={"pools": "a,b"}).flag()
