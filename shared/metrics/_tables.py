"""The tables of the daily reports (savings, jobs): aligned text for the command line
and the same rows as HTML for the dashboard.

A table is a header and rows of cells already formatted as text; its last
``numeric`` columns are numbers (right-aligned), the rest text. The two renderings
take the same cells, so the command line and the page can never disagree.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from shared.metrics._html import _e, scroll

__all__ = ["aligned", "html_table", "window_links"]

Row = tuple[str, ...]


def aligned(rows: Sequence[Row], numeric: int) -> list[str]:
    """``rows`` (the header first) as lines of aligned columns, numbers to the right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    numeric_from = len(widths) - numeric
    return ["  ".join(cell.rjust(width) if i >= numeric_from else cell.ljust(width)
                      for i, (cell, width) in enumerate(zip(row, widths, strict=True))).rstrip()
            for row in rows]


def html_table(headers: Sequence[str], rows: Sequence[Row], *, numeric: int, css: str,
               nowrap: Collection[int] = (), total: Row | None = None) -> str:
    """A scrolling ``<table class=css>``: numbers right-aligned, the columns at ``nowrap``
    (a day with its mark, an instant) kept on one line, other text wrapping; ``total``
    as a last, bold row."""
    classes = ["nowrap" if i in nowrap else "text" for i in range(len(headers))]
    classes[len(headers) - numeric:] = ["num"] * numeric

    def cells(values: Sequence[str], tag: str) -> str:
        return "".join(f"<{tag} class={cls}>{_e(v)}</{tag}>"
                       for cls, v in zip(classes, values, strict=True))

    head = cells(headers, "th")
    body = "".join(f"<tr>{cells(row, 'td')}</tr>" for row in rows)
    foot = f"<tr class=total>{cells(total, 'td')}</tr>" if total else ""
    return scroll(f'<table class="{_e(css)}"><thead><tr>{head}</tr></thead>'
                  f"<tbody>{body}{foot}</tbody></table>")


def window_links(since: str, since_href: dict[str, str]) -> str:
    """The windows a page offers (window → link), the one shown in bold, not a link."""
    return " · ".join(
        f"<strong>{_e(choice)}</strong>" if choice == since else
        f'<a class=nav href="{_e(href)}">{_e(choice)}</a>' for choice, href in since_href.items())
