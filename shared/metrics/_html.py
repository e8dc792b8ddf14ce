"""What every page of the reports and the dashboard shares: the CSS, the page shell,
escaping, number formats, and the error page.

Plain f-strings rather than a template engine: a few small pages do not justify a
dependency, and one ``_e`` (``html.escape``) at every interpolation of data is easy to
check by eye. Pages carry their CSS inline and no scripts, so a report directory opens
offline and the dashboard can send a strict Content-Security-Policy.

The layout holds from 800 px to wide screens: anything that can be wider than the
window (tables, long ids, failure messages) either wraps anywhere or sits in a
``<div class="scroll">`` that scrolls sideways by itself, so the page never does.
"""

from __future__ import annotations

import html
from datetime import UTC, datetime

__all__ = ["error_page", "page"]

_CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;
margin:0 auto;padding:24px;max-width:1180px}
body.wide{max-width:none}
h1{font-size:22px;margin:0 0 6px;overflow-wrap:anywhere}h1 code{font-size:19px}
h2{font-size:17px;margin:28px 0 8px}
h3{font-size:15px;margin:16px 0 6px;overflow-wrap:anywhere}
code{overflow-wrap:anywhere}
p{margin:0 0 10px;overflow-wrap:anywhere}.meta{color:#59636e;margin:0 0 14px}
.back{margin:0 0 12px}
.scroll{overflow-x:auto;max-width:100%;margin:0 0 20px}
table{border-collapse:collapse;width:100%}
th,td{padding:5px 10px;border-bottom:1px solid #d1d9e0;text-align:left;vertical-align:top}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
thead th.num{white-space:normal}
td.text{overflow-wrap:anywhere;min-width:8em}td.name{overflow-wrap:anywhere;min-width:13em}
td.msg{overflow-wrap:anywhere;min-width:16em}
thead th{background:#f6f8fa}
th a{color:inherit;text-decoration:none}
table.tests th,table.tests td{padding:5px 7px}
table.tests td.text{min-width:6em}
th a:hover{text-decoration:underline}
td.id a{display:inline-block;max-width:18em;overflow:hidden;text-overflow:ellipsis;
white-space:nowrap;vertical-align:bottom}
td.nowrap{white-space:nowrap}
tr.total td,tr.total th{font-weight:600}
.good{color:#1a7f37;font-weight:600}.bad{color:#cf222e;font-weight:600}
.same{color:#59636e}tr.differs td{background:#fff8c5}
.flag{display:inline-block;padding:0 6px;border-radius:8px;background:#fff1e5;
color:#953800;font-size:12px;white-space:nowrap}
.warning{border:1px solid #d4a72c;background:#fff8c5;border-radius:6px;padding:8px 12px;
margin:0 0 10px;overflow-wrap:anywhere}
.note{border:1px solid #54aeff;background:#ddf4ff;border-radius:6px;padding:8px 12px;
margin:0 0 10px;overflow-wrap:anywhere}
form.baseline{margin:0 0 14px;display:flex;flex-wrap:wrap;gap:8px;align-items:center}
select{max-width:100%;min-width:0;font:inherit}
button{font:inherit}
figure{margin:0 0 20px}figcaption{color:#59636e;overflow-wrap:anywhere}
img{max-width:100%;height:auto;border:1px solid #d1d9e0}
a{color:#0969da}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def page(title: str, body: str, *, wide: bool = False) -> str:
    """A whole HTML document: ``title`` is text (escaped here), ``body`` is markup.

    ``wide`` lets the body use the whole window (the test list) instead of a column.
    """
    body_class = ' class="wide"' if wide else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_CSS}</style></head>"
            f"<body{body_class}>{body}</body></html>\n")


def error_page(status: int, title: str, reason: str, index_href: str | None = "/") -> str:
    """A page for an HTTP error: ``status`` and ``title`` as its heading, ``reason`` (often
    containing what the visitor typed) as text, and a link back to ``index_href``."""
    return page(f"{status} {title}",
                f"{back_link(index_href)}<h1>{_e(status)} {_e(title)}</h1><p>{_e(reason)}</p>")


def scroll(table: str) -> str:
    """``table`` in a container that scrolls sideways when the window is narrower."""
    return f'<div class="scroll">{table}</div>'


def back_link(index_href: str | None) -> str:
    """The link back to the test list, or nothing (an offline report has no list)."""
    if index_href is None:
        return ""
    return f'<p class=back><a href="{_e(index_href)}">← All load tests</a></p>'


# --- formats: every one answers "—" for a value that is not known ---------------------

DASH = "—"


def count(value: int | None) -> str:
    return DASH if value is None else f"{value:,}"


def decimal(value: float | None, places: int = 1) -> str:
    return DASH if value is None else f"{value:,.{places}f}"


def percent(rate: float | None) -> str:
    """A fraction as a percentage: 0.005 → ``0.50 %``."""
    return DASH if rate is None else f"{rate * 100:.2f} %"


def seconds(value: float | None) -> str:
    """A duration: ``45.0 s``, ``5 min 0 s``, ``2 h 5 min``."""
    if value is None:
        return DASH
    minutes, secs = divmod(round(value), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{value:.1f} s"


def instant(value: datetime) -> str:
    """``2025-03-01 12:00:00 UTC``."""
    return _utc(value).strftime("%Y-%m-%d %H:%M:%S UTC")


def minute(value: datetime) -> str:
    """``2025-03-01 12:00``, in UTC (for columns headed so)."""
    return _utc(value).strftime("%Y-%m-%d %H:%M")


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC) if value.tzinfo else value
