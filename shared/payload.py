"""User-supplied JSON, decoded within explicit limits.

Whoever can publish to a topic controls every byte a function parses, so the limits
are part of the public contract (docs/architecture/job-requests.md, "Limits on what
a message may hold") and are checked before any expensive work: size before decoding,
structure before validation, validation before any I/O.

Two steps, both pure:

* :func:`decode` checks the size and the UTF-8, then parses. A value the JSON grammar
  allows but this project does not — an integer too long for Python to convert (over
  4,300 digits; only then is the text parsed again, with a hook per integer),
  ``NaN``/``Infinity`` (not JSON at all), an object with a duplicate key (its meaning
  would depend on which parser reads it) — does not abort the parse: it becomes an
  :class:`Unusable` marker, or a :class:`DuplicateKeys` object, so the caller decides
  at which level to refuse it (a whole job request; one record of a metrics batch).
  Anything that stops the parser itself (syntax, nesting deeper than its recursion
  allows, any other exception) refuses the whole message.
* :func:`check` walks a decoded value without recursion and returns the first
  :class:`Problem` in document order: nesting, container size, string length, lone
  surrogates (text that cannot be stored or sent on as UTF-8), markers, integers of
  too many digits, non-finite floats. Its cost is linear in the value, which the size
  limit bounds, and an object of plain scalars (nearly every record) is checked in one
  tight loop.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from shared.errors import PermanentError
from shared.safetext import lone_surrogate

__all__ = [
    "DuplicateKeys",
    "Limits",
    "Problem",
    "Unusable",
    "check",
    "decode",
    "decode_array",
    "format_path",
    "lone_surrogate",
]

# How much of an object key a path shows: keys are user text of any length.
_PATH_KEY_CHARS = 64


@dataclass(frozen=True, slots=True)
class Limits:
    """What one message may hold. ``max_depth`` counts nested arrays and objects
    (``[[1]]`` is 2 deep); ``max_items`` bounds every array and object;
    ``max_digits`` bounds the digits of one integer (a float is any finite double)."""

    max_bytes: int
    max_depth: int = 16
    max_digits: int = 40
    max_string_chars: int = 4096
    max_items: int = 256


class Unusable:
    """A value the JSON grammar allows but accelops refuses; ``rule`` says why."""

    __slots__ = ("rule",)

    def __init__(self, rule: str) -> None:
        self.rule = rule

    def __repr__(self) -> str:
        return f"<{self.rule}>"


class DuplicateKeys(dict[str, Any]):
    """An object that named some key more than once (the last value is kept)."""

    duplicates: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Problem:
    """Where a decoded value breaks a limit, and the rule it breaks."""

    path: tuple[str | int, ...]
    rule: str

    @property
    def field(self) -> str:
        return format_path(self.path)

    def __str__(self) -> str:
        return f"{self.field}: {self.rule}"


def format_path(path: tuple[str | int, ...]) -> str:
    """``tpu.slices``, ``args.3``; ``<root>`` for the value itself (the dotted form
    pydantic's error locations use, so both kinds of error read alike)."""
    if not path:
        return "<root>"
    return ".".join(str(p) if isinstance(p, int) else _key(p) for p in path)


def _key(key: str) -> str:
    """A key as a path shows it: clipped, and with lone surrogates escaped (a path is
    written into logs and rejection records, which must stay valid UTF-8)."""
    if len(key) > _PATH_KEY_CHARS:
        key = key[:_PATH_KEY_CHARS] + "…"
    if lone_surrogate(key) is not None:
        key = key.encode("utf-8", "backslashreplace").decode("utf-8")
    return key


def _data_error(message: str, rule: str) -> PermanentError:
    return PermanentError(message, field="data", rule=rule)


# ----------------------------------------------------------------------------- decode
def _digits_rule(limits: Limits, digits: int) -> str:
    return f"an integer of at most {limits.max_digits} digits (this one has {digits:,})"


def _integer(text: str, limits: Limits) -> Any:
    digits = len(text) - text.startswith("-")
    if digits > limits.max_digits:
        return Unusable(_digits_rule(limits, digits))
    return int(text)


def _constant(name: str) -> Unusable:
    return Unusable(f"{name} is not a JSON number")


def _members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) == len(pairs):
        return members
    seen: set[str] = set()
    repeated: dict[str, None] = {}
    for key, _ in pairs:
        if key in seen:
            repeated[key] = None
        seen.add(key)
    marked = DuplicateKeys(members)
    marked.duplicates = tuple(repeated)
    return marked


def decode(data: bytes, limits: Limits) -> Any:
    """The JSON value in ``data``, with refused values marked (see the module docstring).

    Raises PermanentError (field ``data``) when the data is larger than the limit, is
    not UTF-8, is not JSON, or cannot be parsed at all.
    """
    text, decoder = _prepare(data, limits)
    try:
        return _parse(decoder, text, limits)
    except RecursionError as exc:
        raise _too_deep(limits) from exc


def decode_array(data: bytes, limits: Limits) -> Any:
    """Like :func:`decode`, but an element of a top-level array nested deeper than the
    parser can follow becomes an :class:`Unusable` marker instead of failing the array:
    the other elements (records of a batch) are still read.

    The fallback reads the array one element at a time and skips a too-deep element by
    matching its brackets, in time linear in its size; only such arrays pay for it.
    """
    text, decoder = _prepare(data, limits)
    try:
        return _parse(decoder, text, limits)
    except RecursionError as exc:
        if not text.lstrip(_WHITESPACE).startswith("["):
            raise _too_deep(limits) from exc
    return _elements(_careful(limits), text, limits)


_WHITESPACE = " \t\n\r"
# Strings (skipped whole) and brackets: what matching a value's end needs to see. A
# string without its closing quote takes the rest of the text (possessively, with no
# backtracking): otherwise every later quote would start a scan to the end, and
# '"\\"\\"\\"…' would cost time quadratic in its length.
_STRUCTURE = re.compile(r'"(?:[^"\\]|\\.)*+"?|[\[\]{}]')


def _too_deep(limits: Limits) -> PermanentError:
    return _data_error(f"message data is nested deeper than {limits.max_depth} levels",
                       f"nesting depth at most {limits.max_depth}")


def _skip_value(text: str, start: int) -> int:
    """The end of the array or object starting at ``start`` (its brackets matched)."""
    depth = 0
    for match in _STRUCTURE.finditer(text, start):
        found = match.group()  # a bracket, or a whole string (never one character)
        if found in "[{":
            depth += 1
        elif found in "]}":
            depth -= 1
            if depth == 0:
                return match.end()
    raise _data_error("message data is not JSON: unterminated array or object",
                      "must be UTF-8 JSON")


def _elements(decoder: json.JSONDecoder, text: str, limits: Limits) -> list[Any]:
    def skip_space(at: int) -> int:
        while at < len(text) and text[at] in _WHITESPACE:
            at += 1
        return at

    def expect(at: int, what: str) -> PermanentError:
        return _data_error(f"message data is not JSON: expected {what} at character {at}",
                           "must be UTF-8 JSON")

    elements: list[Any] = []
    at = skip_space(skip_space(0) + 1)  # past "["
    while at < len(text) and text[at] != "]":
        try:
            with _parsing():
                value, at = decoder.raw_decode(text, at)
        except RecursionError:
            # An element sits one level inside the array: its own limit is one less.
            value, at = Unusable(f"nesting depth at most {limits.max_depth - 1}"), \
                _skip_value(text, at)
        elements.append(value)
        at = skip_space(at)
        if at < len(text) and text[at] == ",":
            at = skip_space(at + 1)
            if at < len(text) and text[at] == "]":
                raise expect(at, "a value after ','")
        elif at >= len(text) or text[at] != "]":
            raise expect(at, "',' or ']'")
    if at >= len(text) or skip_space(at + 1) != len(text):
        raise expect(at, "the end of the array")
    return elements


def _prepare(data: bytes, limits: Limits) -> tuple[str, json.JSONDecoder]:
    if len(data) > limits.max_bytes:
        raise _data_error(f"message data is {len(data):,} bytes; at most "
                          f"{limits.max_bytes:,} are accepted",
                          f"at most {limits.max_bytes:,} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _data_error(f"message data is not UTF-8 text (invalid byte at offset "
                          f"{exc.start})", "must be UTF-8 JSON") from exc
    return text, json.JSONDecoder(parse_constant=_constant, object_pairs_hook=_members)


def _careful(limits: Limits) -> json.JSONDecoder:
    """A decoder that turns integers too long to convert into markers (a Python call per
    integer, so only used once the fast one met such an integer)."""
    return json.JSONDecoder(parse_constant=_constant, object_pairs_hook=_members,
                            parse_int=partial(_integer, limits=limits))


def _parse(decoder: json.JSONDecoder, text: str, limits: Limits) -> Any:
    """Parse the whole text; RecursionError is left to the caller."""
    with _parsing():
        try:
            return decoder.decode(text)
        except ValueError as exc:
            if isinstance(exc, json.JSONDecodeError):
                raise
        # An integer over Python's conversion limit (4,300 digits): read it as a marker.
        return _careful(limits).decode(text)


@contextmanager
def _parsing() -> Iterator[None]:
    """Parser failures as PermanentError, except RecursionError (the callers' to decide)."""
    try:
        yield
    except json.JSONDecodeError as exc:
        raise _data_error(f"message data is not JSON: {exc.msg} at line {exc.lineno} "
                          f"column {exc.colno}", "must be UTF-8 JSON") from exc
    except (RecursionError, MemoryError):
        raise
    except Exception as exc:
        # The parser is pure: whatever else it raises is about these bytes, which will
        # fail the same way on every retry. Name the cause rather than retry for ever.
        raise _data_error(f"message data could not be parsed: {type(exc).__name__}: "
                          f"{exc}", "must be UTF-8 JSON") from exc


# ------------------------------------------------------------------------------ check
def _string_rule(text: str, limits: Limits) -> str | None:
    if len(text) > limits.max_string_chars:
        return (f"a string of at most {limits.max_string_chars:,} characters "
                f"(this one has {len(text):,})")
    at = lone_surrogate(text)
    if at is not None:
        return (f"must be valid Unicode text (lone surrogate U+{ord(text[at]):04X} at "
                f"character {at})")
    return None


def _children(value: dict[str, Any] | list[Any]) -> Iterator[tuple[str | int, Any]]:
    return iter(value.items()) if isinstance(value, dict) else enumerate(value)


def check(value: Any, limits: Limits, path: tuple[str | int, ...] = ()) -> Problem | None:
    """The first problem of a decoded value in document order, or None.

    ``path`` prefixes the reported paths (a record's index in its batch, say).
    """
    if _plain_object(value, limits, 10 ** limits.max_digits):
        return None
    problem = _scalar_problem(value, limits)
    if problem is not None:
        return Problem(path, problem)
    if not isinstance(value, dict | list):
        return None
    # A stack of open containers with their child iterators: iterative, so nesting
    # costs no Python recursion however deep the (already parsed) value goes.
    top = _container_problem(value, 1, limits)
    if top is not None:
        return Problem(path, top)
    stack: list[tuple[tuple[str | int, ...], Iterator[tuple[str | int, Any]]]] = [
        (path, _children(value))]
    while stack:
        where, children = stack[-1]
        step = next(children, None)
        if step is None:
            stack.pop()
            continue
        key, child = step
        here = (*where, key)
        if isinstance(key, str):
            rule = _string_rule(key, limits)
            if rule is not None:
                return Problem(here, f"key {rule}")
        rule = _scalar_problem(child, limits)
        if rule is None and isinstance(child, dict | list):
            rule = _container_problem(child, len(stack) + 1, limits)
            if rule is None:
                stack.append((here, _children(child)))
                continue
        if rule is not None:
            return Problem(here, rule)
    return None


def _plain_string(text: str, limits: Limits) -> bool:
    return len(text) <= limits.max_string_chars and lone_surrogate(text) is None


def _plain_object(value: Any, limits: Limits, bound: int) -> bool:
    """Whether ``value`` is an object of plain scalars within the limits — what nearly
    every record and request is. Answered in one tight loop; anything else (or any doubt)
    is left to the full walk, which finds the problem and its path."""
    if type(value) is not dict or len(value) > limits.max_items or limits.max_depth < 1:
        return False
    for key, item in value.items():
        if not _plain_string(key, limits):
            return False
        kind = type(item)
        if kind is str:
            if not _plain_string(item, limits):
                return False
        elif kind is float:
            if item - item != 0:  # NaN or an infinity
                return False
        elif kind is int:
            if not -bound < item < bound:
                return False
        elif not (kind is bool or item is None):
            return False
    return True


def _scalar_problem(value: Any, limits: Limits) -> str | None:
    if isinstance(value, str):
        return _string_rule(value, limits)
    if isinstance(value, Unusable):
        return value.rule
    if isinstance(value, float) and not math.isfinite(value):
        return "a number within the range of a 64-bit float"
    if (isinstance(value, int) and not isinstance(value, bool)
            and not -10 ** limits.max_digits < value < 10 ** limits.max_digits):
        return _digits_rule(limits, len(str(abs(value))))
    return None


def _container_problem(value: dict[str, Any] | list[Any], depth: int,
                       limits: Limits) -> str | None:
    if depth > limits.max_depth:
        return f"nesting depth at most {limits.max_depth}"
    if len(value) > limits.max_items:
        kind = "members" if isinstance(value, dict) else "items"
        return f"at most {limits.max_items:,} {kind} (this one has {len(value):,})"
    if isinstance(value, DuplicateKeys):
        names = ", ".join(repr(k[:_PATH_KEY_CHARS]) for k in value.duplicates[:5])
        return f"each key at most once (repeated: {names})"
    return None
