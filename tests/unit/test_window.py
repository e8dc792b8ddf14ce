"""Report windows: a duration back from now, covering whole UTC days (pure)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from shared.metrics.window import first_day, parse_since, window_text


@pytest.mark.parametrize(("text", "expected"), [
    ("7d", timedelta(days=7)), ("36h", timedelta(hours=36)), ("2w", timedelta(weeks=2)),
    (" 90d ", timedelta(days=90))])
def test_a_window_is_read_as_hours_days_or_weeks(text, expected):
    assert parse_since(text) == expected


@pytest.mark.parametrize("text", ["", "7", "d", "0d", "-1d", "1.5d", "7 days", "7D", "7m",
                                  "99999d", "9999w"])
def test_anything_else_is_refused_saying_what_a_window_looks_like(text):
    with pytest.raises(ValueError, match=r"7d, 36h or 2w|more than ten years"):
        parse_since(text)


def test_a_window_covers_whole_utc_days_from_the_one_it_reaches_back_into():
    now = datetime(2026, 11, 23, 1, 30, tzinfo=UTC)

    assert first_day(timedelta(hours=1), now) == date(2026, 11, 23)
    assert first_day(timedelta(hours=2), now) == date(2026, 11, 22)
    assert first_day(timedelta(days=7), now) == date(2026, 11, 16)


def test_the_window_is_described_by_its_duration_and_first_day():
    assert window_text(date(2026, 11, 16), "7d") == "last 7d: 2026-11-16 to today (UTC)"
