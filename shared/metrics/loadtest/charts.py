"""PNG charts of a load test's time series, alone or overlaid on a baseline run.

matplotlib is imported inside the drawing functions, not at module level: the CLI and
the metrics functions import ``shared.metrics`` on every start and must not pay for
it (about half a second), and only report paths draw. Each chart is its own
``matplotlib.figure.Figure`` on an Agg canvas in memory; nothing touches pyplot's
global figure registry, so request threads of the dashboard never share a figure.
The chart functions return the figure (so tests can measure where its text landed);
:func:`render` turns one into PNG bytes.

What the charts promise a reader:

* runs are overlaid by the seconds since each test's start (``SeriesPoint.offset_s``),
  so two tests that ran on different days line up. The test is blue and its baseline
  orange, a pair that stays distinct for colour-blind readers; line styles tell the
  measures apart (p50 dotted, p90 dashed, p99 solid), with one legend entry per run
  and one per style;
* labels are short (:func:`run_labels`) and the legend sits below the plot, so it
  never runs into the title or the axes; the full test ids are the page's business;
* rate charts (throughput, output tokens) leave out the partial first and last
  buckets: a test covers them only partly, so their counts would draw a ramp that did
  not happen. A test whose every bucket is partial (a second or two long) is still
  drawn, with hollow markers;
* one outlier does not flatten a latency chart: the axis stops at 1.2 times the 95th
  percentile of the plotted p99s, and points above it sit on the top edge as
  triangles, counted in the top-right corner;
* a missing percentile (no successful request in the bucket) is a gap, not a zero;
  a chart with nothing to show says so in words ("no errors", "not streamed");
* goodput (requests/s within every SLO of the test) is drawn on the throughput chart,
  dotted, beside the successful and all requests it is a part of.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from shared.metrics.chart_size import DPI, HEIGHT_IN, WIDTH_IN
from shared.metrics.loadtest.model import SeriesPoint

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["CHART_NAMES", "LABEL_MAX", "Run", "errors",
           "figure", "latency", "render", "run_labels", "throughput", "tokens", "tpot",
           "ttft", "users"]

COLOURS = ("#1f77b4", "#ff7f0e")
#: The longest legend label of a run.
LABEL_MAX = 24
# Fewer points than this get markers, so a one-bucket run is still visible.
_MARKER_BELOW = 30
_X_LABEL = "Time since test start (s)"
_KEY_COLOUR = "#57606a"
_NOTE_COLOUR = "#59636e"
# The latency axis stops at this multiple of the 95th percentile of the plotted p99s.
_CEILING_FACTOR, _CEILING_PERCENTILE = 1.2, 95.0


@dataclass(frozen=True)
class Run:
    """One test's series and the short label its legend entry carries."""

    label: str
    points: Sequence[SeriesPoint]


Runs = Sequence[Run]
#: Line styles: solid, dashed, dotted.
Style = Literal["-", "--", ":"]


def run_labels(test_ids: Sequence[str]) -> list[str]:
    """Short legend labels for the runs of a chart, in order.

    Two runs are a comparison: ``test`` and ``baseline`` (the page says which ids those
    are). A lone run keeps its id when it fits in :data:`LABEL_MAX` characters and is
    otherwise shortened in the middle (``lt:20261121…wxyzABCDEFGH``), where generated ids
    repeat themselves least. More runs get shortened ids, numbered if two collide.
    """
    if len(test_ids) == 2:
        return ["test", "baseline"]
    labels = [_shorten(test_id) for test_id in test_ids]
    if len(set(labels)) < len(labels):
        labels = [f"{i + 1}: {_shorten(test_id, LABEL_MAX - 3)}"
                  for i, test_id in enumerate(test_ids)]
    return labels


def _shorten(text: str, limit: int = LABEL_MAX) -> str:
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return f"{text[:head]}…{text[len(text) - (limit - 1 - head):]}"


# --- the charts -------------------------------------------------------------------

_Measure = tuple[str, str, Style]  # field, legend label, line style
_PERCENTILES: tuple[_Measure, ...] = (("p50_ms", "p50", ":"), ("p90_ms", "p90", "--"),
                                      ("p99_ms", "p99", "-"))
_TTFT: tuple[_Measure, ...] = (("ttft_p50_ms", "p50", ":"), ("ttft_p90_ms", "p90", "--"),
                               ("ttft_p99_ms", "p99", "-"))
_TPOT: tuple[_Measure, ...] = (("tpot_p50_ms", "p50", ":"), ("tpot_p90_ms", "p90", "--"),
                               ("tpot_p99_ms", "p99", "-"))


def latency(runs: Runs) -> Figure:
    """Response time percentiles of successful requests (ms), outliers clipped."""
    return _percentile_chart(runs, "Latency of successful requests", _PERCENTILES,
                             ceiling_from="p99_ms", empty="no data")


def ttft(runs: Runs) -> Figure:
    """Time to first token (p50, p90, p99) of streamed requests; "not streamed" without
    any."""
    streamed = any(p.ttft_p50_ms is not None for run in runs for p in run.points)
    return _percentile_chart(runs, "Time to first token, streamed requests", _TTFT,
                             ceiling_from="ttft_p99_ms",
                             empty="not streamed" if _has_points(runs) and not streamed
                             else "no data", force_empty=not streamed)


def tpot(runs: Runs) -> Figure:
    """Time per output token (p50, p90, p99) of streamed requests of two tokens or more;
    "not streamed" without any."""
    streamed = any(p.tpot_p50_ms is not None for run in runs for p in run.points)
    return _percentile_chart(runs, "Time per output token, streamed requests", _TPOT,
                             ceiling_from="tpot_p99_ms",
                             empty="not streamed" if _has_points(runs) and not streamed
                             else "no data", force_empty=not streamed)


def throughput(runs: Runs) -> Figure:
    """Successful requests per second (solid) next to all requests per second (dashed)
    and, for a test with SLOs, the requests per second that met them all (dotted:
    goodput); partial buckets left out."""
    chart = _Chart("Throughput", "Requests/s")
    if not _has_points(runs):
        return chart.empty(runs, "no data")
    with_slos = False
    for index, run in enumerate(runs):
        points, hollow = _whole_buckets(run)
        xs = [p.offset_s for p in points]
        chart.line(xs, [p.success_qps for p in points], index, "-", hollow)
        chart.line(xs, [p.qps for p in points], index, "--", hollow)
        if any(p.goodput_qps is not None for p in points):
            with_slos = True
            chart.line(xs, [p.goodput_qps for p in points], index, ":", hollow)
    styles: list[tuple[Style, str]] = [("-", "successful"), ("--", "all, failures included")]
    if with_slos:
        styles.append((":", "meeting every SLO (goodput)"))
    return chart.finish(runs, styles)


def tokens(runs: Runs) -> Figure:
    """Output tokens generated per second; partial buckets left out."""
    chart = _Chart("Output tokens", "Output tokens/s")
    if not _has_points(runs):
        return chart.empty(runs, "no data")
    for index, run in enumerate(runs):
        points, hollow = _whole_buckets(run)
        chart.line([p.offset_s for p in points], [p.tokens_per_s for p in points], index,
                   "-", hollow)
    return chart.finish(runs, [])


def users(runs: Runs) -> Figure:
    """Users running over time (partial buckets kept: a count, not a rate)."""
    chart = _Chart("Users", "Users")
    if not _has_points(runs):
        return chart.empty(runs, "no data")
    if all(p.users is None for run in runs for p in run.points):
        return chart.empty(runs, "no user counts")
    for index, run in enumerate(runs):
        chart.line(_offsets(run.points), [p.users for p in run.points], index, "-",
                   _all_partial(run))
    chart.integer_y()
    return chart.finish(runs, [])


def errors(runs: Runs) -> Figure:
    """Failed requests per bucket as filled steps, the error rate (%) dashed on a second
    axis; "no errors" when no run failed a request.

    One step patch per run, not one bar per bucket: 600 bars take seconds to draw. The
    rate line is what to compare when the runs sent different numbers of requests.
    """
    width = _bucket_width(runs)
    unit = {1.0: "second", 60.0: "minute"}.get(width, "bucket")
    chart = _Chart("Errors", f"Failures per {unit}")
    if not _has_points(runs):
        return chart.empty(runs, "no data")
    if not any(p.errors for run in runs for p in run.points):
        return chart.empty(runs, "no errors" if len(runs) == 1 else "no errors in any run")
    rate_ax = chart.ax.twinx()
    rate_ax.set_ylabel("Error rate (%)")
    _plain_ticks(rate_ax)
    top_rate = 0.0
    for index, run in enumerate(runs):
        if not run.points:
            continue
        counts = _per_bucket(run, width)
        # The test filled, its baseline as an outline on top: overlaps stay readable.
        chart.ax.stairs(counts, [i * width for i in range(len(counts) + 1)],
                        fill=index == 0, color=_colour(index),
                        alpha=0.45 if index == 0 else 1.0, linewidth=1.5)
        rates = [100.0 * p.errors / p.requests if p.requests else math.nan
                 for p in run.points]
        top_rate = max([top_rate, *(r for r in rates if not math.isnan(r))])
        rate_ax.plot(_offsets(run.points), rates, color=_colour(index), linestyle="--",
                     linewidth=1, marker=_marker(run.points), fillstyle=_fill(_all_partial(run)),
                     zorder=2.5 - 0.1 * index)
    rate_ax.set_ylim(0, min(100.0, top_rate * 1.1) or 1.0)
    chart.integer_y()
    from matplotlib.patches import Patch

    key: list[tuple[Artist, str]] = [(Patch(color=_KEY_COLOUR, alpha=0.45), "failures"),
                                     (_key_line("--"), "error rate (%)")]
    return chart.finish(runs, [], extra_key=key)


CHARTS: dict[str, Callable[[Runs], Figure]] = {
    "latency": latency, "ttft": ttft, "tpot": tpot, "throughput": throughput, "errors": errors,
    "tokens": tokens, "users": users,
}
CHART_NAMES: tuple[str, ...] = tuple(CHARTS)


def figure(name: str, runs: Runs) -> Figure:
    """The chart called ``name`` as a matplotlib figure (on an Agg canvas).

    Raises:
        KeyError: ``name`` is not one of :data:`CHART_NAMES`.
    """
    return CHARTS[name](runs)


def render(name: str, runs: Runs) -> bytes:
    """The chart called ``name`` as PNG bytes, :data:`WIDTH_PX` by :data:`HEIGHT_PX`.

    Raises:
        KeyError: ``name`` is not one of :data:`CHART_NAMES`.
    """
    buffer = io.BytesIO()
    figure(name, runs).savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


# --- building blocks ----------------------------------------------------------------


class _Chart:
    """One figure being drawn: a left-aligned title, labelled axes, a legend below."""

    def __init__(self, title: str, y_label: str) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="constrained")
        FigureCanvasAgg(self.fig)
        self.ax: Axes = self.fig.add_subplot()
        self.ax.set_title(title, loc="left")
        self.ax.set_xlabel(_X_LABEL)
        self.ax.set_ylabel(y_label)
        self.ax.grid(True, alpha=0.3)
        _plain_ticks(self.ax)

    def line(self, xs: Sequence[float], ys: Iterable[float | int | None], index: int,
             style: Style, hollow: bool) -> None:
        values = [math.nan if y is None else float(y) for y in ys]
        # The test drawn over its baseline where they coincide.
        self.ax.plot(xs, values, color=_colour(index), linestyle=style,
                     marker="o" if hollow else _marker(xs), fillstyle=_fill(hollow),
                     markersize=4, zorder=2.5 - 0.1 * index)

    def integer_y(self) -> None:
        from matplotlib.ticker import MaxNLocator

        self.ax.yaxis.set_major_locator(MaxNLocator(integer=True))

    def note(self, text: str) -> None:
        """A remark in the top-right corner, above the plot (clipped points)."""
        self.ax.set_title(text, loc="right", fontsize="small", color=_NOTE_COLOUR)

    def empty(self, runs: Runs, message: str) -> Figure:
        """The chart saying ``message`` instead of plotting; runs stay in the legend."""
        self.ax.text(0.5, 0.5, message, transform=self.ax.transAxes, ha="center",
                     va="center", fontsize="x-large", color="grey")
        self.ax.set_xticks([])
        self.ax.set_yticks([])
        return self._legend(runs, [])

    def finish(self, runs: Runs, styles: Sequence[tuple[Style, str]],
               extra_key: Sequence[tuple[Artist, str]] = ()) -> Figure:
        """Axes from 0 to the end of the last bucket, y from 0; the legend."""
        right = max(p.offset_s for run in runs for p in run.points) + _bucket_width(runs)
        self.ax.set_xlim(-0.01 * right, right)
        for each in self.fig.axes:
            if each.get_ylim()[1] <= 0:  # nothing above zero: keep a visible axis
                each.set_ylim(0, 1)
            each.set_ylim(bottom=0)
        key = [(_key_line(style), label) for style, label in styles] + list(extra_key)
        return self._legend(runs, key)

    def _legend(self, runs: Runs, key: Sequence[tuple[Artist, str]]) -> Figure:
        from matplotlib.lines import Line2D

        entries: list[tuple[Artist, str]] = [
            (Line2D([], [], color=_colour(i), linewidth=2.5),
             run.label if run.points else f"{run.label} (no data)")
            for i, run in enumerate(runs)]
        entries += key
        if entries:
            handles, labels = zip(*entries, strict=True)
            self.fig.legend(handles, labels, loc="outside lower center", ncols=len(entries),
                            fontsize="small", frameon=False)
        return self.fig


def _percentile_chart(runs: Runs, title: str, fields: Sequence[_Measure], *,
                      ceiling_from: str, empty: str, force_empty: bool = False) -> Figure:
    chart = _Chart(title, "Milliseconds")
    if force_empty or not _has_points(runs):
        return chart.empty(runs, empty)
    robust = [v for run in runs for p in run.points
              if (v := getattr(p, ceiling_from)) is not None]
    ceiling = _ceiling(robust)
    above: list[float] = []
    for index, run in enumerate(runs):
        xs = _offsets(run.points)
        for field, _, style in fields:
            ys = [getattr(p, field) for p in run.points]
            chart.line(xs, ys, index, style, _all_partial(run))
            if ceiling is None:
                continue
            clipped = [(x, y) for x, y in zip(xs, ys, strict=True)
                       if y is not None and y > ceiling]
            if clipped:
                above += [y for _, y in clipped]
                # On the top edge, outside the clip box so the whole triangle shows.
                chart.ax.plot([x for x, _ in clipped], [ceiling] * len(clipped),
                              linestyle="none", marker="^", markersize=6,
                              color=_colour(index), clip_on=False)
    if ceiling is not None and above:
        chart.ax.set_ylim(0, ceiling)
        chart.note(f"{len(above):,} point{'s' if len(above) > 1 else ''} above "
                   f"{ceiling:,.0f} ms, max {max(above):,.0f} ms")
    return chart.finish(runs, [(style, label) for _, label, style in fields])


def _ceiling(values: Sequence[float]) -> float | None:
    """Where the latency axis stops: 1.2 times the 95th percentile of ``values``, or None
    when nothing lies above that (the axis then fits the data)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * _CEILING_PERCENTILE / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    percentile = ordered[low] + (ordered[high] - ordered[low]) * (rank - low)
    ceiling = _CEILING_FACTOR * percentile
    return ceiling if ordered[-1] > ceiling and ceiling > 0 else None


def _key_line(style: Style) -> Artist:
    from matplotlib.lines import Line2D

    return Line2D([], [], color=_KEY_COLOUR, linestyle=style, linewidth=1.5)


def _plain_ticks(ax: Axes) -> None:
    """Tick labels as plain numbers with thousands separators (no ``1e6`` offset text,
    which would land on the title)."""
    from matplotlib.ticker import FuncFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(_tick))
    ax.yaxis.set_major_formatter(FuncFormatter(_tick))


def _tick(value: float, _position: object) -> str:
    if abs(value - round(value)) < 1e-9:
        return f"{value:,.0f}"
    return f"{value:,.3f}".rstrip("0").rstrip(".")


def _has_points(runs: Runs) -> bool:
    return any(run.points for run in runs)


def _whole_buckets(run: Run) -> tuple[Sequence[SeriesPoint], bool]:
    """The buckets a rate chart plots, and whether they are partial (hollow markers):
    the whole ones, or every bucket when none is whole."""
    whole = [p for p in run.points if not p.partial]
    return (whole, False) if whole else (run.points, bool(run.points))


def _all_partial(run: Run) -> bool:
    return bool(run.points) and all(p.partial for p in run.points)


def _colour(index: int) -> str:
    return COLOURS[index % len(COLOURS)]


def _offsets(points: Sequence[SeriesPoint]) -> list[float]:
    return [p.offset_s for p in points]


def _marker(points: Sequence[object]) -> str | None:
    return "o" if len(points) < _MARKER_BELOW else None


def _fill(hollow: bool) -> str:
    return "none" if hollow else "full"


def _per_bucket(run: Run, width: float) -> list[float]:
    """Errors per bucket from 0 to the last, with 0 for buckets the view left out."""
    slots = [max(round(p.offset_s / width), 0) for p in run.points]
    counts = [0.0] * (max(slots) + 1)
    for slot, p in zip(slots, run.points, strict=True):
        counts[slot] += p.errors
    return counts


def _bucket_width(runs: Runs) -> float:
    """The smallest gap between buckets: 1 s or 60 s for the views, 1 s when unknown.

    Never under a second (the views' finest bucket), so stray offsets cannot blow up
    the number of error buckets.
    """
    gaps = [b.offset_s - a.offset_s for run in runs
            for a, b in zip(run.points, run.points[1:], strict=False) if b.offset_s > a.offset_s]
    return max(min(gaps, default=1.0), 1.0)
