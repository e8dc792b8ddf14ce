"""The dashboard's savings page through Flask's test client, reading an in-memory source."""

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
from shared.metrics.savings.views import PoolSavings
from shared.metrics.window import first_day
from tests.fake_metrics import FakeSource, make_summary

TODAY = datetime.now(UTC).date()
SCRIPT = "<script>alert(1)</script>"


def saved(days_ago: int, pool: str, hours: float, chips: int, team: str | None = "research",
          still_removed: bool = False) -> PoolSavings:
    return PoolSavings(TODAY - timedelta(days=days_ago), team, "acme-ml", "us-central2-b",
                       "train", pool, "tpu-v5-lite-podslice", hours, hours * chips,
                       intervals=1, still_removed=still_removed)


@dataclass
class FakeSavings:
    """The rows of ``pool_savings_daily``, answered per window like the BigQuery reader."""

    rows: list[PoolSavings]
    calls: list[timedelta] = field(default_factory=list)
    unreachable: bool = False

    def pool_savings(self, since: timedelta) -> list[PoolSavings]:
        self.calls.append(since)
        if self.unreachable:
            raise UnavailableError("BigQuery did not answer")
        return [row for row in self.rows if row.day >= first_day(since)]


@pytest.fixture
def savings() -> FakeSavings:
    return FakeSavings([saved(3, "pool-a", 6.0, 16), saved(2, "pool-a", 12.0, 16),
                        saved(1, "pool-b", 2.0, 8, team=SCRIPT),
                        saved(0, "pool-b", 5.5, 8, team=SCRIPT, still_removed=True),
                        saved(20, "pool-old", 10.0, 4)])


@pytest.fixture
def client(savings):
    return create_app(lambda: FakeSource().add(make_summary("run-a")),
                      savings_factory=lambda: savings).test_client()


def cells(page: str, row_class: str = "") -> list[list[str]]:
    """The data cells of each table row (of ``row_class``), header rows left out."""
    rows = re.findall(rf"<tr{row_class}>(.*?)</tr>", page)
    return [found for row in rows if (found := re.findall(r"<td[^>]*>(.*?)</td>", row))]


def test_the_index_links_to_the_savings_page(client):
    page = client.get("/").get_data(as_text=True)

    assert '<a class=nav href="/savings">' in page


def test_the_savings_page_shows_each_pool_and_the_total_of_the_window(client):
    response = client.get("/savings")

    assert response.status_code == 200
    page = response.get_data(as_text=True)
    assert "pool-old" not in page  # 20 days ago: outside the default week
    [total] = cells(page, " class=total")
    assert total[-2:] == ["25.5", "348.0"]  # 6+12+2+5.5 h; 96+192+16+44 chip-hours
    per_pool = {row[2]: row[-1] for row in cells(page)[:2]}
    assert per_pool == {"pool-a": "288.0", "pool-b": "60.0"}
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert SCRIPT not in page
    assert "still removed: counted up to now" in page
    assert "max-age=30" in response.headers["Cache-Control"]


def test_a_longer_window_reaches_further_back(client):
    page = client.get("/savings?since=30d").get_data(as_text=True)

    assert "pool-old" in page
    assert '<a class=nav href="/savings?since=7d">7d</a>' in page


def test_the_savings_chart_is_a_png_of_the_chart_size(client):
    page = client.get("/savings?since=2w").get_data(as_text=True)
    [src] = re.findall(r'<img src="([^"]+)"', page)

    response = client.get(src.replace("&amp;", "&"))

    assert src == "/savings/chart.png?since=2w"
    assert response.status_code == 200
    assert response.mimetype == "image/png"
    assert Image.open(io.BytesIO(response.data)).size == (900, 420)


def test_a_page_and_its_chart_read_the_source_once(client, savings):
    client.get("/savings")
    client.get("/savings/chart.png")

    assert savings.calls == [timedelta(days=7)]


@pytest.mark.parametrize("since", ["week", "0d", "7", "-7d", "7d;drop", "99999d"])
def test_a_window_that_is_not_a_duration_is_a_400_without_asking_the_source(
        client, savings, since):
    for path in ("/savings", "/savings/chart.png"):
        response = client.get(path, query_string={"since": since})

        assert response.status_code == 400
        assert "since:" in response.get_data(as_text=True)
    assert savings.calls == []


def test_a_window_without_removals_says_so_and_draws_no_chart():
    client = create_app(lambda: FakeSource(), savings_factory=lambda: FakeSavings([])
                        ).test_client()

    page = client.get("/savings").get_data(as_text=True)

    assert "No pool was removed in this window." in page
    assert "<img" not in page


def test_an_unreachable_metrics_store_makes_the_savings_page_a_503(client, savings):
    savings.unreachable = True

    response = client.get("/savings")

    assert response.status_code == 503
    assert response.headers["Retry-After"] == "10"


def test_kept_savings_are_read_again_after_a_live_pages_lifetime(savings):
    now = [1000.0]
    client = create_app(lambda: FakeSource(), clock=lambda: now[0],
                        savings_factory=lambda: savings).test_client()

    client.get("/savings")
    now[0] += cache.LIVE_SECONDS + 1
    client.get("/savings")

    assert len(savings.calls) == 2
