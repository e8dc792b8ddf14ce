"""PNG charts of a load test's time series, alone or overlaid on a baseline run.

matplotlib is imported inside the drawing functions, not at module level: the CLI and
the metrics functions import ``shared.metrics`` on every start and must not pay for
it (about half a second), and only report paths draw. Each chart is its own
``matplotlib.figure.Figure`` rendered by the Agg backend into memory; nothing touches
pyplot's global figure registry, so request threads of the dashboard never share a
figure.

Runs are overlaid by the seconds since each test's start (``SeriesPoint.offset_s``), so
two tests that ran on different days line up. The test is drawn in blue and its
baseline in orange, a pair that stays distinct for colour-blind readers.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shared.metrics.model import SeriesPoint

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes

__all__ = ["CHART_NAMES", "Run", "errors", "latency", "render", "throughput", "tokens"]

WIDTH_IN, HEIGHT_IN, DPI = 9.0, 3.6, 100
COLOURS = ("#1f77b4", "#ff7f0e")
# Fewer points than this get markers, so a one-bucket run is still visible.
_MARKER_BELOW = 30
_X_LABEL = "Time since test start (s)"


@dataclass(frozen=True)
class Run:
    """One test's series and the name its legend entries carry."""

    test_id: str
    points: Sequence[SeriesPoint]


Runs = Sequence[Run]


def latency(runs: Runs) -> bytes:
    """Response time percentiles (p50 dotted, p90 dashed, p99 solid) in ms."""

    def draw(ax: Axes, run: Run, index: int) -> None:
        colour, xs = _colour(index), _offsets(run)
        for field, style in (("p50_ms", ":"), ("p90_ms", "--"), ("p99_ms", "-")):
            ys = [getattr(p, field) for p in run.points]
            ax.plot(xs, ys, linestyle=style, color=colour, marker=_marker(run),
                    label=f"{run.test_id} {field.removesuffix('_ms')}")

    return _chart(runs, "Latency percentiles", "Response time (ms)", draw)


def throughput(runs: Runs) -> bytes:
    """Completed requests per second."""

    def draw(ax: Axes, run: Run, index: int) -> None:
        ax.plot(_offsets(run), [p.qps for p in run.points], color=_colour(index),
                marker=_marker(run), label=run.test_id)

    return _chart(runs, "Throughput", "Requests/s", draw)


def tokens(runs: Runs) -> bytes:
    """Output tokens generated per second."""

    def draw(ax: Axes, run: Run, index: int) -> None:
        ax.plot(_offsets(run), [p.tokens_per_s for p in run.points], color=_colour(index),
                marker=_marker(run), label=run.test_id)

    return _chart(runs, "Output tokens", "Output tokens/s", draw)


def errors(runs: Runs) -> bytes:
    """Failed requests per bucket as filled steps, with the error rate (%) on a second axis.

    One step patch per run, not one bar per bucket: 600 bars take seconds to draw. The
    rate line is what to compare when the runs sent different numbers of requests.
    """
    from matplotlib.ticker import MaxNLocator

    width = _bucket_width(runs)
    rate_axes: list[Axes] = []

    def draw(ax: Axes, run: Run, index: int) -> None:
        colour = _colour(index)
        counts = _per_bucket(run, width)
        # The test filled, its baseline as an outline on top: overlaps stay readable.
        ax.stairs(counts, [i * width for i in range(len(counts) + 1)], fill=index == 0,
                  color=colour, alpha=0.45 if index == 0 else 1.0, linewidth=1.5,
                  label=f"{run.test_id} errors")
        if not rate_axes:
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            rate_axes.append(ax.twinx())
            rate_axes[0].set_ylabel("Error rate (%)")
        rates = [100.0 * p.errors / p.requests if p.requests else 0.0 for p in run.points]
        rate_axes[0].plot(_offsets(run), rates, color=colour, linestyle="--", linewidth=1,
                          marker=_marker(run), label=f"{run.test_id} error rate")

    return _chart(runs, "Errors", "Errors per bucket", draw)


CHARTS: dict[str, Callable[[Runs], bytes]] = {
    "latency": latency, "throughput": throughput, "errors": errors, "tokens": tokens,
}
CHART_NAMES: tuple[str, ...] = tuple(CHARTS)


def render(name: str, runs: Runs) -> bytes:
    """The chart called ``name`` as PNG bytes.

    Raises:
        KeyError: ``name`` is not one of :data:`CHART_NAMES`.
    """
    return CHARTS[name](runs)


def _chart(runs: Runs, title: str, y_label: str,
           draw: Callable[[Axes, Run, int], None]) -> bytes:
    """Draw each run with ``draw`` on one titled, labelled, gridded figure; PNG bytes.

    The legend sits outside the plot, right of any second y axis, so it never hides
    data; constrained layout makes room for it within the fixed figure size.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    names = " vs ".join(run.test_id for run in runs)
    ax.set_title(f"{title}: {names}" if names else title)
    ax.set_xlabel(_X_LABEL)
    ax.set_ylabel(y_label)
    ax.grid(True, alpha=0.3)
    for index, run in enumerate(runs):
        if run.points:
            draw(ax, run, index)
        else:
            # Keep the run in the legend so a missing series is not mistaken for zero.
            ax.plot([], [], color=_colour(index), label=f"{run.test_id} (no data)")
    if any(run.points for run in runs):
        # Up to the end of the last bucket, so a one-bucket run is not a sliver.
        right = max(p.offset_s for run in runs for p in run.points) + _bucket_width(runs)
        ax.set_xlim(-0.01 * right, right)
        for each in fig.axes:
            each.set_ylim(bottom=0)
    else:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center",
                fontsize="x-large", color="grey")
        ax.set_xticks([])
        ax.set_yticks([])
    handles: list[Artist] = []
    labels: list[str] = []
    for each in fig.axes:  # a second y axis (error rate) has entries of its own
        more_handles, more_labels = each.get_legend_handles_labels()
        handles += more_handles
        labels += more_labels
    if handles:
        fig.legend(handles, labels, loc="outside right upper", fontsize="small")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def _colour(index: int) -> str:
    return COLOURS[index % len(COLOURS)]


def _offsets(run: Run) -> list[float]:
    return [p.offset_s for p in run.points]


def _marker(run: Run) -> str | None:
    return "o" if len(run.points) < _MARKER_BELOW else None


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
