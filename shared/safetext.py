"""Text that can always be written: rejection records, log lines, error attributes.

A refused input has to be recorded, and the record must never fail for the same reason
the input did. So text headed for a rejection record is made storable here:

* :func:`clean` replaces lone surrogates (which no UTF-8 encoder accepts) with U+FFFD
  and, when it did, keeps the exact original — as WTF-8 bytes, base64-encoded — so
  nothing is lost; it clips long text with a marker that says how long it was;
* :func:`preview` renders any decoded JSON value as JSON-like text of bounded length,
  without recursion and without ever raising, however deep or large the value is:
  the cost is proportional to what it writes, not to the value.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Clean", "clean", "clip", "lone_surrogate", "preview"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(text: str) -> int | None:
    """The index of the first lone surrogate in ``text``, or None when it has none —
    that is, exactly when it can be encoded as UTF-8. JSON's ``\\ud800`` escapes decode
    to one, and no UTF-8 encoder (BigQuery, Pub/Sub, Kubernetes, a log line) accepts it."""
    if text.isascii():
        return None
    match = _SURROGATE.search(text)
    return match.start() if match else None


@dataclass(frozen=True, slots=True)
class Clean:
    """Storable text; ``original_base64`` is set when characters had to be replaced."""

    text: str
    original_base64: str | None = None


def clip(text: str, max_chars: int) -> str:
    """``text`` whole, or its start and ``… [clipped: N characters in all]``, within
    ``max_chars`` (the marker included)."""
    if len(text) <= max_chars:
        return text
    marker = f"… [clipped: {len(text):,} characters in all]"
    return (text[:max(0, max_chars - len(marker))] + marker)[:max_chars]


def clean(text: str, max_chars: int, *, max_original_bytes: int = 16_384) -> Clean:
    """``text`` made encodable as UTF-8 and clipped to ``max_chars``.

    When lone surrogates were replaced, ``original_base64`` holds the first
    ``max_original_bytes`` of the original as WTF-8 (UTF-8 that lets surrogates through),
    from which the exact text can be recovered.
    """
    original: str | None = None
    if lone_surrogate(text) is not None:
        raw = text.encode("utf-8", "surrogatepass")[:max_original_bytes]
        original = base64.b64encode(raw).decode("ascii")
        text = _SURROGATE.sub("\ufffd", text)
    return Clean(clip(text, max_chars), original)


class _Raw(str):
    """Text emitted as it is (punctuation, rendered keys), not rendered as a value."""


def _tokens(value: Any, max_chars: int) -> Iterator[str]:
    # A stack of iterators instead of recursion: a value nested a thousand levels deep
    # (the parser's own limit) renders like any other.
    stack: list[Iterator[Any]] = [iter((value,))]
    while stack:
        item = next(stack[-1], _END)
        if item is _END:
            stack.pop()
        elif isinstance(item, _Raw):
            yield item
        elif isinstance(item, dict):
            stack.append(_object_tokens(item, max_chars))
        elif isinstance(item, list | tuple):
            stack.append(_array_tokens(item))
        else:
            yield _scalar(item, max_chars)


_END = object()


def _object_tokens(value: dict[Any, Any], max_chars: int) -> Iterator[Any]:
    yield _Raw("{")
    for index, (key, member) in enumerate(value.items()):
        yield _Raw(("" if index == 0 else ", ") + _scalar(str(key), max_chars) + ": ")
        yield member
    yield _Raw("}")


def _array_tokens(value: list[Any] | tuple[Any, ...]) -> Iterator[Any]:
    yield _Raw("[")
    for index, item in enumerate(value):
        if index:
            yield _Raw(", ")
        yield item
    yield _Raw("]")


def _scalar(value: Any, max_chars: int) -> str:
    if isinstance(value, str):
        # Clipped before encoding, so a megabyte string costs what its preview shows.
        return json.dumps(value[:max_chars + 1], ensure_ascii=False)
    if value is None or isinstance(value, bool | int | float):
        try:
            return json.dumps(value)
        except ValueError:  # an integer too long for str() (the parser's limits allow none)
            return "<number too long to show>"
    return clip(repr(value), max_chars)


def preview(value: Any, max_chars: int) -> str:
    """JSON-like text of ``value`` (a decoded JSON value), clipped to ``max_chars``.

    It is JSON whenever the value is and the text fits; markers for refused values
    show as ``<rule>``. Never raises.
    """
    parts: list[str] = []
    size = 0
    clipped = False
    for token in _tokens(value, max_chars):
        parts.append(token)
        size += len(token)
        if size > max_chars:
            clipped = True
            break
    text = "".join(parts)
    if clipped:
        marker = "… [clipped]"
        return (text[:max(0, max_chars - len(marker))] + marker)[:max_chars]
    return text
