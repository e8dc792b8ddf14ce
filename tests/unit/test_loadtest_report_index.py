"""The list of load tests (sorted on the server, by links) and the error page."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from shared.metrics._html import error_page
from shared.metrics.loadtest.report import render_error_html, render_index_html
from tests.fake_metrics import START, FakeSource, make_summary

SCRIPT = "<script>alert(1)</script>"
LONG_ID = "lt:20261121.100000_" + "0123456789abcdefghijklmnopqrstuvwxyz" * 3
COLUMNS = ["test", "started", "model", "server", "accelerator", "users", "duration",
           "requests", "qps", "success_qps", "goodput", "error_rate", "p50", "p99", "ttft_p50",
           "tpot_p50", "tokens_per_s"]


@pytest.fixture
def source() -> FakeSource:
    return (FakeSource()
            .add(make_summary("run-a", qps=40.0, error_rate=0.01, p50_ms=300.0))
            .add(make_summary("run-b", start=START + timedelta(hours=1), qps=60.0,
                              error_rate=0.5, p50_ms=None))
            .add(make_summary("run-c", start=START + timedelta(hours=2), qps=50.0,
                              error_rate=0.0, p50_ms=100.0)))


def link(test_id: str) -> str:
    return f"/tests/{test_id}"


def order(page: str) -> list[str]:
    return re.findall(r'<a href="/tests/([^"]+)">', page)


def headers(page: str) -> list[tuple[str, str, str]]:
    """(aria-sort, href, text) of each column header."""
    return re.findall(r'<th(?: class=num)?(?: aria-sort="(\w+)")?><a class=sort href="([^"]+)">'
                      r"([^<]+)</a></th>", page)


def test_the_index_links_every_test_newest_first_by_default(source):
    page = render_index_html(source.recent_tests(), link)

    assert order(page) == ["run-c", "run-b", "run-a"]
    assert "newest first" in page


def test_the_index_has_a_column_for_each_number_a_reader_compares(source):
    page = render_index_html(source.recent_tests(), link)

    assert [text.rstrip("\u00a0▲▼") for _, _, text in headers(page)] == [
        "Test", "Started (UTC)", "Model", "Server", "Accelerator", "Users", "Duration",
        "Requests", "QPS", "Success QPS", "Goodput", "Error rate", "p50 (ms)", "p99 (ms)",
        "TTFT p50 (ms)", "TPOT p50 (ms)", "Tokens/s"]
    row = re.search(r'<tr><td class="id" title="run-a">(.*?)</tr>', page)
    assert row
    assert re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1)) == [
        "2025-03-01 12:00", "llama-3-8b", "vllm", "v5e-8", "64", "5 min 0 s", "12,000",
        "40.0", "39.6", "no SLOs", "1.00 %", "300.0", "900.0", "—", "—", "5,000.0"]


@pytest.mark.parametrize(("sort", "direction", "expected"), [
    ("qps", "desc", ["run-b", "run-c", "run-a"]),
    ("qps", "asc", ["run-a", "run-c", "run-b"]),
    ("error_rate", "asc", ["run-c", "run-a", "run-b"]),
    ("test", "desc", ["run-c", "run-b", "run-a"]),
    ("started", "asc", ["run-a", "run-b", "run-c"]),
    # A test without a p50 (nothing succeeded) goes last either way.
    ("p50", "asc", ["run-c", "run-a", "run-b"]),
    ("p50", "desc", ["run-a", "run-c", "run-b"]),
])
def test_the_index_sorts_by_the_column_asked_for(source, sort, direction, expected):
    assert order(render_index_html(source.recent_tests(), link, sort, direction)) == expected


@pytest.mark.parametrize(("sort", "direction"), [
    ("password", "asc"), ("__class__", "desc"), ("", ""), (None, None), ("qps;drop", "asc"),
])
def test_an_unknown_sort_column_means_newest_first(source, sort, direction):
    page = render_index_html(source.recent_tests(), link, sort, direction)

    assert order(page) == ["run-c", "run-b", "run-a"]
    assert [(state, text) for state, _, text in headers(page) if state] == [
        ("descending", "Started (UTC)\u00a0▼")]


def test_an_unknown_direction_means_the_columns_usual_one(source):
    assert order(render_index_html(source.recent_tests(), link, "qps", "sideways")) == [
        "run-b", "run-c", "run-a"]


def test_each_header_links_to_its_sort_and_the_current_one_is_marked(source):
    page = render_index_html(source.recent_tests(), link, "qps", "desc")

    found = {href.split("&amp;")[0].removeprefix("?sort="): (state, href)
             for state, href, _ in headers(page)}
    assert list(found) == COLUMNS
    # The current column flips its direction; the others start at their usual one.
    assert found["qps"] == ("descending", "?sort=qps&amp;dir=asc")
    assert found["p99"] == ("", "?sort=p99&amp;dir=asc")
    assert found["tokens_per_s"] == ("", "?sort=tokens_per_s&amp;dir=desc")
    assert found["model"] == ("", "?sort=model&amp;dir=asc")
    assert "by QPS, descending" in page


def test_a_test_that_mixed_models_or_guessed_its_model_is_flagged(source):
    source.add(make_summary("mixed", model_count=2, models_seen="a, b", model_inferred=True))

    page = render_index_html(source.recent_tests(), link)

    row = re.search(r'title="mixed">(.*?)</tr>', page)
    assert row
    assert ('<span class="flag" title="requests named several models: a, b">mixed</span>'
            in row.group(1))
    assert ">inferred</span>" in row.group(1)


def test_the_index_uses_the_full_width_and_keeps_ids_on_one_line(source):
    source.add(make_summary(LONG_ID))

    page = render_index_html(source.recent_tests(), link)

    assert '<body class="wide">' in page
    assert re.search(r"body\.wide\{max-width:none\}", page)
    assert re.search(r"td\.id a\{[^}]*white-space:nowrap", page)
    assert re.search(r"td\.id a\{[^}]*text-overflow:ellipsis", page)
    assert f'<td class="id" title="{LONG_ID}"><a href="/tests/{LONG_ID}">{LONG_ID}</a>' in page
    assert '<div class="scroll"><table class="tests">' in page


def test_the_index_escapes_text_from_the_data():
    evil = 'x"><script>alert(1)</script>'
    source = FakeSource().add(make_summary(evil, model_name=SCRIPT, server="a&b",
                                           model_count=2, models_seen=SCRIPT))

    page = render_index_html(source.recent_tests(), link)

    assert "<script>" not in page
    assert "a&amp;b" in page
    assert 'href="/tests/x&quot;&gt;&lt;script&gt;' in page
    assert 'title="x&quot;&gt;&lt;script&gt;' in page


def test_the_index_of_no_tests_says_so():
    assert "No load tests yet." in render_index_html([], link)


def test_an_error_page_has_the_reports_style_and_escapes_its_reason():
    page = error_page(404, "Not Found", f"no load test {SCRIPT!r}")

    assert "<title>404 Not Found</title>" in page
    assert "<h1>404 Not Found</h1>" in page
    assert "no load test &#x27;&lt;script&gt;alert(1)&lt;/script&gt;&#x27;" in page
    assert '<p class=back><a href="/">← All load tests</a></p>' in page
    assert "<script" not in page
    index = render_index_html([], link)
    assert page[page.index("<style>"):page.index("</style>")] == (
        index[index.index("<style>"):index.index("</style>")])


def test_an_error_page_links_back_where_it_is_told_or_nowhere():
    assert '<a href="/dash/">' in render_error_html(503, "Service Unavailable", "later",
                                                    index_href="/dash/")
    assert "All load tests" not in error_page(500, "Internal Server Error", "x", None)
