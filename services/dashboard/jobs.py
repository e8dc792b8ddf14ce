"""The dashboard's jobs page: queue wait, provisioning, run time and chip-hours per day.

``/jobs?since=7d&team=research`` shows the chart and the tables of
:mod:`shared.metrics.usage.report` (``team`` optional: every team's by default);
``/jobs/chart.png`` with the same arguments is its chart. A page costs two queries
(``job_usage_daily`` and the slowest waits of ``job_lifecycle``) and its chart none:
both are kept together for as long as a live load-test page is, since a running job's
chip-hours grow by the minute. A window that is not a duration is refused (400)
before BigQuery is asked (:mod:`services.dashboard.window`), and so is a team name
longer than any a job event can carry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flask import Flask, Response, request, url_for

from services.dashboard.cache import LIVE_SECONDS, TtlCache
from services.dashboard.window import BadWindow, since_arg, since_links
from shared.metrics.usage.chart import jobs_chart_png
from shared.metrics.usage.report import jobs_page
from shared.metrics.usage.views import JobsSource, JobUsage, QueueWait
from shared.metrics.window import first_day, parse_since

__all__ = ["add_jobs_routes"]

_CACHE = f"private, max-age={LIVE_SECONDS:.0f}"
# The job_events table's limit on a team name (shared.metrics.record.Short).
_TEAM_MAX = 256


class BadTeam(BadWindow):
    """A ``team`` argument no job event can carry (answered like a bad window: 400)."""


@dataclass(frozen=True)
class _Kept:
    rows: list[JobUsage]
    waits: list[QueueWait]


def _team_arg() -> str | None:
    team = request.args.get("team", "").strip()
    if len(team) > _TEAM_MAX:
        raise BadTeam(f"team: at most {_TEAM_MAX} characters")
    return team or None


def _team(team: str | None) -> dict[str, Any]:
    """The ``team`` argument of a link: none for every team's page."""
    return {"team": team} if team else {}


def _team_links(since: str, team: str | None, rows: list[JobUsage]) -> dict[str | None, str]:
    """All teams, and each team of the rows (or the one shown), as links."""
    teams = sorted({row.team for row in rows if row.team is not None}
                   | ({team} if team is not None else set()))
    links: dict[str | None, str] = {None: url_for("jobs", since=since)}
    links.update({name: url_for("jobs", since=since, team=name) for name in teams})
    return links


def add_jobs_routes(app: Flask, source: Callable[[], JobsSource],
                    clock: Callable[[], float]) -> None:
    """Register ``/jobs`` and its chart on ``app``; ``source()`` gives the reader."""
    kept: TtlCache[_Kept] = TtlCache(clock)

    def read(since: str, team: str | None) -> _Kept:
        window = parse_since(since)
        reader = source()
        return _Kept(reader.job_usage(window, team), reader.slowest_waits(window, team))

    def kept_of(since: str, team: str | None) -> _Kept:
        first = first_day(parse_since(since))
        return kept.get((since, first, team), lambda: read(since, team),
                        lambda _: LIVE_SECONDS)

    @app.get("/jobs")
    def jobs() -> Response:
        since, team = since_arg(), _team_arg()
        found = kept_of(since, team)
        html = jobs_page(found.rows, found.waits, first_day(parse_since(since)), since,
                         team=team, chart_src=url_for("jobs_chart", since=since, **_team(team)),
                         index_href=url_for("index"),
                         since_href=since_links("jobs", since, **_team(team)),
                         team_href=_team_links(since, team, found.rows))
        return Response(html, mimetype="text/html", headers={"Cache-Control": _CACHE})

    @app.get("/jobs/chart.png")
    def jobs_chart() -> Response:
        since, team = since_arg(), _team_arg()
        rows = kept_of(since, team).rows
        first = first_day(parse_since(since))
        last = max([datetime.now(UTC).date(), *(row.day for row in rows)])
        return Response(jobs_chart_png(rows, first, last), mimetype="image/png",
                        headers={"Cache-Control": _CACHE})
