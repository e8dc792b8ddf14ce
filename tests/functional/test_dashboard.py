"""The dashboard app through Flask's test client, reading an in-memory metrics source."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime, timedelta

import pytest
from PIL import Image

from services.dashboard import cache
from services.dashboard.app import create_app
from tests.fake_metrics import START, FakeSource, make_summary


@pytest.fixture
def source() -> FakeSource:
    return (FakeSource()
            .add(make_summary("run-a"))
            .add(make_summary("run:b", start=START + timedelta(hours=1), p99_ms=800.0),
                 scale=0.9))


@pytest.fixture
def client(source):
    return create_app(lambda: source).test_client()


def image_srcs(html: str) -> list[str]:
    return [src.replace("&amp;", "&") for src in re.findall(r'<img src="([^"]+)"', html)]


def test_the_index_lists_recent_tests_newest_first(client):
    response = client.get("/")

    assert response.status_code == 200
    assert response.mimetype == "text/html"
    page = response.get_data(as_text=True)
    assert re.findall(r'<a href="([^"]+)">', page) == ["/tests/run:b", "/tests/run-a"]
    assert response.headers["Cache-Control"] == "no-cache"


def test_a_test_page_shows_its_report_with_charts_from_the_chart_routes(client):
    response = client.get("/tests/run-a")

    assert response.status_code == 200
    page = response.get_data(as_text=True)
    assert "<title>Load test run-a</title>" in page
    # run-a is the older test: no previous run to compare with, and no streaming.
    assert image_srcs(page) == [f"/tests/run-a/charts/{name}.png?compare=none"
                                for name in ("latency", "throughput", "errors", "tokens",
                                             "users")]
    assert "max-age=30" in response.headers["Cache-Control"]
    assert "script-src" not in response.headers["Content-Security-Policy"]


def test_a_comparison_page_keeps_the_baseline_in_every_chart_link(client):
    response = client.get("/tests/run:b?compare=run-a")

    assert response.status_code == 200
    page = response.get_data(as_text=True)
    assert "<title>Load test run:b vs run-a</title>" in page
    assert '<td class="num good">-11.1 %</td>' in page  # p99 800 ms against 900 ms
    srcs = image_srcs(page)
    assert len(srcs) == 5
    assert all(src.endswith(".png?compare=run-a") for src in srcs)
    for src in srcs:
        chart = client.get(src)
        assert chart.status_code == 200
        assert chart.mimetype == "image/png"


def test_a_chart_route_returns_a_png(client):
    response = client.get("/tests/run-a/charts/latency.png")

    assert response.status_code == 200
    assert response.mimetype == "image/png"
    assert response.data.startswith(b"\x89PNG")
    assert "max-age=30" in response.headers["Cache-Control"]
    with Image.open(io.BytesIO(response.data)) as image:
        assert image.size == (900, 420)


@pytest.mark.parametrize("path", [
    "/tests/nope", "/tests/nope/charts/latency.png", "/tests/run-a?compare=nope",
    "/tests/run-a/charts/latency.png?compare=nope",
])
def test_an_unknown_test_is_a_404_page_naming_it(client, path):
    response = client.get(path)

    assert response.status_code == 404
    assert "&#x27;nope&#x27;" in response.get_data(as_text=True)
    assert response.headers["Cache-Control"] == "no-store"


def test_an_unknown_chart_is_a_404(client, source):
    response = client.get("/tests/run-a/charts/pie.png")

    assert response.status_code == 404
    assert "latency, ttft, tpot, throughput, errors, tokens, users" in response.get_data(
        as_text=True)
    assert source.calls == []


@pytest.mark.parametrize("path", [
    "/tests/-run", "/tests/" + "x" * 129, "/tests/a%20b", "/tests/%3Cscript%3E",
    "/tests/run-a?compare=..", "/tests/-x/charts/latency.png",
    "/tests/run-a/charts/latency.png?compare=a%2Fb",
])
def test_a_malformed_test_id_is_a_400_without_asking_the_source(client, source, path):
    response = client.get(path)

    assert response.status_code == 400
    assert "<script>" not in response.get_data(as_text=True)
    assert source.calls == []


def test_a_malformed_test_id_is_a_400_before_the_source_is_created():
    def factory() -> FakeSource:
        raise AssertionError("the source was created")

    client = create_app(factory).test_client()

    assert client.get("/tests/-run").status_code == 400
    assert client.get("/tests/run-a?compare=-x").status_code == 400
    assert client.get("/tests/-run/charts/latency.png").status_code == 400
    assert client.get("/tests/run-a/charts/pie.png").status_code == 404


@pytest.mark.parametrize("path", ["/", "/tests/run-a", "/tests/run-a/charts/errors.png"])
def test_an_unreachable_metrics_store_is_a_503_to_retry(client, source, path):
    source.unreachable = True

    response = client.get(path)

    assert response.status_code == 503
    assert response.headers["Retry-After"] == "10"
    assert "did not answer" in response.get_data(as_text=True)


def test_the_source_is_created_once_and_only_when_first_needed(source):
    created = []

    def factory() -> FakeSource:
        created.append(1)
        return source

    client = create_app(factory).test_client()
    assert client.get("/healthz").status_code == 200
    assert created == []

    client.get("/")
    client.get("/tests/run-a")
    assert created == [1]


def test_a_dashboard_without_its_project_setting_says_what_to_set(monkeypatch):
    monkeypatch.delenv("ACCELOPS_PROJECT", raising=False)
    monkeypatch.delenv("ACCELOPS_CONFIG", raising=False)

    response = create_app().test_client().get("/")

    assert response.status_code == 500
    assert "ACCELOPS_PROJECT" in response.get_data(as_text=True)


def test_without_a_choice_a_test_is_compared_with_the_previous_run_of_its_model(client):
    page = client.get("/tests/run:b").get_data(as_text=True)

    assert "<title>Load test run:b vs run-a</title>" in page
    assert "previous run of the same model and server" in page
    assert all(src.endswith("?compare=run-a") for src in image_srcs(page))


def test_compare_none_shows_the_test_alone_and_offers_the_baselines(client):
    page = client.get("/tests/run:b?compare=none").get_data(as_text=True)

    assert "<title>Load test run:b</title>" in page
    assert re.search(r'<form [^>]*method="get" action="/tests/run:b"', page)
    assert '<option value="run-a"' in page
    assert all(src.endswith("?compare=none") for src in image_srcs(page))


def test_a_page_and_its_charts_read_each_view_once(client, source):
    page = client.get("/tests/run:b?compare=run-a").get_data(as_text=True)
    for src in image_srcs(page):
        assert client.get(src).status_code == 200

    calls = [call.split("/")[0] for call, _ in source.calls]
    assert sorted(calls) == sorted(["baselines", "summaries", "series", "request_stats",
                                    "failures"])


@pytest.mark.parametrize(("finished", "kept_for"), [
    (False, cache.LIVE_SECONDS), (True, cache.FINISHED_SECONDS)])
def test_a_kept_report_is_read_again_only_after_its_lifetime(finished, kept_for):
    running = make_summary("live", start=datetime.now(UTC) - timedelta(seconds=40),
                           duration_s=30.0, finished=finished)
    source = FakeSource().add(running)
    now = [1000.0]
    client = create_app(lambda: source, clock=lambda: now[0]).test_client()

    def reads() -> int:  # of the report; the baselines offered are refreshed on their own
        return sum(call == "summaries" for call, _ in source.calls)

    client.get("/tests/live?compare=none")
    now[0] += kept_for - 1
    client.get("/tests/live?compare=none")
    assert reads() == 1
    now[0] += 2
    client.get("/tests/live?compare=none")
    assert reads() == 2


def test_the_index_sorts_by_the_column_asked_for(client):
    page = client.get("/?sort=p99&dir=asc").get_data(as_text=True)

    assert re.findall(r'<a href="(/tests/[^"]+)"', page)[:2] == ["/tests/run:b", "/tests/run-a"]
    assert 'aria-sort="ascending"' in page


def test_the_baseline_form_is_allowed_by_the_content_security_policy(client):
    policy = client.get("/tests/run-a").headers["Content-Security-Policy"]

    assert "form-action 'self'" in policy
    assert "script-src" not in policy


def test_an_error_page_is_styled_and_links_back_to_the_list(client):
    page = client.get("/tests/nope").get_data(as_text=True)

    assert "<style>" in page
    assert 'href="/"' in page
