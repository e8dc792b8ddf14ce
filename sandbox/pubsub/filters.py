"""Subscription filters: the attribute-only filter language of the real service.

Supported (the whole documented grammar): ``attributes:KEY``,
``attributes.KEY = "v"``, ``attributes.KEY != "v"``,
``hasPrefix(attributes.KEY, "p")``, ``NOT``/``-``, ``AND``, ``OR`` and
parentheses. Messages that do not match are never delivered to the
subscription, exactly like the real service (which acks them on the
subscriber's behalf). An unparsable filter is an INVALID_ARGUMENT at
subscription creation, again like the real service.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from sandbox.pubsub.errors import InvalidArgumentError

Predicate = Callable[[Mapping[str, str]], bool]

_TOKEN_RE = re.compile(
    r"""\s*(?:
        (?P<string>"(?:[^"\\]|\\.)*")
      | (?P<op>!=|=|:|\(|\)|,|-|\.)
      | (?P<word>[A-Za-z_][A-Za-z0-9_\-]*)
    )""",
    re.VERBOSE,
)


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if match is None:
            raise InvalidArgumentError(f"Invalid filter near position {pos}: {text!r}")
        kind = match.lastgroup or ""
        value = match.group(kind)
        if kind == "string":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        tokens.append((kind, value))
        pos = match.end()
    return tokens


class _Parser:
    """Recursive-descent parser producing a predicate over message attributes."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.pos = 0

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _take(self, kind: str, value: str | None = None) -> str:
        token = self._peek()
        if token is None or token[0] != kind or (value is not None and token[1] != value):
            raise InvalidArgumentError(f"Invalid filter: {self.text!r}")
        self.pos += 1
        return token[1]

    def _at_word(self, word: str) -> bool:
        token = self._peek()
        return token is not None and token == ("word", word)

    def parse(self) -> Predicate:
        predicate = self._or()
        if self._peek() is not None:
            raise InvalidArgumentError(f"Invalid filter: {self.text!r}")
        return predicate

    def _or(self) -> Predicate:
        terms = [self._and()]
        while self._at_word("OR"):
            self.pos += 1
            terms.append(self._and())
        if len(terms) == 1:
            return terms[0]
        return lambda attrs: any(term(attrs) for term in terms)

    def _and(self) -> Predicate:
        terms = [self._unary()]
        while self._at_word("AND"):
            self.pos += 1
            terms.append(self._unary())
        if len(terms) == 1:
            return terms[0]
        return lambda attrs: all(term(attrs) for term in terms)

    def _unary(self) -> Predicate:
        if self._at_word("NOT") or self._peek() == ("op", "-"):
            self.pos += 1
            inner = self._unary()
            return lambda attrs: not inner(attrs)
        if self._peek() == ("op", "("):
            self.pos += 1
            inner = self._or()
            self._take("op", ")")
            return inner
        if self._at_word("hasPrefix"):
            self.pos += 1
            self._take("op", "(")
            key = self._attribute_key()
            self._take("op", ",")
            prefix = self._take("string")
            self._take("op", ")")
            return lambda attrs: key in attrs and attrs[key].startswith(prefix)
        return self._comparison()

    def _attribute_key(self) -> str:
        self._take("word", "attributes")
        self._take("op", ".")
        token = self._peek()
        if token is None or token[0] not in ("word", "string"):
            raise InvalidArgumentError(f"Invalid filter: {self.text!r}")
        self.pos += 1
        return token[1]

    def _comparison(self) -> Predicate:
        self._take("word", "attributes")
        token = self._peek()
        if token == ("op", ":"):
            self.pos += 1
            name = self._peek()
            if name is None or name[0] not in ("word", "string"):
                raise InvalidArgumentError(f"Invalid filter: {self.text!r}")
            self.pos += 1
            has_key = name[1]
            return lambda attrs: has_key in attrs
        self.pos -= 1
        key = self._attribute_key()
        operator = self._peek()
        if operator not in (("op", "="), ("op", "!=")):
            raise InvalidArgumentError(f"Invalid filter: {self.text!r}")
        self.pos += 1
        value = self._take("string")
        if operator == ("op", "="):
            return lambda attrs: attrs.get(key) == value
        return lambda attrs: attrs.get(key) != value


def compile_filter(text: str) -> Predicate:
    """Compile a filter expression; the empty filter matches every message."""
    if not text.strip():
        return lambda _attrs: True
    if len(text) > 256:
        raise InvalidArgumentError("Filter exceeds the maximum length of 256 bytes")
    return _Parser(text).parse()
