"""The dashboard's savings page: accelerator-hours saved by off-hours node-pool removal.

``/savings?since=7d`` shows the chart and the tables of :mod:`shared.metrics.savings.report`;
``/savings/chart.png?since=7d`` is its chart. A page and its chart read the view once
between them: the rows are kept for as long as a live load-test page is (the figures
of a pool still removed grow by the minute). A window that is not a duration like
``7d``, ``36h`` or ``2w`` is refused (400) before BigQuery is asked
(:mod:`services.dashboard.window`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from flask import Flask, Response, url_for

from services.dashboard.cache import LIVE_SECONDS, TtlCache
from services.dashboard.window import since_arg, since_links
from shared.metrics.savings.chart import savings_chart_png
from shared.metrics.savings.report import savings_page
from shared.metrics.savings.views import PoolSavings, SavingsSource
from shared.metrics.window import first_day, parse_since

__all__ = ["add_savings_routes"]

_CACHE = f"private, max-age={LIVE_SECONDS:.0f}"


def add_savings_routes(app: Flask, source: Callable[[], SavingsSource],
                       clock: Callable[[], float]) -> None:
    """Register ``/savings`` and its chart on ``app``; ``source()`` gives the reader."""
    kept: TtlCache[list[PoolSavings]] = TtlCache(clock)

    def rows_of(since: str) -> list[PoolSavings]:
        first = first_day(parse_since(since))
        return kept.get((since, first), lambda: source().pool_savings(parse_since(since)),
                        lambda _: LIVE_SECONDS)

    @app.get("/savings")
    def savings() -> Response:
        since = since_arg()
        rows = rows_of(since)
        html = savings_page(rows, first_day(parse_since(since)), since,
                            chart_src=url_for("savings_chart", since=since),
                            index_href=url_for("index"),
                            since_href=since_links("savings", since))
        return Response(html, mimetype="text/html", headers={"Cache-Control": _CACHE})

    @app.get("/savings/chart.png")
    def savings_chart() -> Response:
        since = since_arg()
        rows = rows_of(since)
        first = first_day(parse_since(since))
        last = max([datetime.now(UTC).date(), *(row.day for row in rows)])
        return Response(savings_chart_png(rows, first, last), mimetype="image/png",
                        headers={"Cache-Control": _CACHE})
