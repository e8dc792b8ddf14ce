"""Stacked bars per UTC day, one colour per team: what the savings and jobs charts share.

Same size, resolution and drawing rules as the load-test charts
(:mod:`shared.metrics.loadtest.charts`): matplotlib is imported only when a chart is
drawn, on a figure of its own (no pyplot state shared between the dashboard's
threads). Every day of the window has a bar position, so a day with nothing to show
is a gap rather than missing. Teams are ranked by their total (largest at the
bottom); past the palette, the smallest are drawn together as "others".
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from shared.metrics.chart_size import DPI, HEIGHT_IN, WIDTH_IN

__all__ = ["NO_TEAM", "OTHERS", "PALETTE", "Layer", "days_of", "draw", "ranked"]

# Distinct for colour-blind readers (Okabe & Ito), in the order teams are drawn.
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442",
           "#000000")
NO_TEAM = "(no team)"
OTHERS = "others"

PerDay = dict[date, float]


@dataclass(frozen=True)
class Layer:
    """One stacked series: a label for the legend, its values per day, and how it is
    told apart from the team's other layers (``hatch``, lighter ``alpha``)."""

    label: str
    values: Mapping[date, float]
    colour: str
    hatch: str | None = None
    alpha: float = 1.0


def days_of(first: date, last: date) -> list[date]:
    """Every day from ``first`` to ``last``; at least one."""
    return [first + timedelta(days=i) for i in range(max((last - first).days + 1, 1))]


def ranked(per_team: Mapping[str, Sequence[PerDay]]) -> list[tuple[str, str, list[PerDay]]]:
    """(team, colour, its series) from the largest total to the smallest; teams past
    the palette are summed, series by series, into "others"."""
    order = sorted(per_team, key=lambda t: (-sum(sum(s.values()) for s in per_team[t]), t))
    teams = [(team, list(per_team[team])) for team in order]
    if len(teams) > len(PALETTE):
        folded = teams[len(PALETTE) - 1:]
        others: list[PerDay] = []
        for position in range(len(folded[0][1])):
            total: PerDay = {}
            for _, series in folded:
                for day, value in series[position].items():
                    total[day] = total.get(day, 0.0) + value
            others.append(total)
        teams = [*teams[:len(PALETTE) - 1], (OTHERS, others)]
    return [(team, colour, series) for colour, (team, series) in zip(PALETTE, teams,
                                                                     strict=False)]


def draw(days: Sequence[date], layers: Sequence[Layer], *, title: str, ylabel: str) -> bytes:
    """The PNG of ``layers`` stacked per day, bottom first."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_title(title, loc="left")
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)
    positions = list(range(len(days)))
    bottom = [0.0] * len(days)
    for layer in layers:
        heights = [layer.values.get(day, 0.0) for day in days]
        ax.bar(positions, heights, bottom=bottom, color=layer.colour, label=layer.label,
               width=0.8, hatch=layer.hatch, alpha=layer.alpha, edgecolor=layer.colour,
               linewidth=0)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    step = max(1, len(days) // 10)
    ax.set_xticks(positions[::step], [d.strftime("%m-%d") for d in days[::step]])
    # Room above the tallest bar, and a visible axis when there is nothing to show.
    ax.set_ylim(0, max(bottom, default=0.0) * 1.08 or 1.0)
    if layers:
        fig.legend(loc="outside lower center", ncols=min(len(layers), 4), fontsize="small",
                   frameon=False)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()
