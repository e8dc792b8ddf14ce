"""A scheduler job of the deployment definition says any schedule Cloud Scheduler
takes — a unix-cron string and an IANA time zone — and refuses, when it is
written, what Cloud Scheduler would refuse at ``terraform apply``."""

from __future__ import annotations

import pytest

from shared.deployment import system
from shared.deployment.model import SchedulerJob
from shared.deployment.terraform import system_document


def job(schedule: str, time_zone: str = "Etc/UTC") -> SchedulerJob:
    return SchedulerJob(name="pool-schedule-test", schedule=schedule, topic="pool-schedule",
                        description="a test job", time_zone=time_zone)


@pytest.mark.parametrize("schedule", [
    "* * * * *",
    "*/5 * * * *",
    "30 2 * * *",
    "0 9 * * 1-5",
    "0 9 * * MON-FRI",
    "0 0 1,15 jan,Jul *",
    "0 0-23/2 * * *",
    "45 23 * * 7",
    "0 7,19 * * SUN,6",
])
def test_a_job_takes_any_unix_cron_schedule_cloud_scheduler_accepts(schedule):
    assert job(schedule, "Europe/Berlin").schedule == schedule


@pytest.mark.parametrize(("schedule", "complaint"), [
    ("* * * *", "has 4 fields"),
    ("0 * * * * *", "has 6 fields"),
    ("@daily", "has 1 field;"),
    ("60 * * * *", "minute '60': 60 is outside 0-59"),
    ("0 24 * * *", "hour '24': 24 is outside 0-23"),
    ("0 0 0 * *", "day of month '0': 0 is outside 1-31"),
    ("0 0 * 13 *", "month '13': 13 is outside 1-12"),
    ("0 0 * * 8", "day of week '8': 8 is outside 0-7"),
    ("0 0 * FOO *", "'FOO' is not a number or one of JAN/"),
    ("0 0 * * MON-SUNDAY", "'SUNDAY' is not a number or one of SUN/"),
    ("5/10 * * * *", "a step follows * or a range"),
    ("*/0 * * * *", "the step of '*/0' is not a positive number"),
    ("0 17-9 * * *", "the range '17-9' ends before it starts"),
    ("0 0 L * *", "'L' is not a number"),
    ("0 0 ? * *", "'?' is not *, a value"),
    ("0 0 * * 1#2", "'1#2' is not *, a value"),
    ("0,,5 * * * *", "'' is not *, a value"),
])
def test_a_schedule_cloud_scheduler_would_refuse_is_refused_naming_it_and_the_rule(
        schedule, complaint):
    with pytest.raises(ValueError, match="scheduler job pool-schedule-test") as caught:
        job(schedule)
    assert repr(schedule) in str(caught.value)
    assert complaint in str(caught.value)


@pytest.mark.parametrize("time_zone", ["Europe/Berlin", "America/New_York", "Etc/UTC", "UTC"])
def test_a_job_takes_an_iana_time_zone(time_zone):
    assert job("0 9 * * *", time_zone).time_zone == time_zone


@pytest.mark.parametrize("time_zone", ["Mars/Olympus", "CEST", "", "Europe", "../etc/passwd",
                                       "+02:00"])
def test_a_time_zone_that_is_not_an_iana_name_is_refused_naming_it(time_zone):
    with pytest.raises(ValueError, match="not an IANA time zone name") as caught:
        job("0 9 * * *", time_zone)
    assert f"time zone {time_zone!r}" in str(caught.value)


def test_without_a_time_zone_a_job_runs_in_cloud_schedulers_default_utc():
    assert SchedulerJob(name="t", schedule="* * * * *", topic="t", description="").time_zone \
        == "Etc/UTC"


def test_the_reconcile_ticks_still_run_every_minute_in_utc():
    assert {(j.name, j.schedule, j.time_zone) for j in system.SCHEDULER_JOBS} >= {
        ("reconcile-slices-every-minute", "* * * * *", "Etc/UTC"),
        ("reconcile-models-every-minute", "* * * * *", "Etc/UTC"),
    }


def test_terraform_receives_each_jobs_schedule_and_time_zone_as_written():
    jobs = system_document()["scheduler_jobs"]
    assert {name: (j["schedule"], j["time_zone"]) for name, j in jobs.items()} \
        == {j.name: (j.schedule, j.time_zone) for j in system.SCHEDULER_JOBS}
