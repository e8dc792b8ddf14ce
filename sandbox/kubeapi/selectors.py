"""Label and field selectors with the real API's grammar and matching rules.

Code under test filters pods by ``jobset.sigs.k8s.io/jobset-name=x`` or
``status.phase!=Running``; if the sandbox matched more loosely than the real
API, bugs in those selectors would only show up on GKE. Parsing follows
``k8s.io/apimachinery/pkg/labels`` and ``.../fields``:

* labels: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x)``, ``a``,
  ``!a``, ``a>3``, ``a<3``, joined with commas (all must hold); ``!=`` and
  ``notin`` also match objects that lack the key.
* fields: ``path=v``, ``path==v``, ``path!=v`` on dotted object paths, with
  ``\\,`` ``\\=`` ``\\\\`` escapes in values.

Malformed input raises :class:`SelectorError` (the server answers 400).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sandbox.kubeapi.validation import (
    is_dns1123_subdomain,
    is_qualified_name,
    is_valid_label_value,
)

_SPECIAL = "!=(),<>"

EQUALS = "="
NOT_EQUALS = "!="
IN = "in"
NOT_IN = "notin"
EXISTS = "exists"
DOES_NOT_EXIST = "!"
GREATER_THAN = "gt"
LESS_THAN = "lt"


class SelectorError(ValueError):
    """A selector string that the real API would reject with 400."""


@dataclass(frozen=True)
class Requirement:
    """One comma-separated term of a label selector."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == EXISTS:
            return present
        if self.operator == DOES_NOT_EXIST:
            return not present
        if self.operator in (EQUALS, IN):
            return present and labels[self.key] in self.values
        if self.operator in (NOT_EQUALS, NOT_IN):
            return not present or labels[self.key] not in self.values
        if not present:
            return False
        try:
            have = int(labels[self.key])
        except ValueError:
            return False
        want = int(self.values[0])
        return have > want if self.operator == GREATER_THAN else have < want


@dataclass(frozen=True)
class LabelSelector:
    """A parsed label selector; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        have = labels or {}
        return all(req.matches(have) for req in self.requirements)


@dataclass(frozen=True)
class FieldTerm:
    """One ``path op value`` term of a field selector."""

    field: str
    operator: str  # EQUALS or NOT_EQUALS
    value: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        have = field_value(obj, self.field)
        return (have == self.value) == (self.operator == EQUALS)


@dataclass(frozen=True)
class FieldSelector:
    """A parsed field selector; the empty selector matches everything."""

    terms: tuple[FieldTerm, ...] = ()

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(term.field for term in self.terms)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(term.matches(obj) for term in self.terms)

    def require_supported(self, supported: Iterable[str]) -> None:
        """Raise like the real API when a field label is not selectable."""
        allowed = set(supported)
        for name in sorted(self.fields - allowed):
            raise SelectorError(f"field label not supported: {name}")


# --------------------------------------------------------------------------
# labels


def _lex_labels(text: str) -> list[str]:
    tokens: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif text.startswith(("==", "!="), i):
            tokens.append(text[i : i + 2])
            i += 2
        elif ch in _SPECIAL:
            tokens.append(ch)
            i += 1
        else:
            start = i
            while i < len(text) and not text[i].isspace() and text[i] not in _SPECIAL:
                i += 1
            tokens.append(text[start:i])
    return tokens


def _is_ident(token: str | None) -> bool:
    return token is not None and token not in ("==", "!=") and token not in _SPECIAL


def validate_label_key(key: str) -> None:
    """Reject keys that are not ``[prefix/]name`` qualified names."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or is_dns1123_subdomain(prefix)):
        raise SelectorError(f"invalid label key {key!r}: prefix must be a DNS subdomain")
    if is_qualified_name(name):  # the name part: it holds no "/"
        raise SelectorError(
            f"invalid label key {key!r}: name part must be 63 characters or less, "
            "begin and end with an alphanumeric character and contain only "
            "alphanumerics, '-', '_' or '.'"
        )


def validate_label_value(value: str) -> None:
    """Reject label values the real API refuses (empty is allowed)."""
    if is_valid_label_value(value):
        raise SelectorError(
            f"invalid label value {value!r}: must be 63 characters or less, begin and end "
            "with an alphanumeric character and contain only alphanumerics, '-', '_' or '.'"
        )


class _LabelParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _lex_labels(text)
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str | None:
        token = self.peek()
        self.pos += 1
        return token

    def fail(self, why: str) -> SelectorError:
        return SelectorError(f"unable to parse requirement: {why} in selector {self.text!r}")

    def key(self) -> str:
        token = self.take()
        if not _is_ident(token):
            raise self.fail(f"expected a label key, found {token!r}")
        assert token is not None
        validate_label_key(token)
        return token

    def value(self) -> str:
        token = self.peek()
        if _is_ident(token):
            self.pos += 1
            assert token is not None
            validate_label_value(token)
            return token
        if token in (None, ",", ")"):
            return ""  # `a=` selects the empty value, as in the real API
        raise self.fail(f"expected a label value, found {token!r}")

    def value_set(self, operator: str) -> tuple[str, ...]:
        if self.take() != "(":
            raise self.fail(f"expected '(' after {operator!r}")
        values: list[str] = []
        while True:
            values.append(self.value())
            separator = self.take()
            if separator == ")":
                break
            if separator != ",":
                raise self.fail(f"expected ',' or ')' in value set, found {separator!r}")
        if values == [""]:
            raise self.fail(f"for {operator!r} the value set can't be empty")
        return tuple(values)

    def requirement(self) -> Requirement:
        if self.peek() == "!":
            self.pos += 1
            return Requirement(self.key(), DOES_NOT_EXIST)
        key = self.key()
        op = self.peek()
        if op is None or op == ",":
            return Requirement(key, EXISTS)
        self.pos += 1
        if op in ("=", "=="):
            return Requirement(key, EQUALS, (self.value(),))
        if op == "!=":
            return Requirement(key, NOT_EQUALS, (self.value(),))
        if op in (">", "<"):
            number = self.take()
            if number is None or not re.fullmatch(r"-?\d+", number):
                raise self.fail(f"for '{op}' the value must be an integer, found {number!r}")
            return Requirement(key, GREATER_THAN if op == ">" else LESS_THAN, (number,))
        if op in (IN, NOT_IN):
            return Requirement(key, op, self.value_set(op))
        raise self.fail(f"unexpected {op!r} after key {key!r}")

    def parse(self) -> LabelSelector:
        if not self.tokens:
            return LabelSelector()
        requirements = [self.requirement()]
        while self.peek() is not None:
            if self.take() != ",":
                raise self.fail("expected ',' between requirements")
            requirements.append(self.requirement())
        return LabelSelector(tuple(requirements))


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse a ``labelSelector`` query value; None/empty selects everything."""
    return _LabelParser(text or "").parse()


def label_selector_from_match_labels(match_labels: Mapping[str, str]) -> LabelSelector:
    """The selector equivalent of a ``matchLabels`` map (handy in-process)."""
    return LabelSelector(
        tuple(Requirement(k, EQUALS, (v,)) for k, v in sorted(match_labels.items()))
    )


# --------------------------------------------------------------------------
# fields


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            current.append(text[i : i + 2])
            i += 2
            continue
        if ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    return parts


def _unescape(value: str, text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(value):
        ch = value[i]
        if ch == "\\":
            if i + 1 >= len(value) or value[i + 1] not in "\\,=":
                raise SelectorError(f"invalid field selector {text!r}: invalid escape sequence")
            out.append(value[i + 1])
            i += 2
            continue
        if ch in ",=":
            raise SelectorError(f"invalid field selector {text!r}: unescaped {ch!r} in value")
        out.append(ch)
        i += 1
    return "".join(out)


def _field_term(term: str, text: str) -> FieldTerm:
    # Find the first unescaped operator; `!=` and `==` before `=`.
    i = 0
    while i < len(term):
        if term[i] == "\\":
            i += 2
            continue
        for op, operator in (("!=", NOT_EQUALS), ("==", EQUALS), ("=", EQUALS)):
            if term.startswith(op, i):
                field = term[:i].strip()
                if not field or not re.fullmatch(r"[A-Za-z0-9_.\-/]+", field):
                    raise SelectorError(f"invalid field selector {text!r}: bad field {field!r}")
                return FieldTerm(field, operator, _unescape(term[i + len(op) :].strip(), text))
        i += 1
    raise SelectorError(f"invalid selector: {text!r}; can't understand {term!r}")


def parse_field_selector(text: str | None) -> FieldSelector:
    """Parse a ``fieldSelector`` query value; None/empty selects everything."""
    if not text or not text.strip():
        return FieldSelector()
    return FieldSelector(tuple(_field_term(term, text) for term in _split_unescaped(text, ",")))


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string form of a dotted path, as the real API compares it ('' if absent)."""
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return ""
        current = current[part]
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)
