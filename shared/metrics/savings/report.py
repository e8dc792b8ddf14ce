"""What off-hours node-pool removal saved, as a text table (CLI) and a page (dashboard).

Both show the same two tables from the same rows: one line per UTC day, team and pool,
then each pool's sums over the window with the grand total, so a reader can check
that the days add up to the totals. A day whose pool is still removed is marked: its
figures grow until the pool is restored.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from shared.metrics._html import DASH, _e, back_link, decimal, page
from shared.metrics._tables import aligned, html_table, window_links
from shared.metrics.savings.views import PoolSavings, SavingsTotal, totals
from shared.metrics.window import window_text

__all__ = ["TITLE", "savings_page", "savings_text"]

TITLE = "Accelerator-hours saved by off-hours node-pool removal"
_STILL = "still removed: counted up to now"
_DAY_HEADERS = ("Day (UTC)", "Team", "Cluster", "Pool", "Accelerator", "Hours removed",
                "Accelerator-hours saved")
_TOTAL_HEADERS = ("Team", "Cluster", "Pool", "Accelerator", "Hours removed",
                  "Accelerator-hours saved")
_NUMERIC = 2  # the last columns of both tables are numbers


def _day_cells(row: PoolSavings) -> tuple[str, ...]:
    return (row.day.isoformat() + (" *" if row.still_removed else ""), row.team or DASH,
            row.cluster, row.pool, row.accelerator_type or DASH, decimal(row.removed_hours),
            decimal(row.accelerator_hours_saved))


def _total_cells(total: SavingsTotal) -> tuple[str, ...]:
    return (total.team or DASH, total.cluster or DASH, total.pool or DASH,
            total.accelerator_type or DASH, decimal(total.removed_hours),
            decimal(total.accelerator_hours_saved))


def savings_text(rows: Sequence[PoolSavings], first: date, since: str) -> str:
    """The CLI's report: per day, team and pool, then per pool with the total."""
    head = f"{TITLE}, {window_text(first, since)}"
    if not rows:
        return f"{head}\n\nNo pool was removed in this window.\n"
    per_pool, total = totals(rows)
    days = aligned([_DAY_HEADERS, *(_day_cells(row) for row in rows)], _NUMERIC)
    pools = aligned([_TOTAL_HEADERS, *(_total_cells(t) for t in per_pool),
                     ("Total", "", "", "", *_total_cells(total)[-_NUMERIC:])], _NUMERIC)
    notes = f"* {_STILL}\n" if any(row.still_removed for row in rows) else ""
    return "\n".join([head, "", *days, "", "Per pool over the window:", *pools, ""]) + notes


def _html_table(headers: Sequence[str], rows: Sequence[tuple[str, ...]],
                total: tuple[str, ...] | None = None) -> str:
    # A day (with its mark) is kept on one line.
    nowrap = {0} if headers[0] == _DAY_HEADERS[0] else set()
    return html_table(headers, rows, numeric=_NUMERIC, css="savings", nowrap=nowrap,
                      total=total)


def savings_page(rows: Sequence[PoolSavings], first: date, since: str, *,
                 chart_src: str | None, index_href: str | None,
                 since_href: dict[str, str]) -> str:
    """The dashboard's page: the window's choices (``since_href``: window → link), the
    chart (when ``chart_src`` is given and there is data), and both tables."""
    head = (f"{back_link(index_href)}<h1>{_e(TITLE)}</h1>"
            f"<p class=meta>{_e(window_text(first, since))}. "
            f"Window: {window_links(since, since_href)}</p>")
    if not rows:
        return page(TITLE, f"{head}<p>No pool was removed in this window.</p>")
    per_pool, total = totals(rows)
    figure = (f'<figure><img src="{_e(chart_src)}" alt="Accelerator-hours saved per day and '
              f'team"></figure>' if chart_src else "")
    note = (f"<p class=meta>* {_e(_STILL)}.</p>" if any(r.still_removed for r in rows) else "")
    body = (f"{head}{figure}<h2>Per pool</h2>"
            + _html_table(_TOTAL_HEADERS, [_total_cells(t) for t in per_pool],
                          ("Total", "", "", "", *_total_cells(total)[-_NUMERIC:]))
            + "<h2>Per day</h2>"
            + _html_table(_DAY_HEADERS, [_day_cells(row) for row in rows]) + note)
    return page(TITLE, body)
