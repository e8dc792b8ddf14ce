"""The report's charts: what each one draws, and that none of its text collides.

The layout checks measure the figure itself: after drawing, matplotlib's renderer
gives the box of every title, axis label, tick label, legend and annotation, and no
two of them may intersect or leave the figure.
"""

from __future__ import annotations

import io
import math
from dataclasses import replace

import pytest
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.text import Text
from matplotlib.transforms import Bbox
from PIL import Image

from shared.metrics.chart_size import HEIGHT_PX, WIDTH_PX
from shared.metrics.loadtest import charts
from shared.metrics.loadtest.charts import CHART_NAMES, LABEL_MAX, Run, run_labels
from shared.metrics.loadtest.model import SeriesPoint
from tests.fake_metrics import make_series

LONG_ID = "lt:20261121.100000_" + "0123456789abcdefghijklmnopqrstuvwxyz" * 3
# Boxes closer than this are touching, not overlapping.
TOLERANCE_PX = 0.5


def with_outliers(points: list[SeriesPoint], *at: int) -> list[SeriesPoint]:
    return [replace(p, p99_ms=5_031.0, max_ms=6_000.0, ttft_p90_ms=4_000.0) if i in at else p
            for i, p in enumerate(points)]


def huge(points: list[SeriesPoint]) -> list[SeriesPoint]:
    """Numbers with many digits, for the widest tick labels."""
    return [replace(p, qps=p.qps * 1e5, success_qps=p.success_qps * 1e5,
                    tokens_per_s=p.tokens_per_s * 1e4, users=(p.users or 0) * 10_000,
                    errors=p.errors * 100_000, p99_ms=(p.p99_ms or 0) * 1e3)
            for p in points]


def compared(test: list[SeriesPoint], baseline: list[SeriesPoint]) -> list[Run]:
    return [Run(label, points) for label, points in zip(run_labels([LONG_ID, LONG_ID + "b"]),
                                                        (test, baseline), strict=True)]


SCENARIOS = {
    "single": lambda: [Run(run_labels([LONG_ID])[0], make_series(LONG_ID, 300, streamed=True))],
    "compared": lambda: compared(make_series("a", 300, streamed=True),
                                 make_series("b", 280, scale=1.3)),
    "outliers": lambda: compared(with_outliers(make_series("a", 120, streamed=True), 40, 41),
                                 make_series("b", 120, scale=1.2, streamed=True)),
    "per minute": lambda: compared(make_series("a", 60, step_s=60.0),
                                   make_series("b", 45, step_s=60.0)),
    "huge numbers": lambda: compared(huge(make_series("a", 100)), huge(make_series("b", 90))),
    "no data": lambda: compared([], []),
    "one run without data": lambda: compared(make_series("a", 50), []),
    "one point": lambda: [Run("one", make_series("one", 1, streamed=True))],
    "all partial": lambda: compared(make_series("a", 2), make_series("b", 2)),
}


def text_boxes(fig: Figure) -> list[tuple[str, Bbox]]:
    """Every piece of text the figure draws, with its box in pixels (legends whole)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    found: list[tuple[str, Bbox]] = []

    def add(what: str, text: Text) -> None:
        if text.get_visible() and text.get_text().strip():
            found.append((f"{what} {text.get_text()!r}", text.get_window_extent(renderer)))

    for number, ax in enumerate(fig.axes):
        for child in ax.get_children():
            if isinstance(child, Text):
                add(f"axes {number} text", child)
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            if not axis.get_visible():
                continue
            add(f"{name} label", axis.label)
            low, high = sorted(axis.get_view_interval())
            span = (high - low) or 1.0
            locs = axis.get_majorticklocs()
            for loc, tick in zip(locs, axis.get_major_ticks(len(locs)), strict=False):
                if low - 1e-9 * span <= loc <= high + 1e-9 * span:
                    add(f"{name} tick", tick.label1)
                    add(f"{name} tick", tick.label2)
    for legend in fig.legends:
        assert isinstance(legend, Legend)
        found.append(("legend", legend.get_window_extent(renderer)))
    return found


def overlap(a: Bbox, b: Bbox) -> bool:
    width = min(a.x1, b.x1) - max(a.x0, b.x0)
    height = min(a.y1, b.y1) - max(a.y0, b.y0)
    return width > TOLERANCE_PX and height > TOLERANCE_PX


def legend_texts(fig: Figure) -> list[str]:
    return [text.get_text() for legend in fig.legends for text in legend.get_texts()]


def all_text(fig: Figure) -> str:
    fig.canvas.draw()
    return " ".join(text for text in (t.get_text() for t in fig.findobj(Text)) if text)


def lines_of(fig: Figure, colour: str, style: str = "-") -> list:
    return [line for line in fig.axes[0].get_lines()
            if line.get_color() == colour and line.get_linestyle() == style
            and line.get_marker() != "^"]


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("name", CHART_NAMES)
def test_no_chart_text_overlaps_other_text_or_leaves_the_figure(name, scenario):
    fig = charts.figure(name, SCENARIOS[scenario]())
    width, height = fig.canvas.get_width_height()

    boxes = text_boxes(fig)

    assert any(what.startswith("legend") for what, _ in boxes)
    for what, box in boxes:
        inside = Bbox.from_extents(-TOLERANCE_PX, -TOLERANCE_PX, width + TOLERANCE_PX,
                                   height + TOLERANCE_PX)
        assert inside.contains(box.x0, box.y0), f"{what} leaves the figure"
        assert inside.contains(box.x1, box.y1), f"{what} leaves the figure"
    collisions = [f"{a} / {b}" for i, (a, box_a) in enumerate(boxes)
                  for b, box_b in boxes[i + 1:] if overlap(box_a, box_b)]
    assert not collisions


@pytest.mark.parametrize("name", CHART_NAMES)
def test_each_chart_is_a_png_of_the_advertised_size(name):
    png = charts.render(name, SCENARIOS["compared"]())

    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    with Image.open(io.BytesIO(png)) as image:
        assert image.size == (WIDTH_PX, HEIGHT_PX) == (900, 420)


def test_two_runs_are_labelled_test_and_baseline():
    assert run_labels([LONG_ID, "run-a"]) == ["test", "baseline"]
    assert run_labels(["same", "same"]) == ["test", "baseline"]


def test_a_lone_run_keeps_a_short_id_and_a_long_one_is_shortened_in_the_middle():
    assert run_labels(["run-a"]) == ["run-a"]
    assert run_labels(["x" * LABEL_MAX]) == ["x" * LABEL_MAX]

    (label,) = run_labels([LONG_ID])

    assert len(label) <= LABEL_MAX
    assert label.startswith(LONG_ID[:8])
    assert label.endswith(LONG_ID[-8:])
    assert "…" in label


def test_many_runs_whose_short_labels_collide_are_numbered():
    ids = ["lt:2026" + "a" * 40 + "-end", "lt:2026" + "b" * 40 + "-end", "other"]
    ids[1] = ids[0][:20] + "zz" + ids[0][22:]

    labels = run_labels(ids)

    assert len(set(labels)) == 3
    assert all(len(label) <= LABEL_MAX for label in labels)


def test_the_legend_has_one_entry_per_run_and_one_per_line_style():
    fig = charts.latency(SCENARIOS["compared"]())

    assert legend_texts(fig) == ["test", "baseline", "p50", "p90", "p99"]


@pytest.mark.parametrize("name", CHART_NAMES)
def test_no_chart_repeats_the_test_ids_in_its_text(name):
    runs = [Run(run_labels([LONG_ID])[0], make_series(LONG_ID, 30, streamed=True))]

    assert LONG_ID[:30] not in all_text(charts.figure(name, runs))


def test_throughput_shows_successful_and_all_requests_per_second():
    points = make_series("a", 20)
    fig = charts.throughput([Run("a", points)])

    (successful,) = lines_of(fig, charts.COLOURS[0], "-")
    (everything,) = lines_of(fig, charts.COLOURS[0], "--")
    assert list(successful.get_ydata()) == [p.success_qps for p in points[1:-1]]
    assert list(everything.get_ydata()) == [p.qps for p in points[1:-1]]
    assert legend_texts(fig) == ["a", "successful", "all, failures included"]


@pytest.mark.parametrize("name", ["throughput", "tokens"])
def test_rate_charts_leave_out_the_partial_first_and_last_buckets(name):
    points = make_series("a", 20)
    fig = charts.figure(name, [Run("a", points)])

    (line, *_) = lines_of(fig, charts.COLOURS[0])
    assert list(line.get_xdata()) == [p.offset_s for p in points[1:-1]]


@pytest.mark.parametrize("name", ["throughput", "tokens"])
def test_a_test_of_only_partial_buckets_is_still_drawn_with_hollow_markers(name):
    points = make_series("a", 2)
    fig = charts.figure(name, [Run("a", points)])

    (line, *_) = lines_of(fig, charts.COLOURS[0])
    assert list(line.get_xdata()) == [0.0, 1.0]
    assert line.get_fillstyle() == "none"


@pytest.mark.parametrize("name", ["errors", "users", "latency"])
def test_counts_and_latencies_keep_the_partial_buckets(name):
    points = make_series("a", 20)
    fig = charts.figure(name, [Run("a", points)])

    plotted = {x for line in fig.axes[-1].get_lines() for x in line.get_xdata()}
    assert {0.0, 19.0} <= plotted


def test_a_percentile_without_successful_requests_is_a_gap_not_a_zero():
    points = make_series("a", 20)
    points[5] = replace(points[5], p50_ms=None, p90_ms=None, p99_ms=None)

    fig = charts.latency([Run("a", points)])

    for line in lines_of(fig, charts.COLOURS[0], ":") + lines_of(fig, charts.COLOURS[0], "-"):
        assert math.isnan(line.get_ydata()[5])


def test_an_outlier_does_not_flatten_the_latency_axis():
    points = with_outliers(make_series("a", 200), 50, 51, 52)

    fig = charts.latency([Run("a", points)])

    ax = fig.axes[0]
    top = ax.get_ylim()[1]
    assert top < 2_000  # the other p99s are about 1,000 ms
    markers = [line for line in ax.get_lines() if line.get_marker() == "^"]
    assert [list(m.get_xdata()) for m in markers] == [[50.0, 51.0, 52.0]]
    assert all(y == top for y in markers[0].get_ydata())
    assert ax.get_title(loc="right") == f"3 points above {top:,.0f} ms, max 5,031 ms"


def test_a_latency_chart_without_outliers_is_not_clipped():
    fig = charts.latency([Run("a", make_series("a", 200))])

    assert fig.axes[0].get_title(loc="right") == ""
    assert fig.axes[0].get_ylim()[1] >= max(p.p99_ms for p in make_series("a", 200))


def test_a_chart_of_a_test_without_errors_says_no_errors():
    points = [replace(p, errors=0) for p in make_series("a", 30)]

    fig = charts.errors([Run("a", points)])

    assert [t.get_text() for t in fig.axes[0].texts] == ["no errors"]
    assert len(fig.axes) == 1  # no error-rate axis running 0..0.05
    assert fig.axes[0].get_yticks().size == 0


def test_the_errors_chart_counts_failures_per_second_or_minute():
    per_second = charts.errors([Run("a", make_series("a", 30))])
    per_minute = charts.errors([Run("a", make_series("a", 30, step_s=60.0))])

    assert per_second.axes[0].get_ylabel() == "Failures per second"
    assert per_minute.axes[0].get_ylabel() == "Failures per minute"
    assert per_second.axes[1].get_ylabel() == "Error rate (%)"


def test_time_to_first_token_of_a_test_that_did_not_stream_says_so():
    fig = charts.ttft([Run("a", make_series("a", 30))])

    assert [t.get_text() for t in fig.axes[0].texts] == ["not streamed"]


def test_time_to_first_token_of_a_streamed_test_shows_p50_p90_and_p99():
    points = make_series("a", 30, streamed=True)

    fig = charts.ttft([Run("a", points)])

    (p50,) = lines_of(fig, charts.COLOURS[0], ":")
    assert list(p50.get_ydata()) == [p.ttft_p50_ms for p in points]
    (p99,) = lines_of(fig, charts.COLOURS[0], "-")
    assert list(p99.get_ydata()) == [p.ttft_p99_ms for p in points]
    assert legend_texts(fig) == ["a", "p50", "p90", "p99"]


def test_time_per_output_token_of_a_streamed_test_shows_p50_p90_and_p99():
    points = make_series("a", 30, streamed=True)

    fig = charts.tpot([Run("a", points)])

    (p90,) = lines_of(fig, charts.COLOURS[0], "--")
    assert list(p90.get_ydata()) == [p.tpot_p90_ms for p in points]
    assert legend_texts(fig) == ["a", "p50", "p90", "p99"]
    assert fig.axes[0].get_title(loc="left") == "Time per output token, streamed requests"


def test_time_per_output_token_of_a_test_that_did_not_stream_says_so():
    fig = charts.tpot([Run("a", make_series("a", 30))])

    assert [t.get_text() for t in fig.axes[0].texts] == ["not streamed"]


def test_goodput_is_drawn_dotted_on_the_throughput_chart_only_for_a_test_with_slos():
    points = make_series("a", 30, goodput=True)

    with_slos = charts.throughput([Run("a", points)])
    without = charts.throughput([Run("a", make_series("a", 30))])

    (good,) = lines_of(with_slos, charts.COLOURS[0], ":")
    whole = [p for p in points if not p.partial]
    assert list(good.get_ydata()) == [p.goodput_qps for p in whole]
    assert "meeting every SLO (goodput)" in legend_texts(with_slos)
    assert lines_of(without, charts.COLOURS[0], ":") == []
    assert "meeting every SLO (goodput)" not in legend_texts(without)


def test_the_users_chart_follows_the_users_running():
    points = make_series("a", 30, users=64)

    fig = charts.users([Run("a", points)])

    (line,) = lines_of(fig, charts.COLOURS[0])
    assert list(line.get_ydata())[:3] == [8, 16, 24]
    assert max(line.get_ydata()) == 64


def test_a_chart_without_data_says_so_and_keeps_the_runs_in_its_legend():
    fig = charts.latency(compared([], []))

    assert [t.get_text() for t in fig.axes[0].texts] == ["no data"]
    assert legend_texts(fig) == ["test (no data)", "baseline (no data)"]


def test_an_unknown_chart_name_is_refused():
    with pytest.raises(KeyError):
        charts.render("pie", [])


@pytest.mark.parametrize("name", CHART_NAMES)
def test_a_chart_of_gappy_or_out_of_order_buckets_is_still_drawn(name):
    points = make_series("gappy", 50)
    gappy = [points[0], points[30], replace(points[31], offset_s=30.0004),
             replace(points[2], offset_s=-1.0)]

    assert charts.render(name, [Run("gappy", gappy)]).startswith(b"\x89PNG")
