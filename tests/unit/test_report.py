"""The load-test report: what its page says, its charts, and the files it writes."""

from __future__ import annotations

import io
import re
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from PIL import Image

from shared.errors import NotFoundError
from shared.metrics import charts
from shared.metrics.charts import CHART_NAMES, Run
from shared.metrics.report import (
    build_report,
    chart_png,
    render_html,
    render_index_html,
    report_dir_name,
    write_report,
)
from tests.fake_metrics import START, FakeSource, make_series, make_summary


@pytest.fixture
def source() -> FakeSource:
    return (FakeSource()
            .add(make_summary("run-a"))
            .add(make_summary("run-b", start=START + timedelta(days=1), qps=44.0,
                              p99_ms=990.0, tokens_per_s=4_500.0, error_rate=0.0025,
                              requests=13_200)))


def chart_src(name: str) -> str:
    return f"{name}.png"


def cell_after(page: str, label: str) -> list[str]:
    """The cells of the summary row labelled ``label``, as HTML fragments."""
    row = re.search(rf"<tr[^>]*><th>{re.escape(label)}</th>(.*?)</tr>", page)
    assert row, f"no row {label!r}"
    return re.findall(r"<td[^>]*>.*?</td>", row.group(1))


def png_size(png: bytes) -> tuple[int, int]:
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    with Image.open(io.BytesIO(png)) as image:
        return image.size


def test_the_page_shows_the_tests_summary_numbers(source):
    page = render_html(build_report(source, "run-a"), chart_src)

    assert "<title>Load test run-a</title>" in page
    assert cell_after(page, "Model") == ["<td class=num>llama-3-8b</td>"]
    assert cell_after(page, "Requests") == ["<td class=num>12,000</td>"]
    assert cell_after(page, "QPS (requests/s)") == ["<td class=num>40.0</td>"]
    assert cell_after(page, "Error rate") == ["<td class=num>0.50 %</td>"]
    assert cell_after(page, "p99 latency (ms)") == ["<td class=num>900.0</td>"]
    assert cell_after(page, "Output tokens/s") == ["<td class=num>5,000.0</td>"]
    assert cell_after(page, "Duration") == ["<td class=num>5 min 0 s</td>"]
    assert "Change" not in page


def test_a_comparison_names_both_tests_and_the_change_of_each_number(source):
    page = render_html(build_report(source, "run-b", compare="run-a"), chart_src)

    assert "<title>Load test run-b vs run-a</title>" in page
    assert "run-a (baseline)" in page
    assert cell_after(page, "QPS (requests/s)") == [
        "<td class=num>44.0</td>", "<td class=num>40.0</td>",
        '<td class="num good">+10.0 %</td>']
    assert cell_after(page, "p99 latency (ms)")[2] == '<td class="num bad">+10.0 %</td>'
    assert cell_after(page, "Error rate")[2] == '<td class="num good">-50.0 %</td>'
    assert cell_after(page, "Output tokens/s")[2] == '<td class="num bad">-10.0 %</td>'
    assert cell_after(page, "p50 latency (ms)")[2] == '<td class="num same">+0.0 %</td>'
    # More requests is a different load, not a better result.
    assert cell_after(page, "Requests")[2] == '<td class="num same">+10.0 %</td>'


def test_an_error_rate_rising_from_zero_is_marked_bad():
    source = FakeSource().add(make_summary("clean", error_rate=0.0)).add(make_summary("new"))
    page = render_html(build_report(source, "new", compare="clean"), chart_src)

    assert cell_after(page, "Error rate")[2] == '<td class="num bad">n/a (from 0)</td>'


def test_names_from_the_data_are_escaped():
    evil_id = "x\"><script>alert(1)</script>"
    source = FakeSource().add(make_summary(evil_id, model_name="<img src=x onerror=alert(2)>",
                                           server="a&b")).add(make_summary("ok"))
    page = render_html(build_report(source, "ok", compare=evil_id), chart_src)
    index = render_index_html(source.recent_tests(), lambda test_id: f"/tests/{test_id}")

    for html in (page, index):
        assert "<script>" not in html
        assert "<img src=x" not in html
        assert "&lt;img src=x onerror=alert(2)&gt;" in html
        assert "a&amp;b" in html
    assert "x&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'href="/tests/x&quot;&gt;&lt;script&gt;' in index


def test_a_short_test_is_charted_per_second_and_a_long_one_per_minute():
    source = (FakeSource().add(make_summary("short", duration_s=599.0))
              .add(make_summary("long", duration_s=3_600.0))
              .add(make_summary("longer", duration_s=7_200.0)))

    assert build_report(source, "short").per == "second"
    assert len(build_report(source, "short").series) == 599
    assert build_report(source, "long").per == "minute"
    assert len(build_report(source, "long").series) == 60
    assert build_report(source, "long", compare="longer").per == "minute"
    # One short test is enough: per minute would leave it a handful of points.
    compared = build_report(source, "long", compare="short")
    assert compared.per == "second"
    assert (len(compared.series), len(compared.other_series)) == (3_600, 599)
    assert "Charts per second" in render_html(compared, chart_src)


def test_an_unknown_test_or_baseline_is_not_found(source):
    with pytest.raises(NotFoundError):
        build_report(source, "nope")
    with pytest.raises(NotFoundError):
        build_report(source, "run-a", compare="nope")


def test_the_page_shows_each_chart_with_its_src_and_alt_text(source):
    page = render_html(build_report(source, "run-b", compare="run-a"),
                       lambda name: f"/charts/{name}.png?compare=run-a&x=1")

    for name in CHART_NAMES:
        assert f'src="/charts/{name}.png?compare=run-a&amp;x=1"' in page
    assert re.findall(r'alt="([^"]+)"', page)[0] == (
        "Latency p50, p90 and p99 (ms) over time for run-b and run-a")


def test_the_page_loads_nothing_from_other_hosts(source):
    page = render_html(build_report(source, "run-b", compare="run-a"), chart_src)

    assert "<style>" in page
    assert "http" not in page
    assert "<script" not in page


@pytest.mark.parametrize("name", CHART_NAMES)
def test_each_chart_is_a_900_by_360_png_of_one_or_two_runs(source, name):
    report = build_report(source, "run-b", compare="run-a")

    assert png_size(chart_png(report, name)) == (900, 360)
    assert png_size(chart_png(build_report(source, "run-a"), name)) == (900, 360)


@pytest.mark.parametrize("name", CHART_NAMES)
def test_a_chart_of_empty_or_one_point_series_is_still_drawn(name):
    one = make_series("one", 1)

    assert png_size(charts.render(name, [Run("empty", [])])) == (900, 360)
    assert png_size(charts.render(name, [Run("one", one), Run("empty", [])])) == (900, 360)
    assert png_size(charts.render(name, [Run("one", one)])) == (900, 360)


def test_an_unknown_chart_name_is_refused(source):
    with pytest.raises(KeyError):
        chart_png(build_report(source, "run-a"), "pie")


def test_write_report_writes_the_page_and_the_charts_it_links_to(source, tmp_path):
    out = tmp_path / "reports" / report_dir_name("run-b", "run-a")

    index = write_report(source, "run-b", out, compare="run-a")

    assert index == out / "index.html"
    assert sorted(p.name for p in out.iterdir()) == [
        "errors.png", "index.html", "latency.png", "throughput.png", "tokens.png"]
    page = index.read_text(encoding="utf-8")
    for name in CHART_NAMES:
        assert f'<img src="{name}.png"' in page
        assert png_size((out / f"{name}.png").read_bytes()) == (900, 360)


def test_write_report_of_an_unknown_test_writes_nothing(source, tmp_path):
    with pytest.raises(NotFoundError):
        write_report(source, "nope", tmp_path / "out")

    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("test_id", "compare", "expected"), [
    ("run-a", None, "run-a"),
    ("run-a", "run.b_2", "run-a-vs-run.b_2"),
])
def test_a_report_directory_is_named_after_its_tests(test_id, compare, expected):
    assert report_dir_name(test_id, compare) == expected


@pytest.mark.parametrize("test_id", [
    "run:1", "../../etc/passwd", "..", ".hidden", "-rf", "a/b\\c d", "ü" * 10, "x" * 300, "",
])
def test_a_report_directory_name_is_always_safe(test_id, tmp_path):
    name = report_dir_name(test_id, test_id)

    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", name)
    assert len(name) <= 132
    assert (tmp_path / name).resolve().parent == tmp_path.resolve()


def test_ids_that_differ_only_in_unsafe_characters_get_different_directories():
    assert report_dir_name("run:1") != report_dir_name("run_1")
    assert report_dir_name("x" * 200 + "a") != report_dir_name("x" * 200 + "b")


def test_the_index_page_links_every_test_newest_first(source):
    page = render_index_html(source.recent_tests(), lambda test_id: f"/tests/{test_id}")

    assert re.findall(r'<a href="([^"]+)">', page) == ["/tests/run-b", "/tests/run-a"]


def test_the_index_page_of_no_tests_says_so():
    assert "No load tests yet." in render_index_html([], lambda test_id: test_id)


def test_report_module_does_not_import_matplotlib():
    import subprocess
    import sys

    code = ("import sys, shared.metrics.report, services.dashboard.app; "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("name", CHART_NAMES)
def test_a_chart_of_gappy_or_out_of_order_buckets_is_still_drawn(name):
    points = make_series("gappy", 50)
    gappy = [points[0], points[30], replace(points[31], offset_s=30.0004),
             replace(points[2], offset_s=-1.0)]

    assert png_size(charts.render(name, [Run("gappy", gappy)])) == (900, 360)
