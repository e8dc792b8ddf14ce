"""The ``since`` argument of the dashboard's daily pages (savings, jobs).

A window that is not a duration like ``7d``, ``36h`` or ``2w``
(:func:`shared.metrics.window.parse_since`) is refused with a 400 before BigQuery is
asked; ``app.py`` maps :class:`BadWindow` to that page.
"""

from __future__ import annotations

from typing import Any

from flask import request, url_for

from shared.metrics.window import DEFAULT_SINCE, SINCE_CHOICES, parse_since

__all__ = ["BadWindow", "since_arg", "since_links"]


class BadWindow(ValueError):
    """A ``since`` argument that is not a window."""


def since_arg() -> str:
    """The request's window (default a week); BadWindow when it is not one."""
    since = request.args.get("since", "").strip() or DEFAULT_SINCE
    try:
        parse_since(since)
    except ValueError as exc:
        raise BadWindow(f"since: {exc}") from None
    return since


def since_links(endpoint: str, since: str, **args: Any) -> dict[str, str]:
    """The windows a page offers (and the one shown), each a link to ``endpoint``."""
    return {choice: url_for(endpoint, since=choice, **args)
            for choice in dict.fromkeys((*SINCE_CHOICES, since))}
