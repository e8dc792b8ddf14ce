"""What off-hours node-pool removal saved, as a text table (CLI) and a page (dashboard).

Both show the same two tables from the same rows: one line per UTC day, team and pool,
then each pool's sums over the window with the grand total, so a reader can check
that the days add up to the totals. A day whose pool is still removed is marked: its
figures grow until the pool is restored.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from shared.metrics._html import DASH, _e, back_link, decimal, page, scroll
from shared.metrics.savings import PoolSavings, SavingsTotal, totals

__all__ = ["SINCE_CHOICES", "TITLE", "savings_page", "savings_text"]

TITLE = "Accelerator-hours saved by off-hours node-pool removal"
#: The windows the page offers as links.
SINCE_CHOICES = ("7d", "30d", "90d")
_STILL = "still removed: counted up to now"
_DAY_HEADERS = ("Day (UTC)", "Team", "Cluster", "Pool", "Accelerator", "Hours removed",
                "Accelerator-hours saved")
_TOTAL_HEADERS = ("Team", "Cluster", "Pool", "Accelerator", "Hours removed",
                  "Accelerator-hours saved")
_NUMERIC = 2  # the last columns of both tables are numbers


def _window(first: date, since: str) -> str:
    return f"last {since}: {first.isoformat()} to today (UTC)"


def _day_cells(row: PoolSavings) -> tuple[str, ...]:
    return (row.day.isoformat() + (" *" if row.still_removed else ""), row.team or DASH,
            row.cluster, row.pool, row.accelerator_type or DASH, decimal(row.removed_hours),
            decimal(row.accelerator_hours_saved))


def _total_cells(total: SavingsTotal) -> tuple[str, ...]:
    return (total.team or DASH, total.cluster or DASH, total.pool or DASH,
            total.accelerator_type or DASH, decimal(total.removed_hours),
            decimal(total.accelerator_hours_saved))


def _aligned(rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    numeric_from = len(widths) - _NUMERIC
    return ["  ".join(cell.rjust(width) if i >= numeric_from else cell.ljust(width)
                      for i, (cell, width) in enumerate(zip(row, widths, strict=True))).rstrip()
            for row in rows]


def savings_text(rows: Sequence[PoolSavings], first: date, since: str) -> str:
    """The CLI's report: per day, team and pool, then per pool with the total."""
    head = f"{TITLE}, {_window(first, since)}"
    if not rows:
        return f"{head}\n\nNo pool was removed in this window.\n"
    per_pool, total = totals(rows)
    days = _aligned([_DAY_HEADERS, *(_day_cells(row) for row in rows)])
    pools = _aligned([_TOTAL_HEADERS, *(_total_cells(t) for t in per_pool),
                      ("Total", "", "", "", *_total_cells(total)[-_NUMERIC:])])
    notes = f"* {_STILL}\n" if any(row.still_removed for row in rows) else ""
    return "\n".join([head, "", *days, "", "Per pool over the window:", *pools, ""]) + notes


def _html_table(headers: Sequence[str], rows: Sequence[tuple[str, ...]],
                total: tuple[str, ...] | None = None) -> str:
    # Numbers right-aligned; a day (with its mark) kept on one line; text wraps.
    classes = ["nowrap" if h == _DAY_HEADERS[0] else "text" for h in headers]
    classes[-_NUMERIC:] = ["num"] * _NUMERIC

    def cells(values: Sequence[str], tag: str) -> str:
        return "".join(f"<{tag} class={cls}>{_e(v)}</{tag}>"
                       for cls, v in zip(classes, values, strict=True))

    head = cells(headers, "th")
    body = "".join(f"<tr>{cells(row, 'td')}</tr>" for row in rows)
    foot = f"<tr class=total>{cells(total, 'td')}</tr>" if total else ""
    return scroll(f'<table class="savings"><thead><tr>{head}</tr></thead>'
                  f"<tbody>{body}{foot}</tbody></table>")


def savings_page(rows: Sequence[PoolSavings], first: date, since: str, *,
                 chart_src: str | None, index_href: str | None,
                 since_href: dict[str, str]) -> str:
    """The dashboard's page: the window's choices (``since_href``: window → link), the
    chart (when ``chart_src`` is given and there is data), and both tables."""
    choices = " · ".join(
        f"<strong>{_e(choice)}</strong>" if choice == since else
        f'<a class=nav href="{_e(href)}">{_e(choice)}</a>' for choice, href in since_href.items())
    head = (f"{back_link(index_href)}<h1>{_e(TITLE)}</h1>"
            f"<p class=meta>{_e(_window(first, since))}. Window: {choices}</p>")
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
