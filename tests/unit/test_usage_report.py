"""Job usage totals, the CLI's text report, the page and the chart (pure; no BigQuery)."""

from __future__ import annotations

import io
import re
from datetime import UTC, date, datetime, timedelta

import numpy as np
import pytest
from PIL import Image

from shared.metrics._daily_chart import OTHERS, PALETTE, ranked
from shared.metrics.chart_size import HEIGHT_PX, WIDTH_PX
from shared.metrics.usage.chart import jobs_chart_png
from shared.metrics.usage.report import jobs_page, jobs_text
from shared.metrics.usage.views import JobUsage, QueueWait, totals

DAY = date(2026, 11, 20)
AT = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


def usage(days: int, team: str | None = "research", tpu_type: str = "v5litepod-16", *,
          submitted: int = 0, failed: int = 0, waits: tuple[float, int] = (0.0, 0),
          used: float = 0.0, idle: float = 0.0, still_open: bool = False) -> JobUsage:
    wait, waited = waits
    return JobUsage(DAY + timedelta(days=days), team, tpu_type, jobs_submitted=submitted,
                    jobs_finished=failed, jobs_failed=failed,
                    queue_wait_seconds_avg=wait if waited else None, queue_waits=waited,
                    chip_hours_used=used, idle_chip_hours=idle, still_open=still_open)


ROWS = [usage(0, submitted=3, waits=(60.0, 3), used=64.0, idle=24.0),
        usage(1, submitted=1, failed=1, waits=(600.0, 1), used=64.0, idle=8.0),
        usage(1, "serving", submitted=2, waits=(30.0, 2), used=10.0, idle=1.5),
        usage(2, "research", "v4-32", used=12.0, idle=2.0, still_open=True)]
WAITS = [QueueWait("r-queued", "research", "v4-32", "research/r-queued", AT, None, 5400.0),
         QueueWait("r-cross", "research", "v5litepod-16", "research/r-cross", AT,
                   AT + timedelta(minutes=30), 1800.0)]


def test_totals_weight_each_days_average_by_how_many_waits_it_is_over():
    per_group, total = totals(ROWS)

    [research] = [t for t in per_group if (t.team, t.tpu_type) == ("research", "v5litepod-16")]
    assert research.queue_wait_seconds_avg == pytest.approx((3 * 60 + 600) / 4)
    assert total.queue_wait_seconds_avg == pytest.approx((3 * 60 + 600 + 2 * 30) / 6)
    assert total.run_seconds_avg is None  # nothing finished after running
    assert (total.jobs_submitted, total.jobs_failed) == (6, 1)
    assert (total.chip_hours_used, total.idle_chip_hours) == (150.0, 35.5)
    assert [(t.team, t.tpu_type) for t in per_group] == [
        ("research", "v5litepod-16"), ("research", "v4-32"), ("serving", "v5litepod-16")]


def test_the_text_report_has_totals_a_line_per_day_and_the_slowest_waits():
    text = jobs_text(ROWS, WAITS, DAY, "7d")
    lines = text.splitlines()

    assert lines[0].endswith("last 7d: 2026-11-20 to today (UTC)")
    day_lines = text.split("Per day:\n")[1].split("\n\n")[0].splitlines()
    assert re.split(r" {2,}", day_lines[0])[:3] == ["Day (UTC)", "Team", "TPU type"]
    assert len(day_lines) == 1 + len(ROWS)
    assert re.split(r" {2,}", day_lines[2]) == [
        "2026-11-21", "research", "v5litepod-16", "1", "0", "0", "1", "1", "10 min 0 s", "—",
        "—", "64.0", "8.0"]
    assert day_lines[4].startswith("2026-11-22 *")
    [total] = [re.split(r" {2,}", line) for line in lines if line.startswith("Total")]
    assert total[-2:] == ["150.0", "35.5"]
    waits = text.split("Slowest queue waits")[1].splitlines()[2:4]
    assert re.split(r" {2,}", waits[0])[-2:] == ["still queued", "1 h 30 min"]
    assert re.split(r" {2,}", waits[1])[-2:] == ["2026-11-20 09:30", "30 min 0 s"]
    assert lines[-1] == "* a run or a slice still up: counted up to now"


def test_a_window_without_jobs_says_so():
    assert jobs_text([], [], DAY, "2w", team="research").splitlines()[-1] == (
        "No job was submitted or ran in this window.")


def test_the_page_escapes_every_value_and_offers_windows_and_teams():
    hostile = '<img src=x onerror="alert(1)">'
    rows = [usage(0, hostile, submitted=1), usage(0, "serving", submitted=1)]

    page = jobs_page(rows, [], DAY, "7d", team=None, chart_src="/c.png?since=7d&x=1",
                     index_href="/", since_href={"7d": "/jobs?since=7d", "30d": "/jobs?30"},
                     team_href={None: "/jobs", "serving": "/jobs?team=serving"})

    assert "<img src=x" not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    assert '<img src="/c.png?since=7d&amp;x=1"' in page
    assert "<strong>all</strong>" in page
    assert '<a class=nav href="/jobs?team=serving">serving</a>' in page
    assert '<a class=nav href="/jobs?30">30d</a>' in page
    assert "Slowest queue waits" not in page  # none to show


def test_a_page_with_only_waiting_jobs_lists_them_without_a_chart():
    page = jobs_page([], WAITS[:1], DAY, "7d", team="research", chart_src="/c.png",
                     index_href=None, since_href={}, team_href={None: "/jobs"})

    assert "<img" not in page
    assert "still queued" in page
    assert "team research" in page


def test_the_chart_is_drawn_at_the_size_of_the_other_charts_with_many_teams():
    rows = [usage(day % 5, f"team-{day}", used=2.0 * day, idle=1.0) for day in range(12)]

    png = jobs_chart_png(rows, DAY, DAY + timedelta(days=6))

    assert Image.open(io.BytesIO(png)).size == (WIDTH_PX, HEIGHT_PX)


def test_idle_chip_hours_are_drawn_above_the_used_ones_in_a_lighter_colour():
    # One day, one team, as much idle as used: down the middle of the bar, the team's
    # solid colour fills the lower half and a lighter shade of it the upper half.
    png = jobs_chart_png([usage(0, used=30.0, idle=30.0)], DAY, DAY)
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    middle = pixels[:, pixels.shape[1] // 2]

    solid = np.all(np.abs(middle - [0x00, 0x72, 0xb2]) < 8, axis=1)
    bluish = middle[:, 2] - middle[:, 0] > 30
    assert solid.sum() > 100
    assert solid.sum() / bluish.sum() == pytest.approx(0.5, abs=0.05)
    # Image rows count downwards: the lighter part is above.
    assert np.median(np.nonzero(bluish & ~solid)[0]) < np.median(np.nonzero(solid)[0])


def test_teams_past_the_palette_are_summed_into_others():
    per_team = {f"team-{i}": [{DAY: float(i)}, {DAY: 1.0}] for i in range(10)}

    drawn = ranked(per_team)

    assert len(drawn) == len(PALETTE)
    assert [team for team, _, _ in drawn[:2]] == ["team-9", "team-8"]
    others = drawn[-1]
    assert others[0] == OTHERS
    assert others[2] == [{DAY: 0.0 + 1.0 + 2.0}, {DAY: 3.0}]  # team-0..2, both series
