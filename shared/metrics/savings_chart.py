"""A PNG bar chart of accelerator-hours saved per UTC day, stacked by team.

Same size, resolution and drawing rules as the load-test charts (:mod:`shared.metrics.charts`):
matplotlib is imported only when a chart is drawn, on a figure of its own (no pyplot
state shared between the dashboard's threads). Every day of the window has a bar
position, so a day nothing was removed shows as a gap rather than disappearing.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import date, timedelta

from shared.metrics.charts import DPI, HEIGHT_IN, WIDTH_IN
from shared.metrics.savings import PoolSavings

__all__ = ["savings_chart_png"]

# Distinct for colour-blind readers (Okabe & Ito), in the order teams are drawn.
_PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442",
            "#000000")
_NO_TEAM = "(no team)"


def savings_chart_png(rows: Sequence[PoolSavings], first: date, last: date) -> bytes:
    """Bars of ``accelerator_hours_saved`` per day from ``first`` to ``last``, one colour
    per team (largest savers at the bottom; past the palette, the rest as "others")."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    days = [first + timedelta(days=i) for i in range(max((last - first).days + 1, 1))]
    per_team: dict[str, dict[date, float]] = {}
    for row in rows:
        by_day = per_team.setdefault(row.team or _NO_TEAM, {})
        by_day[row.day] = by_day.get(row.day, 0.0) + row.accelerator_hours_saved
    ranked = sorted(per_team, key=lambda t: (-sum(per_team[t].values()), t))
    if len(ranked) > len(_PALETTE):
        others: dict[date, float] = {}
        for team in ranked[len(_PALETTE) - 1:]:
            for day, value in per_team[team].items():
                others[day] = others.get(day, 0.0) + value
        ranked = [*ranked[:len(_PALETTE) - 1], "others"]
        per_team["others"] = others

    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_title("Accelerator-hours saved per day (UTC)", loc="left")
    ax.set_ylabel("Accelerator-hours")
    ax.grid(True, axis="y", alpha=0.3)
    positions = list(range(len(days)))
    bottom = [0.0] * len(days)
    for colour, team in zip(_PALETTE, ranked, strict=False):
        heights = [per_team[team].get(day, 0.0) for day in days]
        ax.bar(positions, heights, bottom=bottom, color=colour, label=team, width=0.8)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    step = max(1, len(days) // 10)
    ax.set_xticks(positions[::step], [d.strftime("%m-%d") for d in days[::step]])
    # Room above the tallest bar, and a visible axis when nothing was saved.
    ax.set_ylim(0, max(bottom, default=0.0) * 1.08 or 1.0)
    if ranked:
        fig.legend(loc="outside lower center", ncols=min(len(ranked), 4), fontsize="small",
                   frameon=False)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()
