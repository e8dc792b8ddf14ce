"""What the schedule demo computes from audit rows, GKE operations and specs."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sandbox.demos.offhours_report import ready_at, savings, spec_differences
from sandbox.demos.offhours_story import Day
from shared.config.offhours import Schedule
from shared.offhours.plan import OUTPUT_ONLY

CET = dt.timezone(dt.timedelta(hours=1))


def row(pool: str, action: str, at: str, count: int = 16, method: str | None = "delete",
        period: str = "off@1") -> dict[str, Any]:
    return {"action_id": f"c/{pool}:{action}:{period}", "at": at, "project": "p",
            "location": "l", "cluster": "c", "pool": pool, "action": action,
            "method": method, "accelerator_type": "tpu-v5-lite-podslice",
            "accelerator_count": count, "team": "research"}


def operation(pool: str, start: str, end: str | None) -> dict[str, Any]:
    return {"targetLink": f"https://x/clusters/c/nodePools/{pool}", "startTime": start,
            "endTime": end, "status": "DONE" if end else "RUNNING"}


def test_savings_count_each_pool_from_its_removal_to_its_restore() -> None:
    rows = [row("team", "remove", "2026-11-24T19:00:00+01:00"),
            row("dev", "skip", "2026-11-24T19:00:00+01:00", 4, None),
            row("dev", "skip", "2026-11-24T19:05:00+01:00", 4, None),
            row("dev", "remove", "2026-11-24T20:15:00+01:00", 4, "resize"),
            row("team", "restore", "2026-11-25T07:30:00+01:00", method="recreate",
                period="on@2"),
            row("dev", "restore", "2026-11-25T07:30:00+01:00", 4, "resize", "on@2")]

    found = {s.pool: s for s in savings(rows + rows[:1])}  # the first row published twice

    until = dt.datetime(2026, 11, 25, 8, tzinfo=CET)
    assert sorted(found) == ["dev", "team"]
    assert found["team"].accelerator_hours(until) == 16 * 12.5
    assert found["dev"].hours(until) == 11.25
    assert found["dev"].method == "resize"


def test_a_pool_still_removed_is_counted_until_now() -> None:
    [saving] = savings([row("team", "remove", "2026-11-24T19:00:00+01:00")])

    assert saving.restored is None
    assert saving.hours(dt.datetime(2026, 11, 24, 21, tzinfo=CET)) == 2


def test_a_pool_is_ready_when_the_last_operation_since_its_restore_is_done() -> None:
    since = dt.datetime(2026, 11, 25, 6, 30, tzinfo=dt.UTC)
    operations = [operation("gpu", "2026-11-24T18:00:00Z", "2026-11-24T18:00:30Z"),
                  operation("gpu", "2026-11-25T06:30:01Z", "2026-11-25T06:31:01Z"),
                  operation("gpu", "2026-11-25T06:35:01Z", "2026-11-25T06:35:31Z"),
                  operation("other", "2026-11-25T06:40:00Z", None)]

    assert ready_at(operations, "gpu", since) == dt.datetime(2026, 11, 25, 6, 35, 31,
                                                              tzinfo=dt.UTC)
    assert ready_at(operations, "other", since) is None
    assert ready_at(operations, "absent", since) is None


def test_a_recreated_pool_differs_only_if_a_field_that_is_not_output_only_does() -> None:
    before = {"name": "team", "status": "RUNNING", "self_link": "a", "initial_node_count": 4,
              "config": {"labels": {"team": "research"}, "machine_type": "ct5lp-hightpu-4t"}}
    same = {**before, "status": "PROVISIONING", "self_link": "b"}
    relabelled = {**before, "config": {**before["config"], "labels": {"team": "infra"}}}

    assert spec_differences(before, same, OUTPUT_ONLY) == []
    assert spec_differences(before, relabelled, OUTPUT_ONLY) == [
        "config.labels.team: 'research' -> 'infra'"]


def test_the_demo_day_is_a_weekday_evening_followed_by_a_working_morning() -> None:
    office = Schedule.model_validate({"time_zone": "Europe/Berlin",
                                      "on_hours": {"weekdays": ["08:00-19:00"]}})
    friday_afternoon = dt.datetime(2026, 11, 27, 15, tzinfo=dt.UTC)

    day = Day.after(office, friday_afternoon, 30)

    # Friday's evening is followed by a weekend: Monday's is the next one that fits.
    assert day.close == dt.datetime(2026, 11, 30, 18, tzinfo=dt.UTC)
    assert day.open == dt.datetime(2026, 12, 1, 7, tzinfo=dt.UTC)
