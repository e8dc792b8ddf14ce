"""A PNG bar chart of accelerator-hours saved per UTC day, stacked by team.

Drawn by :mod:`shared.metrics._daily_chart` (the load-test charts' size and rules;
matplotlib imported only when a chart is drawn): every day of the window has a bar
position, so a day nothing was removed shows as a gap rather than disappearing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from shared.metrics._daily_chart import NO_TEAM, Layer, days_of, draw, ranked
from shared.metrics.savings.views import PoolSavings

__all__ = ["savings_chart_png"]


def savings_chart_png(rows: Sequence[PoolSavings], first: date, last: date) -> bytes:
    """Bars of ``accelerator_hours_saved`` per day from ``first`` to ``last``, one colour
    per team (largest savers at the bottom; past the palette, the rest as "others")."""
    per_team: dict[str, list[dict[date, float]]] = {}
    for row in rows:
        [by_day] = per_team.setdefault(row.team or NO_TEAM, [{}])
        by_day[row.day] = by_day.get(row.day, 0.0) + row.accelerator_hours_saved
    layers = [Layer(team, saved, colour) for team, colour, [saved] in ranked(per_team)]
    return draw(days_of(first, last), layers, title="Accelerator-hours saved per day (UTC)",
                ylabel="Accelerator-hours")
