"""What team_usage caches from its query's rows, and what `accelops jobs usage` prints."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from shared.config import parse_config
from shared.jobs.budget.model import TeamUsage, UsageSnapshot
from shared.jobs.budget.report import usage_text
from shared.jobs.budget.usage_sql import usage_params, usage_snapshot

NOW = datetime(2026, 11, 25, 20, 48, tzinfo=UTC)  # a Wednesday
CONFIG = parse_config("""
teams:
  research: {namespace: research, queue: research-queue,
             budget: {chip_hours_per_day: 50, chip_hours_per_week: 500}}
  inference: {namespace: inference, queue: inference-queue,
              budget: {chip_hours_per_week: 10}}
  platform: {namespace: platform, queue: platform-queue}
""")


def test_the_query_asks_for_todays_utc_day_and_the_week_from_monday():
    params = usage_params(["research", "inference", "research"], NOW)

    assert params == {"today": "2026-11-25", "week_start": "2026-11-23",
                      "teams": ["inference", "research"]}


def test_teams_without_rows_are_cached_as_having_used_nothing_and_others_are_left_out():
    rows = [{"team": "research", "today": 72.0, "week": 144.0},
            {"team": "platform", "today": 900.0, "week": 900.0}]

    snapshot = usage_snapshot(rows, ["research", "inference"], NOW)

    assert snapshot.as_of == NOW
    assert (snapshot.day, snapshot.week_start) == (date(2026, 11, 25), date(2026, 11, 23))
    assert snapshot.teams == {"inference": TeamUsage(), "research": TeamUsage(today=72, week=144)}


def test_usage_lists_each_team_against_its_budget_and_what_a_request_would_meet():
    snapshot = usage_snapshot([{"team": "research", "today": 72.0, "week": 144.0}],
                              ["research", "inference"], NOW - timedelta(minutes=3))

    text = usage_text(CONFIG, snapshot, NOW, "accelops-system")

    lines = text.splitlines()
    assert lines[0] == ("usage as of 2026-11-25T20:45:00Z (3 min ago), from ConfigMap "
                        "accelops-system/accelops-team-usage")
    assert lines[2].split() == ["team", "today", "(UTC)", "this", "week", "a", "request", "now"]
    assert lines[3].split()[:4] == ["inference", "0", "0", "/"]
    assert lines[3].endswith("admitted")
    assert lines[4].startswith("platform")
    assert lines[4].split()[1:] == ["-", "-", "no", "budget"]
    assert "72 / 50" in lines[5]
    assert "144 / 500" in lines[5]
    assert lines[5].endswith("refused, daily budget: 72 of 50 chip-hours used today (UTC); "
                             "it resets at 2026-11-26T00:00:00Z (in 3h 12m)")


def test_usage_says_when_there_is_no_cache_or_it_is_stale():
    old = UsageSnapshot(as_of=NOW - timedelta(hours=1), day=NOW.date(),
                        week_start=date(2026, 11, 23),
                        teams={"research": TeamUsage(today=900, week=900)})

    missing = usage_text(CONFIG, None, NOW, "accelops-system")
    stale = usage_text(CONFIG, old, NOW, "accelops-system")

    assert missing.startswith("no cached usage (ConfigMap accelops-system/accelops-team-usage "
                              "is missing")
    assert "research" in missing
    assert "usage unknown: not checked" in missing
    assert "(60 min ago - stale, budgets are not enforced)" in stale.splitlines()[0]
