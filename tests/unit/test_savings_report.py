"""Savings totals, the CLI's text table and the chart (pure; no BigQuery)."""

from __future__ import annotations

import io
from datetime import date, timedelta

from PIL import Image

from shared.metrics.chart_size import HEIGHT_PX, WIDTH_PX
from shared.metrics.savings.chart import savings_chart_png
from shared.metrics.savings.report import savings_page, savings_text
from shared.metrics.savings.views import PoolSavings, totals

DAY = date(2026, 11, 20)


def saved(days: int, pool: str, hours: float, chips: int, team: str | None = "research",
          still_removed: bool = False) -> PoolSavings:
    return PoolSavings(DAY + timedelta(days=days), team, "acme-ml", "us-central2-b", "train",
                       pool, "tpu-v5-lite-podslice", hours, hours * chips, 1, still_removed)


ROWS = [saved(0, "pool-a", 6.0, 16), saved(1, "pool-a", 12.0, 16),
        saved(1, "l4", 10.0, 4, team="serving"),
        saved(2, "l4", 1.25, 4, team="serving", still_removed=True)]


def test_totals_sum_each_pool_over_the_window_largest_saver_first():
    per_pool, total = totals(ROWS)

    assert [(t.pool, t.removed_hours, t.accelerator_hours_saved) for t in per_pool] == [
        ("pool-a", 18.0, 288.0), ("l4", 11.25, 45.0)]
    assert (total.removed_hours, total.accelerator_hours_saved) == (29.25, 333.0)


def test_the_text_report_has_a_line_per_day_and_pool_and_a_total_that_adds_up():
    text = savings_text(ROWS, date(2026, 11, 16), "7d")
    lines = text.splitlines()

    assert lines[0].endswith("last 7d: 2026-11-16 to today (UTC)")
    assert lines[2].split()[:3] == ["Day", "(UTC)", "Team"]
    assert lines[3].split() == ["2026-11-20", "research", "train", "pool-a",
                                "tpu-v5-lite-podslice", "6.0", "96.0"]
    assert lines[6].split()[:2] == ["2026-11-22", "*"]
    [total] = [line for line in lines if line.startswith("Total")]
    assert total.split() == ["Total", "29.2", "333.0"]
    # Numbers are right-aligned: every figure ends in the same column.
    assert len({len(line) for line in lines[3:7]}) == 1
    assert lines[-1] == "* still removed: counted up to now"


def test_an_empty_window_says_no_pool_was_removed():
    assert "No pool was removed in this window." in savings_text([], DAY, "7d")


def test_the_page_escapes_every_value_it_shows():
    rows = [saved(0, "pool-a", 1.0, 1, team='<img src=x onerror="alert(1)">')]

    page = savings_page(rows, DAY, "7d", chart_src="/c.png?since=7d&x=1", index_href="/",
                        since_href={"7d": "/savings?since=7d"})

    assert "<img src=x" not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    assert '<img src="/c.png?since=7d&amp;x=1"' in page


def test_the_chart_is_drawn_at_the_size_of_the_other_charts_with_many_teams():
    rows = [saved(day % 5, f"pool-{day}", 2.0, 4, team=f"team-{day}") for day in range(12)]

    png = savings_chart_png(rows, DAY, DAY + timedelta(days=6))

    assert Image.open(io.BytesIO(png)).size == (WIDTH_PX, HEIGHT_PX)


def test_a_chart_of_a_window_without_savings_still_draws():
    png = savings_chart_png([], DAY, DAY)

    assert png.startswith(b"\x89PNG")
