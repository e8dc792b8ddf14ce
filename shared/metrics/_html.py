"""The HTML of the report and the test list: formatting, the change column, the page.

Plain f-strings rather than a template engine: two small pages do not justify a
dependency, and one ``_e`` (``html.escape``) at every interpolation of data is easy
to check by eye. Pages carry their CSS inline and no scripts, so a report directory
opens offline and the dashboard can send a strict Content-Security-Policy.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import Literal

from shared.metrics.model import TestSummary

__all__ = ["index_page", "report_page"]

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;
margin:0 auto;padding:24px;max-width:980px}
h1{font-size:22px;margin:0 0 4px}h1 code{font-size:20px}
.meta{color:#59636e;margin:0 0 20px}
table{border-collapse:collapse;margin:0 0 24px;width:100%}
th,td{padding:5px 10px;border-bottom:1px solid #d1d9e0;text-align:left}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
thead th{background:#f6f8fa}
.good{color:#1a7f37;font-weight:600}.bad{color:#cf222e;font-weight:600}
.same{color:#59636e}tr.differs td{background:#fff8c5}
figure{margin:0 0 20px}img{max-width:100%;height:auto;border:1px solid #d1d9e0}
a{color:#0969da}
"""

# +1: higher is better, -1: lower is better, 0: neither (load shape, not outcome).
Direction = Literal[1, -1, 0]

_ALT = {
    "latency": "Latency p50, p90 and p99 (ms) over time",
    "throughput": "Throughput (requests/s) over time",
    "errors": "Errors per bucket and error rate (%) over time",
    "tokens": "Output tokens/s over time",
}


@dataclass(frozen=True)
class _Row:
    label: str
    field: str
    show: Callable[[TestSummary], str]
    direction: Direction | None  # None: text, no change column


def _text(field: str) -> Callable[[TestSummary], str]:
    return lambda s: str(getattr(s, field) or "—")


def _number(field: str, fmt: str) -> Callable[[TestSummary], str]:
    def show(s: TestSummary) -> str:
        value = getattr(s, field)
        return "—" if value is None else format(value, fmt)
    return show


def _duration(s: TestSummary) -> str:
    minutes, seconds = divmod(round(s.duration_s), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{s.duration_s:.1f} s"


def _started(s: TestSummary) -> str:
    started = s.started.astimezone(UTC) if s.started.tzinfo else s.started
    return started.strftime("%Y-%m-%d %H:%M:%S UTC")


_ROWS = (
    _Row("Model", "model_name", _text("model_name"), None),
    _Row("Server", "server", _text("server"), None),
    _Row("Accelerator", "accelerator", _text("accelerator"), None),
    _Row("Users", "users", _number("users", ","), 0),
    _Row("Started", "started", _started, None),
    _Row("Duration", "duration_s", _duration, 0),
    _Row("Requests", "requests", _number("requests", ","), 0),
    _Row("QPS (requests/s)", "qps", _number("qps", ",.1f"), 1),
    _Row("Error rate", "error_rate", lambda s: f"{s.error_rate * 100:.2f} %", -1),
    _Row("p50 latency (ms)", "p50_ms", _number("p50_ms", ",.1f"), -1),
    _Row("p90 latency (ms)", "p90_ms", _number("p90_ms", ",.1f"), -1),
    _Row("p99 latency (ms)", "p99_ms", _number("p99_ms", ",.1f"), -1),
    _Row("Output tokens/s", "tokens_per_s", _number("tokens_per_s", ",.1f"), 1),
)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _change_cell(before: float | None, after: float | None, direction: Direction) -> str:
    """The change column: ``+12.3 %``, classed good, bad or same for ``direction``."""
    if before is None or after is None:
        return '<td class="num same">—</td>'
    if before == 0:
        text, sign = ("0.0 %", 0) if after == 0 else ("n/a (from 0)", 1 if after > 0 else -1)
    else:
        change = (after - before) / abs(before)
        text = f"{change * 100:+.1f} %"
        sign = 0 if text in ("+0.0 %", "-0.0 %") else (1 if change > 0 else -1)
    verdict = "same" if sign == 0 or direction == 0 else (
        "good" if sign == direction else "bad")
    return f'<td class="num {verdict}">{_e(text)}</td>'


def _summary_table(test: TestSummary, other: TestSummary | None) -> str:
    head = f"<th></th><th class=num>{_e(test.test_id)}</th>"
    if other is not None:
        head += (f"<th class=num>{_e(other.test_id)} (baseline)</th>"
                 f"<th class=num>Change vs {_e(other.test_id)}</th>")
    rows = []
    for row in _ROWS:
        cells = f"<th>{row.label}</th><td class=num>{_e(row.show(test))}</td>"
        attrs = ""
        if other is not None:
            cells += f"<td class=num>{_e(row.show(other))}</td>"
            if row.direction is None:
                cells += "<td></td>"
                if row.show(test) != row.show(other):
                    attrs = ' class="differs"'
            else:
                cells += _change_cell(getattr(other, row.field), getattr(test, row.field),
                                     row.direction)
        rows.append(f"<tr{attrs}>{cells}</tr>")
    return (f'<table class="summary"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def _page(title: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_CSS}</style></head>"
            f"<body>{body}</body></html>\n")


def report_page(test: TestSummary, other: TestSummary | None,
                per: Literal["second", "minute"], chart_srcs: Mapping[str, str]) -> str:
    """The report of ``test`` (compared with ``other``) with one image per chart src."""
    ids = [test.test_id] + ([other.test_id] if other is not None else [])
    title = "Load test " + " vs ".join(ids)
    heading = "Load test " + " vs ".join(f"<code>{_e(i)}</code>" for i in ids)
    who = " and ".join(ids)
    figures = "".join(
        f'<figure><img src="{_e(src)}" alt="{_e(_ALT.get(name, name))} for {_e(who)}" '
        f'width="900" height="360"></figure>'
        for name, src in chart_srcs.items())
    meta = (f"Charts per {per}; time axis in seconds since each test's start."
            + (" Change is the test against the baseline." if other is not None else ""))
    body = (f"<h1>{heading}</h1><p class=meta>{meta}</p>"
            f"{_summary_table(test, other)}<section class=charts>{figures}</section>")
    return _page(title, body)


def index_page(tests: list[TestSummary], link: Callable[[str], str]) -> str:
    """A table of ``tests`` in the given order, each id a link to ``link(test_id)``."""
    if not tests:
        return _page("Load tests", "<h1>Load tests</h1><p class=meta>No load tests yet.</p>")
    head = ("<tr><th>Test</th><th>Started</th><th>Model</th><th>Server</th>"
            "<th>Accelerator</th><th class=num>Users</th><th class=num>Duration</th>"
            "<th class=num>Requests</th><th class=num>QPS</th><th class=num>Error rate</th>"
            "<th class=num>p99 (ms)</th><th class=num>Tokens/s</th></tr>")
    shown = {row.field: row.show for row in _ROWS}
    rows = []
    for s in tests:
        cells = [f'<td><a href="{_e(link(s.test_id))}">{_e(s.test_id)}</a></td>']
        cells += [f"<td>{_e(shown[f](s))}</td>" for f in ("started", "model_name", "server",
                                                          "accelerator")]
        cells += [f"<td class=num>{_e(shown[f](s))}</td>"
                  for f in ("users", "duration_s", "requests", "qps", "error_rate",
                            "p99_ms", "tokens_per_s")]
        rows.append(f"<tr>{''.join(cells)}</tr>")
    body = (f"<h1>Load tests</h1><p class=meta>The {len(tests)} most recent, newest first.</p>"
            f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>")
    return _page("Load tests", body)

