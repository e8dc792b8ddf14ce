"""The load-test report: what its page says, which charts it shows, the files it writes."""

from __future__ import annotations

import io
import re
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from shared.errors import NotFoundError
from shared.metrics.loadtest.charts import CHART_NAMES
from shared.metrics.loadtest.model import BaselineChoice, Baselines, Failure, RequestStats
from shared.metrics.loadtest.report import (
    NO_BASELINE,
    build_report,
    chart_png,
    charts_shown,
    render_html,
    report_dir_name,
    write_report,
)
from tests.fake_metrics import START, FakeSource, make_summary

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(2)>'
LONG_ID = "lt:20261121.100000_" + "0123456789abcdefghijklmnopqrstuvwxyz" * 3


@pytest.fixture
def source() -> FakeSource:
    return (FakeSource()
            .add(make_summary("run-a"))
            .add(make_summary("run-b", start=START + timedelta(days=1), qps=44.0,
                              p99_ms=990.0, tokens_per_s=4_500.0, error_rate=0.0025,
                              requests=13_200)))


def chart_src(name: str) -> str:
    return f"{name}.png"


def page_of(source: FakeSource, test_id: str, compare: str | None = None, **options) -> str:
    return render_html(build_report(source, test_id, compare), chart_src, **options)


def cells(page: str, label: str) -> list[str]:
    """The cells of the table row headed ``label``, as HTML fragments."""
    row = re.search(rf"<tr[^>]*><th>{re.escape(label)}</th>(.*?)</tr>", page)
    assert row, f"no row {label!r}"
    return re.findall(r"<td[^>]*>.*?</td>", row.group(1))


def section(page: str, title: str) -> str:
    """The page from the heading ``title`` to the next ``<h2>``."""
    found = re.search(rf"<h2>{re.escape(title)}</h2>(.*?)(?=<h2>|</body>)", page, re.S)
    assert found, f"no section {title!r}"
    return found.group(1)


def verdicts(page: str) -> dict[str, str]:
    """Each results row's label → the class of its change cell."""
    return dict(re.findall(r'<tr><th>([^<]+)</th>(?:<td class=num>[^<]*</td>){2}'
                           r'<td class="num (good|bad|same)">', page))


def png_size(png: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(png)) as image:
        return image.size


# --- the numbers ------------------------------------------------------------------------

def test_the_page_shows_the_tests_results(source):
    page = page_of(source, "run-a")

    assert "<title>Load test run-a</title>" in page
    assert cells(page, "Requests") == ["<td class=num>12,000</td>"]
    assert cells(page, "Error rate") == ["<td class=num>0.50 %</td>"]
    assert cells(page, "QPS, all requests (failures included)") == ["<td class=num>40.0</td>"]
    assert cells(page, "Success QPS (successful requests/s)") == ["<td class=num>39.8</td>"]
    assert cells(page, "p99 latency, successful requests (ms)") == ["<td class=num>900.0</td>"]
    assert cells(page, "Max latency, successful requests (ms)") == [
        "<td class=num>2,400.0</td>"]
    assert cells(page, "Output tokens/s") == ["<td class=num>5,000.0</td>"]
    assert "Change" not in page


def test_every_latency_row_says_it_covers_successful_requests_only(source):
    page = page_of(source, "run-a")

    labels = re.findall(r"<tr><th>([^<]*latency[^<]*)</th>", page, re.I)
    assert len(labels) == 8
    assert all("successful requests" in label for label in labels
               if not label.startswith("Inter-token"))
    # Token timings exist for streamed requests only, and those rows say so.
    streamed = re.findall(r"<tr><th>((?:Time to first|Time per output|Inter-token)[^<]*)</th>",
                          page)
    assert len(streamed) == 9
    assert all("streamed requests" in label for label in streamed)


def test_a_comparison_shows_both_tests_and_the_change_of_each_number(source):
    page = page_of(source, "run-b", "run-a")

    assert "<title>Load test run-b vs run-a</title>" in page
    assert cells(page, "p99 latency, successful requests (ms)") == [
        "<td class=num>990.0</td>", "<td class=num>900.0</td>",
        '<td class="num bad">+10.0 %</td>']
    assert cells(page, "Output tokens/s")[2] == '<td class="num bad">-10.0 %</td>'
    assert cells(page, "p50 latency, successful requests (ms)")[2] == (
        '<td class="num same">+0.0 %</td>')
    # More requests is a different load, not a better result.
    assert cells(page, "Requests")[2] == '<td class="num same">+10.0 %</td>'


def test_the_error_rate_changes_in_percentage_points_even_from_zero():
    source = (FakeSource().add(make_summary("clean", error_rate=0.0, errors=0))
              .add(make_summary("broken", error_rate=0.478, errors=5_736)))

    page = page_of(source, "broken", "clean")

    assert cells(page, "Error rate")[2] == '<td class="num bad">+47.80 pp</td>'
    assert "n/a" not in page


def test_more_total_qps_is_never_called_better_because_it_counts_failures():
    source = (FakeSource().add(make_summary("before", qps=40.0, error_rate=0.0))
              .add(make_summary("after", qps=60.0, error_rate=0.5)))

    page = page_of(source, "after", "before")

    assert cells(page, "QPS, all requests (failures included)")[2] == (
        '<td class="num same">+50.0 %</td>')
    assert cells(page, "Success QPS (successful requests/s)")[2] == (
        '<td class="num bad">-25.0 %</td>')


def test_a_number_that_is_not_known_is_a_dash_and_so_is_its_change():
    source = (FakeSource().add(make_summary("ok"))
              .add(make_summary("all-failed", p50_ms=None, p90_ms=None, p99_ms=None,
                                max_ms=None, mean_ms=None, error_rate=1.0)))

    page = page_of(source, "all-failed", "ok")

    assert cells(page, "p50 latency, successful requests (ms)") == [
        "<td class=num>—</td>", "<td class=num>210.0</td>", '<td class="num same">—</td>']


_rates = st.floats(0.0, 1.0)
_latency = st.floats(0.1, 100_000.0)
_per_s = st.floats(0.0, 10_000.0)


@st.composite
def worse_pair(draw: st.DrawFn) -> tuple[dict[str, float], dict[str, float]]:
    """A baseline and a test that is worse or equal in every outcome; its total QPS and
    request count are anything (failing fast can raise them)."""
    baseline: dict[str, float] = {}
    test: dict[str, float] = {}
    baseline["error_rate"] = draw(_rates)
    test["error_rate"] = draw(st.floats(baseline["error_rate"], 1.0))
    for field in ("p50_ms", "p90_ms", "p99_ms", "mean_ms", "max_ms",
                  *(f"{m}_p{p}_ms" for m in ("ttft", "tpot", "itl") for p in (50, 90, 99))):
        baseline[field] = draw(_latency)
        test[field] = draw(st.floats(baseline[field], 1_000_000.0))
    # Both judged against the same SLOs (a comparison across SLOs is flagged).
    for summary in (baseline, test):
        summary["slo_ttft_ms"] = 200.0
    baseline["goodput"] = draw(_rates)
    test["goodput"] = draw(st.floats(0.0, baseline["goodput"]))
    for field in ("success_qps", "tokens_per_s", "goodput_qps"):
        baseline[field] = draw(_per_s)
        test[field] = draw(st.floats(0.0, baseline[field]))
    for summary in (baseline, test):
        summary["qps"] = draw(_per_s)
        summary["requests"] = draw(st.integers(0, 10**7))
        summary["errors"] = draw(st.integers(0, 10**7))
    return baseline, test


@settings(max_examples=150, deadline=None)
@given(worse_pair())
def test_a_worse_test_is_never_called_better(pair):
    baseline, test = pair
    source = (FakeSource().add(make_summary("baseline", **baseline))
              .add(make_summary("test", start=START + timedelta(hours=1), **test)))

    page = page_of(source, "test", "baseline")

    found = verdicts(page)
    assert len(found) == 24
    assert "good" not in found.values(), {k: v for k, v in found.items() if v == "good"}


def test_goodput_sits_beside_qps_and_says_so_when_the_test_gave_no_slos(source):
    source.add(make_summary("with-slos", slo_ttft_ms=200.0, slo_latency_ms=2_000.0,
                            good_requests=9_000, goodput=0.75, goodput_qps=30.0))

    page = page_of(source, "with-slos")
    plain = page_of(source, "run-a")

    rows = re.findall(r"<tr><th>([^<]+)</th>", section(page, "Results"))
    qps = rows.index("QPS, all requests (failures included)")
    assert rows[qps + 1:qps + 3] == ["Goodput, share of all requests meeting every SLO",
                                     "Goodput QPS (requests/s meeting every SLO)"]
    assert cells(page, "Goodput, share of all requests meeting every SLO") == [
        "<td class=num>75.00 %</td>"]
    assert cells(page, "Goodput QPS (requests/s meeting every SLO)") == [
        "<td class=num>30.0</td>"]
    assert cells(section(page, "Run"), "SLOs") == [
        "<td class=text>TTFT ≤ 200 ms, latency ≤ 2,000 ms</td>"]
    assert cells(plain, "Goodput QPS (requests/s meeting every SLO)") == [
        "<td class=num>no SLOs</td>"]
    assert cells(section(plain, "Run"), "SLOs") == ["<td class=text>none</td>"]


def test_goodput_judged_against_other_slos_is_flagged_and_less_is_worse():
    source = (FakeSource()
              .add(make_summary("loose", slo_latency_ms=5_000.0, goodput=0.9, goodput_qps=36.0))
              .add(make_summary("strict", start=START + timedelta(hours=1),
                                slo_latency_ms=500.0, goodput=0.6, goodput_qps=24.0)))

    page = page_of(source, "strict", "loose")

    assert cells(page, "Goodput, share of all requests meeting every SLO")[2] == (
        '<td class="num bad">-30.00 pp</td>')
    warnings = re.findall(r'<p class="warning">(.*?)</p>', page)
    assert any("different SLOs" in w for w in warnings)
    assert not any("different SLOs" in w
                   for w in re.findall(r'<p class="warning">(.*?)</p>',
                                       page_of(source, "strict", "strict")))


# --- what the run was -------------------------------------------------------------------

def test_the_page_describes_the_run():
    source = FakeSource().add(make_summary("run-a", spawn_rate=2.5, run_time_s=600.0,
                                           users=32))
    page = page_of(source, "run-a")

    run = section(page, "Run")
    for label, shown in [("Model", "llama-3-8b"), ("Server", "vllm"), ("Accelerator", "v5e-8"),
                         ("Users", "32"), ("Spawn rate", "2.5 users/s"),
                         ("Planned run time", "10 min 0 s"), ("Locust version", "2.32.4"),
                         ("Load generator revision", "3f2c1ab"),
                         ("Host", "http://vllm.inference.svc:8000")]:
        assert cells(run, label) == [f"<td class=text>{shown}</td>"]


def test_a_model_guessed_from_the_requests_says_so():
    source = FakeSource().add(make_summary("old", model_inferred=True, finished=False,
                                           run_time_s=None))

    run = section(page_of(source, "old"), "Run")

    assert cells(run, "Model") == ["<td class=text>llama-3-8b (inferred from requests)</td>"]
    assert cells(run, "Planned run time") == ["<td class=text>until stopped</td>"]
    assert "no stop recorded" in cells(run, "Finished")[0]


def test_a_test_that_mixed_models_carries_a_warning():
    source = FakeSource().add(make_summary("mixed", model_count=2,
                                           models_seen="llama-3-8b, gemma-2b"))

    page = page_of(source, "mixed")

    warning = re.findall(r'<p class="warning">(.*?)</p>', page)
    assert len(warning) == 1
    assert "several models (llama-3-8b, gemma-2b)" in warning[0]
    assert page.index('class="warning"') < page.index("<h2>Run</h2>")


def test_a_comparison_shows_each_of_its_warnings_at_the_top():
    source = (FakeSource().add(make_summary("a", server="vllm", accelerator="v5e-8"))
              .add(make_summary("b", server="jetstream", accelerator="v6e-8",
                                model_name="gemma-2b")))

    page = page_of(source, "b", "a")

    warnings = re.findall(r'<p class="warning"><strong>Warning:</strong> (.*?)</p>', page)
    assert warnings == ["different servers: jetstream and vllm",
                        "different models: gemma-2b and llama-3-8b",
                        "different accelerators: v6e-8 and v5e-8"]
    assert page.index('class="warning"') < page.index("<h2>Run</h2>")
    assert '<tr class=differs><th>Server</th>' in page


def test_a_test_compared_with_itself_is_warned_about(source):
    page = page_of(source, "run-a", "run-a")

    assert "<strong>Warning:</strong> the test is compared with itself" in page


# --- Locust's tables --------------------------------------------------------------------

def test_the_page_shows_locusts_table_of_requests_by_name(source):
    requests = section(page_of(source, "run-a"), "Requests by name")

    headers = re.findall(r"<th[^>]*>([^<]*)</th>", requests)
    assert headers == ["Type", "Name", "Requests", "Failures", "Median (ms)", "p90 (ms)",
                       "p99 (ms)", "Max (ms)", "Average (ms)", "Average size (bytes)",
                       "Output tokens"]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", requests)[1:]
    assert [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in rows] == [
        ["POST", "/v1/completions", "10,800", "60", "210.0", "480.0", "900.0", "2,400.0",
         "260.0", "1,830", "1,500,000"],
        ["GET", "/v1/models", "1,200", "0", "4.0", "6.0", "9.5", "12.0", "4.4", "412", "0"],
        ["", "All requests", "12,000", "60", "210.0", "480.0", "900.0", "2,400.0", "260.0",
         "—", "1,500,000"],
    ]


def test_a_comparison_shows_the_request_and_failure_tables_of_both_tests(source):
    page = page_of(source, "run-b", "run-a")

    for title in ("Requests by name", "Failures"):
        part = section(page, title)
        assert re.findall(r"<h3>(.*?)</h3>", part) == [
            "Test <code>run-b</code>", "Baseline <code>run-a</code>"]
        assert part.count('<div class="scroll"><table') == 2


def test_the_page_lists_each_failure_and_how_often_it_happened():
    failures = [Failure("t", "POST", "/v1/completions", "HTTPError('503')", 40),
                Failure("t", "GET", "/v1/models", "ConnectionResetError(104)", 2)]
    source = FakeSource().add(make_summary("t", errors=42), failures=failures)

    part = section(page_of(source, "t"), "Failures")

    assert re.findall(r"<tr>(.*?)</tr>", part)[1:] == [
        "<td class=text>POST</td><td class=name>/v1/completions</td>"
        "<td class=msg>HTTPError(&#x27;503&#x27;)</td><td class=num>40</td>",
        "<td class=text>GET</td><td class=name>/v1/models</td>"
        "<td class=msg>ConnectionResetError(104)</td><td class=num>2</td>"]


def test_a_test_without_failures_says_so():
    source = FakeSource().add(make_summary("clean", errors=0, error_rate=0.0))

    assert "<p>No failures.</p>" in section(page_of(source, "clean"), "Failures")


def test_long_failure_messages_may_wrap_anywhere_and_tables_scroll_sideways(source):
    page = page_of(source, "run-b", "run-a")

    assert re.search(r"td\.msg\{[^}]*overflow-wrap:anywhere", page)
    assert re.search(r"\.scroll\{[^}]*overflow-x:auto", page)
    assert re.search(r"img\{[^}]*max-width:100%", page)
    tables = page.count("<table")
    assert tables == page.count('<div class="scroll"><table') == 6


# --- charts on the page ----------------------------------------------------------------

def test_the_page_shows_each_chart_with_its_src_size_and_alt_text(source):
    page = render_html(build_report(source, "run-b", compare="run-a"),
                       lambda name: f"/charts/{name}.png?compare=run-a&x=1")

    srcs = re.findall(r'<img src="([^"]+)"', page)
    assert srcs == [f"/charts/{name}.png?compare=run-a&amp;x=1"
                    for name in ("latency", "throughput", "errors", "tokens", "users")]
    assert page.count('width="900" height="420"') == 5
    assert re.findall(r'alt="([^"]+)"', page)[0] == (
        "Latency p50, p90 and p99 of successful requests (ms) over time for run-b and run-a")


def test_token_timings_are_charted_only_for_a_streamed_test(source):
    source.add(make_summary("streamed", **{f"{m}_p{p}_ms": v * p for m, v in (
        ("ttft", 2.0), ("tpot", 0.2), ("itl", 0.1)) for p in (50, 90, 99)}))
    source.add(make_summary("one-token", ttft_p50_ms=80.0, ttft_p90_ms=150.0))

    plain = page_of(source, "run-a")
    streamed = page_of(source, "streamed")

    assert 'src="ttft.png"' not in plain
    assert 'src="tpot.png"' not in plain
    assert "Time to first token and time per output token: not streamed" in plain
    assert cells(plain, "Time to first token p50, streamed requests (ms)") == [
        "<td class=num>not streamed</td>"]
    assert 'src="ttft.png"' in streamed
    assert "not streamed" not in streamed
    assert cells(streamed, "Time to first token p90, streamed requests (ms)") == [
        "<td class=num>180.0</td>"]
    assert cells(streamed, "Time per output token p99, streamed requests (ms)") == [
        "<td class=num>19.8</td>"]
    assert 'src="tpot.png"' in streamed
    # Streamed, but never two tokens: a time to first token and no time per token.
    one_token = page_of(source, "one-token")
    assert 'src="ttft.png"' in one_token
    assert 'src="tpot.png"' not in one_token
    assert "Time per output token: no streamed request of this test generated two" in one_token


def test_the_page_says_which_test_each_chart_label_stands_for(source):
    source.add(make_summary(LONG_ID))

    compared = page_of(source, "run-b", "run-a")
    alone = page_of(source, LONG_ID)

    assert ("In the charts, “test” is <code>run-b</code> and “baseline” is "
            "<code>run-a</code>.") in compared
    assert f"” is <code>{LONG_ID}</code>." in alone
    assert "In the charts" not in page_of(source, "run-a")


def test_the_page_says_partial_buckets_are_left_out_of_rate_charts(source):
    page = page_of(source, "run-a")

    assert ("The throughput and output tokens charts leave out the partial first and last "
            "seconds") in page
    assert "hollow markers" not in page


def test_a_test_of_only_partial_buckets_says_they_are_drawn_hollow():
    source = FakeSource().add(make_summary("blip", duration_s=1.5))

    page = page_of(source, "blip")

    assert "Every second of blip is partial" in page
    assert "hollow markers" in page


def test_a_short_test_is_charted_per_second_and_a_long_one_per_minute():
    source = (FakeSource().add(make_summary("short", duration_s=599.0))
              .add(make_summary("long", duration_s=3_600.0))
              .add(make_summary("longer", duration_s=7_200.0)))

    assert build_report(source, "short").per == "second"
    assert len(build_report(source, "short").data.series) == 599
    assert build_report(source, "long").per == "minute"
    assert len(build_report(source, "long").data.series) == 60
    assert build_report(source, "long", compare="longer").per == "minute"
    # One short test is enough: per minute would leave it a handful of points.
    compared = build_report(source, "long", compare="short")
    assert compared.per == "second"
    assert compared.baseline is not None
    assert (len(compared.data.series), len(compared.baseline.series)) == (3_600, 599)
    assert "Charts per second" in render_html(compared, chart_src)


# --- the dashboard's additions ----------------------------------------------------------

def test_a_dashboard_page_links_back_to_the_list_and_an_offline_one_does_not(source):
    report = build_report(source, "run-a")

    dashboard = render_html(report, chart_src, index_href="/")
    offline = render_html(report, chart_src)

    assert '<p class=back><a href="/">← All load tests</a></p>' in dashboard
    assert "All load tests" not in offline


def test_the_baseline_picker_is_a_get_form_with_the_chosen_baseline_selected(source):
    source.add(make_summary("run-c", start=START + timedelta(days=2)))
    source.add(make_summary("other-server", server="jetstream",
                            start=START + timedelta(days=3)))
    report = build_report(source, "run-b", "run-a")

    page = render_html(report, chart_src, baselines=source.baselines("run-b"),
                       form_action="/tests/run-b")

    form = re.search(r'<form class="baseline" method="get" action="/tests/run-b">(.*?)</form>',
                     page)
    assert form
    assert '<select id="compare" name="compare">' in form.group(1)
    assert re.findall(r'<optgroup label="([^"]+)">', form.group(1)) == [
        "Same model and server", "Other tests"]
    options = re.findall(r'<option value="([^"]*)"( selected)?>([^<]*)</option>', form.group(1))
    assert [(value, selected) for value, selected, _ in options] == [
        ("none", ""), ("run-c", ""), ("run-a", " selected"), ("other-server", "")]
    assert options[2][2] == ("run-a — llama-3-8b, vllm, 2025-03-01 12:00 "
                             "(previous run of the same model and server)")
    assert '<button type="submit">Compare</button>' in form.group(1)


def test_the_picker_selects_none_without_a_baseline_and_offers_the_baseline_shown(source):
    nothing = Baselines(None, ())
    alone = render_html(build_report(source, "run-b"), chart_src, baselines=nothing,
                        form_action="/tests/run-b")
    other = render_html(build_report(source, "run-b", "run-a"), chart_src, baselines=nothing,
                        form_action="/tests/run-b")

    assert f'<option value="{NO_BASELINE}" selected>none</option>' in alone
    assert '<option value="run-a" selected>' in other


def test_the_picker_never_offers_the_test_itself(source):
    choices = Baselines(None, (BaselineChoice("run-b", "m", "s", START, alike=True),))

    page = render_html(build_report(source, "run-b"), chart_src, baselines=choices,
                       form_action="/tests/run-b")

    assert '<option value="run-b"' not in page


def test_an_offline_report_has_no_form(source):
    assert "<form" not in page_of(source, "run-b", "run-a")


def test_a_comparison_with_the_previous_run_says_so(source):
    source.add(make_summary("run-c", start=START + timedelta(days=2)))
    offered = source.baselines("run-c")

    default = page_of(source, "run-c", "run-b", baselines=offered)
    chosen = page_of(source, "run-c", "run-a", baselines=offered)

    assert offered.default == "run-b"
    assert "Compared with the previous run of the same model and server." in default
    assert "previous run" not in chosen
    assert "Compared with <code>run-a</code>." in chosen


# --- safety ------------------------------------------------------------------------------

def test_text_from_the_data_is_escaped_everywhere_it_appears():
    evil_id = 'x"><script>alert(1)</script>'
    source = (FakeSource()
              .add(make_summary(evil_id, model_name=IMG, server="a&b", accelerator=SCRIPT,
                                host=SCRIPT, locust_version=IMG, loadgen_revision=SCRIPT,
                                model_count=2, models_seen=SCRIPT),
                   requests=[RequestStats(evil_id, SCRIPT, IMG, 10, 1, 1.0, 2.0, 3.0, 4.0, 5.0,
                                          6.0, 7)],
                   failures=[Failure(evil_id, IMG, SCRIPT, f"Error({SCRIPT}{IMG})", 1)])
              .add(make_summary("ok")))

    page = render_html(build_report(source, "ok", compare=evil_id), chart_src,
                       index_href="/", baselines=source.baselines("ok"),
                       form_action=f"/tests/{IMG}")
    lone = render_html(build_report(source, evil_id), chart_src)

    for html in (page, lone):
        assert "<script>" not in html
        assert "<img src=x" not in html
        assert "&lt;img src=x onerror=alert(2)&gt;" in html
    assert "a&amp;b" in page
    assert "x&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'action="/tests/&quot;&gt;&lt;img src=x onerror=alert(2)&gt;"' in page


def test_the_page_loads_nothing_from_other_hosts_and_runs_no_script(source):
    page = render_html(build_report(source, "run-b", compare="run-a"), chart_src,
                       index_href="/", baselines=source.baselines("run-b"),
                       form_action="/tests/run-b")

    assert "<style>" in page
    assert "http" not in page.replace("http://vllm.inference.svc:8000", "")
    assert "<script" not in page
    assert " on" not in re.sub(r">[^<]*<", "><", page)  # no inline event handlers


# --- files ---------------------------------------------------------------------------------

def test_each_chart_of_a_report_is_a_900_by_420_png(source):
    report = build_report(source, "run-b", compare="run-a")

    for name in CHART_NAMES:
        assert png_size(chart_png(report, name)) == (900, 420)


def test_an_unknown_chart_name_is_refused(source):
    with pytest.raises(KeyError):
        chart_png(build_report(source, "run-a"), "pie")


def test_write_report_writes_the_page_and_the_charts_it_shows(source, tmp_path):
    out = tmp_path / "reports" / report_dir_name("run-b", "run-a")

    index = write_report(source, "run-b", out, compare="run-a")

    assert index == out / "index.html"
    assert sorted(p.name for p in out.iterdir()) == [
        "errors.png", "index.html", "latency.png", "throughput.png", "tokens.png",
        "users.png"]
    page = index.read_text(encoding="utf-8")
    for name in charts_shown(build_report(source, "run-b", "run-a")):
        assert f'<img src="{name}.png"' in page
        assert png_size((out / f"{name}.png").read_bytes()) == (900, 420)


def test_a_report_of_a_streamed_test_writes_its_time_to_first_token_chart(tmp_path):
    source = FakeSource().add(make_summary("s", ttft_p50_ms=80.0, ttft_p90_ms=120.0))

    write_report(source, "s", tmp_path)

    assert (tmp_path / "ttft.png").exists()
    assert '<img src="ttft.png"' in (tmp_path / "index.html").read_text(encoding="utf-8")


def test_write_report_of_an_unknown_test_writes_nothing(source, tmp_path):
    with pytest.raises(NotFoundError):
        write_report(source, "nope", tmp_path / "out")

    assert not (tmp_path / "out").exists()


def test_an_unknown_test_or_baseline_is_not_found(source):
    with pytest.raises(NotFoundError):
        build_report(source, "nope")
    with pytest.raises(NotFoundError):
        build_report(source, "run-a", compare="nope")


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


def test_report_module_does_not_import_matplotlib():
    import subprocess
    import sys

    code = ("import sys, shared.metrics.loadtest.report, services.dashboard.app; "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "False"


def test_a_fake_source_answers_only_for_the_ids_it_knows(source):
    assert set(source.summaries(["run-a", "nope"])) == {"run-a"}
    assert set(source.series(["run-a", "nope"], per="minute")) == {"run-a"}
    assert source.baselines("run-b").default == "run-a"
    assert source.baselines("run-a").default is None
    assert source.baselines("nope") == Baselines(None, tuple(
        BaselineChoice(s.test_id, s.model_name, s.server, s.started, alike=False)
        for s in source.recent_tests()))
    with pytest.raises(NotFoundError):
        source.summary("nope")
    assert replace(source.summary("run-a")).success_qps == pytest.approx(39.8)
