"""The dashboard's savings page: accelerator-hours saved by off-hours node-pool removal.

``/savings?since=7d`` shows the chart and the tables of :mod:`shared.metrics.savings_report`;
``/savings/chart.png?since=7d`` is its chart. A page and its chart read the view once
between them: the rows are kept for as long as a live load-test page is (the figures
of a pool still removed grow by the minute). A window that is not a duration like
``7d``, ``36h`` or ``2w`` is refused (400) before BigQuery is asked.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from flask import Flask, Response, request, url_for

from services.dashboard.cache import LIVE_SECONDS, TtlCache
from shared.metrics.savings import (
    DEFAULT_SINCE,
    PoolSavings,
    SavingsSource,
    first_day,
    parse_since,
)
from shared.metrics.savings_report import SINCE_CHOICES, savings_page

__all__ = ["add_savings_routes"]

_CACHE = f"private, max-age={LIVE_SECONDS:.0f}"


class _BadSince(ValueError):
    """A ``since`` argument that is not a window."""


def _since() -> str:
    since = request.args.get("since", "").strip() or DEFAULT_SINCE
    try:
        parse_since(since)
    except ValueError as exc:
        raise _BadSince(f"since: {exc}") from None
    return since


def add_savings_routes(app: Flask, source: Callable[[], SavingsSource],
                       clock: Callable[[], float],
                       error_page: Callable[[int, str, str], Response]) -> None:
    """Register ``/savings`` and its chart on ``app``; ``source()`` gives the reader."""
    kept: TtlCache[list[PoolSavings]] = TtlCache(clock)

    def rows_of(since: str) -> list[PoolSavings]:
        first = first_day(parse_since(since))
        return kept.get((since, first), lambda: source().pool_savings(parse_since(since)),
                        lambda _: LIVE_SECONDS)

    @app.get("/savings")
    def savings() -> Response:
        since = _since()
        rows = rows_of(since)
        choices = {choice: url_for("savings", since=choice)
                   for choice in dict.fromkeys((*SINCE_CHOICES, since))}
        html = savings_page(rows, first_day(parse_since(since)), since,
                            chart_src=url_for("savings_chart", since=since),
                            index_href=url_for("index"), since_href=choices)
        return Response(html, mimetype="text/html", headers={"Cache-Control": _CACHE})

    @app.get("/savings/chart.png")
    def savings_chart() -> Response:
        from shared.metrics.savings_chart import savings_chart_png

        since = _since()
        rows = rows_of(since)
        first = first_day(parse_since(since))
        last = max([datetime.now(UTC).date(), *(row.day for row in rows)])
        return Response(savings_chart_png(rows, first, last), mimetype="image/png",
                        headers={"Cache-Control": _CACHE})

    @app.errorhandler(_BadSince)
    def bad_since(exc: _BadSince) -> Response:
        return error_page(400, "Bad Request", str(exc))
