"""How jobs fared, as a text report (CLI) and a page (dashboard).

Both show the same three tables from the same rows: each team's and TPU type's sums
over the window with the grand total, one line per UTC day, team and TPU type (so a
reader can check that the days add up to the totals), and the slowest queue waits of
the jobs submitted in the window, those still waiting included. A day with a run or
a slice still up is marked: its chip-hours grow until it ends. Durations are read
as a person reads them (``1 h 30 min``); chip-hours have one decimal.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from shared.metrics._html import DASH, _e, back_link, count, decimal, minute, page, seconds
from shared.metrics._tables import aligned, html_table, window_links
from shared.metrics.usage.views import JobUsage, QueueWait, UsageTotal, totals
from shared.metrics.window import window_text

__all__ = ["STILL_QUEUED", "TITLE", "jobs_page", "jobs_text"]

TITLE = "Jobs: queue wait, provisioning, run time and chip-hours"
STILL_QUEUED = "still queued"
_STILL = "a run or a slice still up: counted up to now"
_NONE = "No job was submitted or ran in this window."
_FIGURES = ("Submitted", "Rejected", "Started", "Finished", "Failed", "Avg queue wait",
            "Avg provisioning", "Avg run", "Chip-hours used", "Idle chip-hours")
_DAY_HEADERS = ("Day (UTC)", "Team", "TPU type", *_FIGURES)
_TOTAL_HEADERS = ("Team", "TPU type", *_FIGURES)
_WAIT_HEADERS = ("Request", "Team", "TPU type", "JobSet", "Submitted (UTC)", "Admitted (UTC)",
                 "Queue wait")
_NUMERIC = len(_FIGURES)


def _figures(row: JobUsage | UsageTotal) -> tuple[str, ...]:
    return (count(row.jobs_submitted), count(row.jobs_rejected), count(row.jobs_started),
            count(row.jobs_finished), count(row.jobs_failed),
            seconds(row.queue_wait_seconds_avg), seconds(row.provisioning_seconds_avg),
            seconds(row.run_seconds_avg), decimal(row.chip_hours_used),
            decimal(row.idle_chip_hours))


def _day_cells(row: JobUsage) -> tuple[str, ...]:
    return (row.day.isoformat() + (" *" if row.still_open else ""), row.team or DASH,
            row.tpu_type or DASH, *_figures(row))


def _total_cells(total: UsageTotal) -> tuple[str, ...]:
    return (total.team or DASH, total.tpu_type or DASH, *_figures(total))


def _grand_total(total: UsageTotal) -> tuple[str, ...]:
    return ("Total", "", *_figures(total))


def _wait_cells(wait: QueueWait) -> tuple[str, ...]:
    admitted = STILL_QUEUED if wait.admitted_at is None else minute(wait.admitted_at)
    return (wait.request_id, wait.team or DASH, wait.tpu_type or DASH, wait.jobset or DASH,
            minute(wait.submitted_at), admitted, seconds(wait.wait_seconds))


def _heading(first: date, since: str, team: str | None) -> str:
    return f"{window_text(first, since)}" + (f", team {team}" if team else "")


def jobs_text(rows: Sequence[JobUsage], waits: Sequence[QueueWait], first: date,
              since: str, team: str | None = None) -> str:
    """The CLI's report: per team and TPU type with the total, per day, slowest waits."""
    head = f"{TITLE}, {_heading(first, since, team)}"
    if not rows and not waits:
        return f"{head}\n\n{_NONE}\n"
    per_group, total = totals(rows)
    lines = [head, "", "Per team and TPU type over the window:",
             *aligned([_TOTAL_HEADERS, *(_total_cells(t) for t in per_group),
                       _grand_total(total)], _NUMERIC),
             "", "Per day:",
             *aligned([_DAY_HEADERS, *(_day_cells(row) for row in rows)], _NUMERIC)]
    if waits:
        lines += ["", "Slowest queue waits of the jobs submitted in the window:",
                  *aligned([_WAIT_HEADERS, *(_wait_cells(w) for w in waits)], 1)]
    notes = f"* {_STILL}\n" if any(row.still_open for row in rows) else ""
    return "\n".join([*lines, ""]) + notes


def _team_links(team: str | None, team_href: dict[str | None, str]) -> str:
    """``Team: all · research · serving``, the one shown in bold."""
    links = " · ".join(
        f"<strong>{_e(name or 'all')}</strong>" if name == team else
        f'<a class=nav href="{_e(href)}">{_e(name or "all")}</a>'
        for name, href in team_href.items())
    return f" Team: {links}" if len(team_href) > 1 else ""


def jobs_page(rows: Sequence[JobUsage], waits: Sequence[QueueWait], first: date, since: str,
              *, team: str | None, chart_src: str | None, index_href: str | None,
              since_href: dict[str, str], team_href: dict[str | None, str]) -> str:
    """The dashboard's page: the window's choices (``since_href``: window → link), the
    teams' (``team_href``: team, None for all → link), the chart (when ``chart_src`` is
    given and there is data) and the three tables."""
    head = (f"{back_link(index_href)}<h1>{_e(TITLE)}</h1>"
            f"<p class=meta>{_e(_heading(first, since, team))}. "
            f"Window: {window_links(since, since_href)}.{_team_links(team, team_href)}</p>")
    if not rows and not waits:
        return page(TITLE, f"{head}<p>{_e(_NONE)}</p>")
    per_group, total = totals(rows)
    figure = (f'<figure><img src="{_e(chart_src)}" alt="Chip-hours used and idle per day and '
              f'team"></figure>' if chart_src and rows else "")
    note = f"<p class=meta>* {_e(_STILL)}.</p>" if any(r.still_open for r in rows) else ""
    body = (f"{head}{figure}<h2>Per team and TPU type</h2>"
            + html_table(_TOTAL_HEADERS, [_total_cells(t) for t in per_group],
                         numeric=_NUMERIC, css="jobs", total=_grand_total(total))
            + "<h2>Per day</h2>"
            + html_table(_DAY_HEADERS, [_day_cells(row) for row in rows], numeric=_NUMERIC,
                         css="jobs", nowrap={0}) + note)
    if waits:
        body += ("<h2>Slowest queue waits</h2><p class=meta>Jobs submitted in the window; "
                 "a job still queued counts its wait so far.</p>"
                 + html_table(_WAIT_HEADERS, [_wait_cells(w) for w in waits], numeric=1,
                              css="jobs", nowrap={4, 5}))
    return page(TITLE, body)
