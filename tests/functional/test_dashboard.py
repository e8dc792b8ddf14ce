"""The dashboard app through Flask's test client, reading an in-memory metrics source."""

from __future__ import annotations

import io
import re
from datetime import timedelta

import pytest
from PIL import Image

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
    assert image_srcs(page) == [f"/tests/run-a/charts/{name}.png"
                                for name in ("latency", "throughput", "errors", "tokens")]
    assert "max-age=60" in response.headers["Cache-Control"]
    assert "script-src" not in response.headers["Content-Security-Policy"]


def test_a_comparison_page_keeps_the_baseline_in_every_chart_link(client):
    response = client.get("/tests/run:b?compare=run-a")

    assert response.status_code == 200
    page = response.get_data(as_text=True)
    assert "<title>Load test run:b vs run-a</title>" in page
    assert '<td class="num good">-11.1 %</td>' in page  # p99 800 ms against 900 ms
    srcs = image_srcs(page)
    assert len(srcs) == 4
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
    assert "max-age=60" in response.headers["Cache-Control"]
    with Image.open(io.BytesIO(response.data)) as image:
        assert image.size == (900, 360)


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
    assert "latency, throughput, errors, tokens" in response.get_data(as_text=True)
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
