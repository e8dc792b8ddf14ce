"""The list of load tests: one row per test, sortable without a script.

Each column header is a plain link (``?sort=<column>&dir=asc|desc``) and the server
sorts: the dashboard sends no scripts. The column comes from an allow-list
(:data:`SORTS`); anything else falls back to newest first. Tests missing a value
(no successful request, so no p50) sort last either way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from shared.metrics._html import _e, count, decimal, minute, page, percent, scroll, seconds
from shared.metrics.loadtest.model import TestSummary

__all__ = ["DEFAULT_SORT", "SORTS", "index_page", "sort_order"]

Direction = Literal["asc", "desc"]


@dataclass(frozen=True)
class _Column:
    key: str
    header: str
    value: Callable[[TestSummary], Any]
    cell: Callable[[TestSummary], str]  # markup: every data value escaped inside
    numeric: bool
    first: Direction  # the direction a first click sorts in


def _text(field: str) -> Callable[[TestSummary], str]:
    return lambda s: _e(getattr(s, field) or "—")


def _model(s: TestSummary) -> str:
    cell = _e(s.model_name or "—")
    if s.model_inferred:
        cell += ' <span class="flag" title="no run record: the model most requests named">'\
                "inferred</span>"
    if s.mixed_models:
        cell += (f' <span class="flag" title="requests named several models: '
                 f'{_e(s.models_seen or "")}">mixed</span>')
    return cell


_COLUMNS = (
    _Column("test", "Test", lambda s: s.test_id, lambda s: _e(s.test_id), False, "asc"),
    _Column("started", "Started (UTC)", lambda s: s.started, lambda s: _e(minute(s.started)),
            False, "desc"),
    _Column("model", "Model", lambda s: s.model_name, _model, False, "asc"),
    _Column("server", "Server", lambda s: s.server, _text("server"), False, "asc"),
    _Column("accelerator", "Accelerator", lambda s: s.accelerator, _text("accelerator"),
            False, "asc"),
    _Column("users", "Users", lambda s: s.users, lambda s: _e(count(s.users)), True, "desc"),
    _Column("duration", "Duration", lambda s: s.duration_s,
            lambda s: _e(seconds(s.duration_s)), True, "desc"),
    _Column("requests", "Requests", lambda s: s.requests, lambda s: _e(count(s.requests)),
            True, "desc"),
    _Column("qps", "QPS", lambda s: s.qps, lambda s: _e(decimal(s.qps)), True, "desc"),
    _Column("success_qps", "Success QPS", lambda s: s.success_qps,
            lambda s: _e(decimal(s.success_qps)), True, "desc"),
    _Column("goodput", "Goodput", lambda s: s.goodput,
            lambda s: _e("no SLOs" if s.goodput is None else percent(s.goodput)), True, "desc"),
    _Column("error_rate", "Error rate", lambda s: s.error_rate,
            lambda s: _e(percent(s.error_rate)), True, "desc"),
    _Column("p50", "p50 (ms)", lambda s: s.p50_ms, lambda s: _e(decimal(s.p50_ms)), True,
            "asc"),
    _Column("p99", "p99 (ms)", lambda s: s.p99_ms, lambda s: _e(decimal(s.p99_ms)), True,
            "asc"),
    _Column("ttft_p50", "TTFT p50 (ms)", lambda s: s.ttft_p50_ms,
            lambda s: _e(decimal(s.ttft_p50_ms)), True, "asc"),
    _Column("tpot_p50", "TPOT p50 (ms)", lambda s: s.tpot_p50_ms,
            lambda s: _e(decimal(s.tpot_p50_ms)), True, "asc"),
    _Column("tokens_per_s", "Tokens/s", lambda s: s.tokens_per_s,
            lambda s: _e(decimal(s.tokens_per_s)), True, "desc"),
)
SORTS: dict[str, _Column] = {column.key: column for column in _COLUMNS}
DEFAULT_SORT: tuple[str, Direction] = ("started", "desc")


def sort_order(sort: str | None, direction: str | None) -> tuple[str, Direction]:
    """The column and direction to sort by: ``sort`` if it is a column, in ``direction``
    if that is ``asc`` or ``desc`` (else the column's usual first direction); newest
    first for anything else."""
    if sort is None or sort not in SORTS:
        return DEFAULT_SORT
    if direction == "asc":
        return sort, "asc"
    if direction == "desc":
        return sort, "desc"
    return sort, SORTS[sort].first


def _sorted(tests: Sequence[TestSummary], key: str, direction: Direction) -> list[TestSummary]:
    value = SORTS[key].value
    # Newest first, then by id, breaks ties; unknown values go last in either direction.
    ties = sorted(tests, key=lambda s: (-s.started.timestamp(), s.test_id))
    known = [s for s in ties if value(s) is not None]
    unknown = [s for s in ties if value(s) is None]
    return sorted(known, key=value, reverse=direction == "desc") + unknown


def _header(column: _Column, key: str, direction: Direction) -> str:
    cls = " class=num" if column.numeric else ""
    if column.key == key:
        following: Direction = "asc" if direction == "desc" else "desc"
        marker = "\u00a0▲" if direction == "asc" else "\u00a0▼"
        state = ' aria-sort="ascending"' if direction == "asc" else ' aria-sort="descending"'
    else:
        following, marker, state = column.first, "", ""
    href = f"?sort={column.key}&dir={following}"
    return (f'<th{cls}{state}><a class=sort href="{_e(href)}">'
            f"{_e(column.header)}{marker}</a></th>")


def _row(s: TestSummary, link: Callable[[str], str]) -> str:
    cells = [f'<td class="id" title="{_e(s.test_id)}">'
             f'<a href="{_e(link(s.test_id))}">{_e(s.test_id)}</a></td>']
    for column in _COLUMNS[1:]:
        cls = "num" if column.numeric else ("nowrap" if column.key == "started" else "text")
        cells.append(f"<td class={cls}>{column.cell(s)}</td>")
    return f"<tr>{''.join(cells)}</tr>"


def _links(savings_href: str | None, jobs_href: str | None) -> str:
    links = [f'<a class=nav href="{_e(href)}">{text}</a>' for href, text in (
        (savings_href, "Accelerator-hours saved by off-hours node-pool removal"),
        (jobs_href, "Jobs: queue wait, run time and chip-hours")) if href is not None]
    return f"<p class=meta>{' · '.join(links)}</p>" if links else ""


def index_page(tests: Sequence[TestSummary], link: Callable[[str], str],
               sort: str | None = None, direction: str | None = None,
               savings_href: str | None = None, jobs_href: str | None = None) -> str:
    """A table of ``tests``, each id a link to ``link(test_id)``, sorted by ``sort`` in
    ``direction`` (see :func:`sort_order`); links to the savings and jobs pages when
    ``savings_href`` and ``jobs_href`` are given."""
    savings = _links(savings_href, jobs_href)
    if not tests:
        return page("Load tests", "<h1>Load tests</h1><p class=meta>No load tests yet.</p>"
                    + savings, wide=True)
    key, order = sort_order(sort, direction)
    column = SORTS[key]
    way = {("started", "desc"): "newest first", ("started", "asc"): "oldest first"}.get(
        (key, order), "ascending" if order == "asc" else "descending")
    head = "".join(_header(c, key, order) for c in _COLUMNS)
    rows = "".join(_row(s, link) for s in _sorted(tests, key, order))
    meta = (f"The {len(tests)} most recent load tests, by {_e(column.header)}, {way}. "
            "Latency is over successful requests; QPS counts every request, success QPS "
            "only those that succeeded; goodput is the share of all requests that "
            "succeeded within every SLO given with the test; TTFT (time to first token) "
            "and TPOT (time per output token) are over streamed requests.")
    body = (f"<h1>Load tests</h1><p class=meta>{meta}</p>{savings}"
            + scroll(f'<table class="tests"><thead><tr>{head}</tr></thead>'
                     f"<tbody>{rows}</tbody></table>"))
    return page("Load tests", body, wide=True)
