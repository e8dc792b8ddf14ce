"""A PNG bar chart of chip-hours per UTC day and team: used, and idle (hatched) above it.

Used is a job's chips for as long as it ran; idle is what its slices held beyond that
(up before the run started, or after it ended). Drawn by
:mod:`shared.metrics._daily_chart`, like the savings chart: a bar position for every
day of the window, teams ranked by their total, each team one colour.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from shared.metrics._daily_chart import NO_TEAM, Layer, days_of, draw, ranked
from shared.metrics.usage.views import JobUsage

__all__ = ["jobs_chart_png"]

_IDLE_HATCH = "///"
_IDLE_ALPHA = 0.45


def jobs_chart_png(rows: Sequence[JobUsage], first: date, last: date) -> bytes:
    """Per day from ``first`` to ``last``: each team's chip-hours used, then its idle
    chip-hours stacked above in the same colour, hatched."""
    per_team: dict[str, list[dict[date, float]]] = {}
    for row in rows:
        used, idle = per_team.setdefault(row.team or NO_TEAM, [{}, {}])
        used[row.day] = used.get(row.day, 0.0) + row.chip_hours_used
        idle[row.day] = idle.get(row.day, 0.0) + row.idle_chip_hours
    layers: list[Layer] = []
    for team, colour, (used, idle) in ranked(per_team):
        layers += [Layer(f"{team}: used", used, colour),
                   Layer(f"{team}: idle", idle, colour, hatch=_IDLE_HATCH, alpha=_IDLE_ALPHA)]
    return draw(days_of(first, last), layers, title="TPU chip-hours per day (UTC): used and idle",
                ylabel="Chip-hours")
