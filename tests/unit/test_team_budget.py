"""The budget rule: who may start a job, and what a refused team is told."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.config import TeamBudget
from shared.errors import PermanentError
from shared.jobs.budget.model import (
    MAX_USAGE_AGE,
    TeamUsage,
    UsageSnapshot,
    check_budget,
    next_day,
    next_week,
    until_text,
)

# Wednesday 2026-11-25, 20:48 UTC: the day resets in 3h 12m, the week on Monday the 30th.
NOW = datetime(2026, 11, 25, 20, 48, tzinfo=UTC)
DAILY = TeamBudget(chip_hours_per_day=800)
WEEKLY = TeamBudget(chip_hours_per_week=3000)
BOTH = TeamBudget(chip_hours_per_day=800, chip_hours_per_week=3000)


def snapshot(today: float = 0.0, week: float | None = None, *, as_of: datetime = NOW,
             team: str = "research") -> UsageSnapshot:
    """Usage cached at ``as_of`` for its own day and week."""
    monday = (as_of - timedelta(days=as_of.weekday())).date()
    return UsageSnapshot(as_of=as_of, day=as_of.date(), week_start=monday,
                         teams={team: TeamUsage(today=today,
                                                week=today if week is None else week)})


def refusal(budget: TeamBudget, usage: UsageSnapshot | None, now: datetime = NOW,
            ) -> PermanentError:
    with pytest.raises(PermanentError) as caught:
        check_budget("research", budget, usage, now)
    return caught.value


def test_a_team_exactly_at_its_daily_budget_is_refused_with_usage_budget_and_reset():
    error = refusal(DAILY, snapshot(today=800))

    assert (error.field, error.rule) == ("team", "budget")
    assert error.message == (
        "team 'research' has reached its daily budget: 800 of 800 chip-hours used today "
        "(UTC); it resets at 2026-11-26T00:00:00Z (in 3h 12m)")


def test_a_team_just_under_its_daily_budget_is_admitted():
    decision = check_budget("research", DAILY, snapshot(today=799.99), NOW)

    assert decision.checked
    assert decision.warning is None


def test_usage_cached_before_utc_midnight_counts_nothing_for_the_new_day():
    late = datetime(2026, 11, 25, 23, 58, tzinfo=UTC)
    after_midnight = datetime(2026, 11, 26, 0, 3, tzinfo=UTC)

    refused = refusal(DAILY, snapshot(today=900, as_of=late), late)
    decision = check_budget("research", DAILY, snapshot(today=900, as_of=late), after_midnight)

    assert "(in 0h 2m)" in refused.message
    assert decision.checked
    assert decision.warning is None


def test_the_week_resets_on_monday_at_midnight_utc():
    sunday = datetime(2026, 11, 29, 23, 55, tzinfo=UTC)
    monday = datetime(2026, 11, 30, 0, 1, tzinfo=UTC)
    full_week = snapshot(today=100, week=3200, as_of=sunday)

    refused = refusal(WEEKLY, full_week, sunday)
    decision = check_budget("research", WEEKLY, full_week, monday)

    assert "used this week (since Monday 00:00 UTC)" in refused.message
    assert "resets at 2026-11-30T00:00:00Z (in 0h 5m)" in refused.message
    assert decision.checked


def test_a_weekly_limit_reached_midweek_resets_next_monday_in_hours_and_minutes():
    error = refusal(WEEKLY, snapshot(today=10, week=3000.4))

    assert error.message == (
        "team 'research' has reached its weekly budget: 3,000.4 of 3,000 chip-hours used "
        "this week (since Monday 00:00 UTC); it resets at 2026-11-30T00:00:00Z (in 99h 12m)")


def test_when_only_the_day_is_over_the_daily_limit_is_named():
    error = refusal(BOTH, snapshot(today=850, week=1200))

    assert error.message.startswith("team 'research' has reached its daily budget: 850 of 800")
    assert "weekly" not in error.message


def test_when_only_the_week_is_over_the_weekly_limit_is_named():
    error = refusal(BOTH, snapshot(today=100, week=3100))

    assert error.message.startswith("team 'research' has reached its weekly budget: 3,100 of")
    assert "daily" not in error.message


def test_when_both_are_over_the_week_binds_and_the_day_is_mentioned_after_it():
    error = refusal(BOTH, snapshot(today=900, week=3100))

    assert error.message.startswith("team 'research' has reached its weekly budget")
    assert error.message.index("weekly") < error.message.index("its daily budget is reached too")
    assert "2026-11-26T00:00:00Z (in 3h 12m)" in error.message


def test_a_team_without_a_budget_is_never_checked_even_without_a_cache():
    decision = check_budget("research", TeamBudget(), None, NOW)

    assert not decision.checked
    assert decision.warning is None


def test_a_fractional_budget_is_compared_and_printed_as_given():
    error = refusal(TeamBudget(chip_hours_per_day=0.5), snapshot(today=0.5))
    decision = check_budget("research", TeamBudget(chip_hours_per_day=0.5),
                            snapshot(today=0.49), NOW)

    assert "0.5 of 0.5 chip-hours used today" in error.message
    assert decision.checked


def test_a_stale_cache_admits_the_request_with_a_warning():
    old = NOW - MAX_USAGE_AGE - timedelta(minutes=1)

    decision = check_budget("research", DAILY, snapshot(today=5000, as_of=old), NOW)

    assert not decision.checked
    assert decision.warning is not None
    assert "31 minutes old" in decision.warning


def test_a_cache_just_within_the_age_bound_is_still_enforced():
    error = refusal(DAILY, snapshot(today=5000, as_of=NOW - MAX_USAGE_AGE))

    assert error.rule == "budget"


def test_a_missing_cache_admits_the_request_with_a_warning():
    decision = check_budget("research", BOTH, None, NOW)

    assert not decision.checked
    assert decision.warning is not None
    assert "accelops-team-usage" in decision.warning


def test_a_cache_that_predates_the_teams_budget_admits_with_a_warning():
    decision = check_budget("research", DAILY, snapshot(today=5000, team="inference"), NOW)

    assert not decision.checked
    assert decision.warning is not None


def test_a_snapshot_written_a_little_ahead_of_this_clock_is_still_fresh():
    error = refusal(DAILY, snapshot(today=900, as_of=NOW + timedelta(seconds=40)))

    assert error.rule == "budget"


def test_a_snapshot_stamped_far_ahead_of_this_clock_is_not_trusted():
    ahead = NOW + MAX_USAGE_AGE + timedelta(minutes=5)

    decision = check_budget("research", DAILY, snapshot(today=5000, as_of=ahead), NOW)

    assert not decision.checked
    assert decision.warning is not None
    assert "35 minutes ahead of this clock" in decision.warning


def test_resets_are_strictly_after_now_even_at_midnight_itself():
    midnight_monday = datetime(2026, 11, 30, tzinfo=UTC)

    assert next_day(midnight_monday) == datetime(2026, 12, 1, tzinfo=UTC)
    assert next_week(midnight_monday) == datetime(2026, 12, 7, tzinfo=UTC)
    assert until_text(midnight_monday - timedelta(seconds=5), midnight_monday) == "in 0h 1m"


def test_a_snapshot_without_an_offset_is_read_as_utc():
    parsed = UsageSnapshot.model_validate_json(
        '{"as_of": "2026-11-25T20:40:00", "day": "2026-11-25", "week_start": "2026-11-23",'
        ' "teams": {"research": {"today": 900, "week": 900}}}')

    assert "in 3h 12m" in refusal(DAILY, parsed).message
