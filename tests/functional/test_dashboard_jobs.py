"""The dashboard's jobs page through Flask's test client, reading an in-memory source."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from PIL import Image

from services.dashboard import cache
from services.dashboard.app import create_app
from shared.errors import UnavailableError
from shared.metrics.usage.views import SLOWEST_WAITS, JobUsage, QueueWait
from shared.metrics.window import first_day
from tests.fake_metrics import FakeSource, make_summary

TODAY = datetime.now(UTC).date()
NOW = datetime.now(UTC)
SCRIPT = "<script>alert(1)</script>"


def used(days_ago: int, team: str | None, hours: float, idle: float = 0.0,
         submitted: int = 1, still_open: bool = False) -> JobUsage:
    return JobUsage(TODAY - timedelta(days=days_ago), team, "v5litepod-16",
                    jobs_submitted=submitted, jobs_started=1, chip_hours_used=hours,
                    idle_chip_hours=idle, still_open=still_open)


@dataclass
class FakeJobs:
    """The rows of ``job_usage_daily`` and the slowest waits, answered per window and
    team like the BigQuery reader."""

    rows: list[JobUsage]
    waits: list[QueueWait] = field(default_factory=list)
    calls: list[tuple[str, timedelta, str | None]] = field(default_factory=list)
    unreachable: bool = False

    def job_usage(self, since: timedelta, team: str | None = None) -> list[JobUsage]:
        self.calls.append(("usage", since, team))
        if self.unreachable:
            raise UnavailableError("BigQuery did not answer")
        return [r for r in self.rows if r.day >= first_day(since) and team in (None, r.team)]

    def slowest_waits(self, since: timedelta, team: str | None = None,
                      limit: int = SLOWEST_WAITS) -> list[QueueWait]:
        self.calls.append(("waits", since, team))
        return [w for w in self.waits if team in (None, w.team)][:limit]


@pytest.fixture
def jobs() -> FakeJobs:
    return FakeJobs(
        [used(3, "research", 64.0, 24.0), used(1, "research", 64.0, 8.0),
         used(1, SCRIPT, 10.0, 2.0), used(0, "serving", 5.5, 1.0, still_open=True),
         used(20, "research", 99.0)],
        [QueueWait("r-queued", "serving", "v4-32", "serving/r-queued", NOW, None, 5400.0),
         QueueWait("r-1", "research", "v5litepod-16", "research/r-1", NOW, NOW, 60.0)])


@pytest.fixture
def client(jobs):
    return create_app(lambda: FakeSource().add(make_summary("run-a")),
                      jobs_factory=lambda: jobs).test_client()


def cells(page: str, row_class: str = "") -> list[list[str]]:
    """The data cells of each table row (of ``row_class``), header rows left out."""
    rows = re.findall(rf"<tr{row_class}>(.*?)</tr>", page)
    return [found for row in rows if (found := re.findall(r"<td[^>]*>(.*?)</td>", row))]


def test_the_index_links_to_the_jobs_page(client):
    page = client.get("/").get_data(as_text=True)

    assert '<a class=nav href="/jobs">' in page


def test_the_jobs_page_shows_each_team_the_total_and_the_slowest_waits(client):
    response = client.get("/jobs")

    assert response.status_code == 200
    page = response.get_data(as_text=True)
    [total] = cells(page, " class=total")
    assert total[-2:] == ["143.5", "35.0"]  # 64+64+10+5.5 used; 24+8+2+1 idle
    per_team = {row[0]: row[-2] for row in cells(page)[:3]}
    assert per_team == {"research": "128.0", "&lt;script&gt;alert(1)&lt;/script&gt;": "10.0",
                        "serving": "5.5"}
    assert "99.0" not in page  # 20 days ago: outside the default week
    assert SCRIPT not in page
    assert "still queued" in page
    assert "a run or a slice still up: counted up to now" in page
    assert '<a class=nav href="/jobs?since=7d&amp;team=serving">serving</a>' in page
    assert "max-age=30" in response.headers["Cache-Control"]


def test_one_teams_page_reads_only_that_team_and_links_back_to_all(client, jobs):
    page = client.get("/jobs?team=serving&since=30d").get_data(as_text=True)

    assert jobs.calls == [("usage", timedelta(days=30), "serving"),
                          ("waits", timedelta(days=30), "serving")]
    assert "research" not in page
    assert "team serving" in page
    assert '<a class=nav href="/jobs?since=30d">all</a>' in page
    assert '<a class=nav href="/jobs?since=7d&amp;team=serving">7d</a>' in page


def test_the_jobs_chart_is_a_png_of_the_chart_size(client):
    page = client.get("/jobs?since=2w&team=research").get_data(as_text=True)
    [src] = re.findall(r'<img src="([^"]+)"', page)

    response = client.get(src.replace("&amp;", "&"))

    assert src == "/jobs/chart.png?since=2w&amp;team=research"
    assert response.status_code == 200
    assert response.mimetype == "image/png"
    assert Image.open(io.BytesIO(response.data)).size == (900, 420)


def test_a_page_and_its_chart_read_the_source_once(client, jobs):
    client.get("/jobs")
    client.get("/jobs/chart.png")

    assert jobs.calls == [("usage", timedelta(days=7), None), ("waits", timedelta(days=7), None)]


@pytest.mark.parametrize("query", [{"since": "week"}, {"since": "0d"}, {"since": "7d;drop"},
                                   {"team": "x" * 257}])
def test_a_bad_window_or_team_is_a_400_without_asking_the_source(client, jobs, query):
    for path in ("/jobs", "/jobs/chart.png"):
        response = client.get(path, query_string=query)

        assert response.status_code == 400
        assert f"{next(iter(query))}:" in response.get_data(as_text=True)
    assert jobs.calls == []


def test_a_window_without_jobs_says_so_and_draws_no_chart():
    client = create_app(lambda: FakeSource(), jobs_factory=lambda: FakeJobs([])).test_client()

    page = client.get("/jobs").get_data(as_text=True)

    assert "No job was submitted or ran in this window." in page
    assert "<img" not in page


def test_an_unreachable_metrics_store_makes_the_jobs_page_a_503(client, jobs):
    jobs.unreachable = True

    response = client.get("/jobs")

    assert response.status_code == 503
    assert response.headers["Retry-After"] == "10"


def test_kept_job_figures_are_read_again_after_a_live_pages_lifetime(jobs):
    now = [1000.0]
    client = create_app(lambda: FakeSource(), clock=lambda: now[0],
                        jobs_factory=lambda: jobs).test_client()

    client.get("/jobs")
    client.get("/jobs/chart.png")
    now[0] += cache.LIVE_SECONDS + 1
    client.get("/jobs")

    assert len(jobs.calls) == 4
