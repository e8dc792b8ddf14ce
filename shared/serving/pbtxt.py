"""Protobuf text format without descriptors: the subset model configs are written in.

Triton's ``config.pbtxt`` is protobuf text format, but Triton's ModelConfig proto is not
a dependency of the library, and ``google.protobuf.text_format`` cannot read a message
without its descriptor. This module reads and writes the format on its own, knowing
nothing of any schema, so the rules a config must follow (:mod:`shared.serving.triton_config`)
are kept apart from the syntax they are written in.

* **The subset**: ``field: value``, quoted strings with escapes, numbers, bare enum
  names, ``field [ ... ]`` lists and ``field { ... }`` messages, ``#`` comments. The tree
  keeps every field in order, with duplicates and the list/non-list spelling, so fields
  a caller knows nothing about pass through untouched.
* **Hostile text is bounded before the work is done**: at most 64 KiB of text, 10,000
  tokens and 32 levels of nesting; integers within 64 bits. Parsing is linear in the
  text and its recursion is bounded by the nesting limit.
* **Rendering is canonical**: one layout, comments dropped, and ``parse(render(m))`` is
  ``m``.
* **One error type.** :class:`PbtxtSyntaxError` (a ValueError) names the line, says what
  is wrong (``reason``) and what would have been accepted (``rule``), for the caller to
  report in its own terms.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import TypeAlias

from shared.safetext import clip

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_TOKENS",
    "SYNTAX_RULE",
    "Field",
    "Item",
    "Message",
    "PbtxtSyntaxError",
    "Scalar",
    "Symbol",
    "Value",
    "format_scalar",
    "parse",
    "quote",
    "render",
]

MAX_BYTES = 64 * 1024
MAX_DEPTH = 32
MAX_TOKENS = 10_000

#: The rule a syntax error breaks, unless a limit says otherwise.
SYNTAX_RULE = "must be protobuf text format"
_INT_RANGE = (-(2**63), 2**64 - 1)  # int64 up to uint64: every integer field protobuf has


class PbtxtSyntaxError(ValueError):
    """The text is not protobuf text format, or exceeds the limits.

    ``line`` is where (None when the whole text is at fault, as for its size);
    ``reason`` is the message without the place; ``rule`` what would have been accepted.
    """

    def __init__(self, reason: str, line: int | None = None, *,
                 rule: str = SYNTAX_RULE) -> None:
        super().__init__(reason if line is None else f"line {line}: {reason}")
        self.reason = reason
        self.line = line
        self.rule = rule


# ------------------------------------------------------------------------------ the tree
@dataclass(frozen=True, slots=True)
class Symbol:
    """A bare identifier as a value: an enum name (``TYPE_FP32``, ``KIND_GPU``) or
    ``true``/``false``. Kept apart from strings because protobuf reads them differently."""

    name: str


@dataclass(frozen=True, slots=True)
class Field:
    """One ``name: value`` as written; a list value is a tuple. ``line`` is where it was
    read (0 when built in code) and takes no part in equality."""

    name: str
    value: Value
    line: int = dataclass_field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Message:
    """Fields in the order written; a repeated field may appear several times."""

    fields: tuple[Field, ...] = ()

    def get(self, name: str) -> list[Field]:
        """Every field called ``name``."""
        return [f for f in self.fields if f.name == name]

    def entries(self, name: str) -> list[Item]:
        """The values of a repeated field, however written: ``x: 1 x: 2`` and
        ``x: [1, 2]`` both give ``[1, 2]``."""
        found: list[Item] = []
        for f in self.get(name):
            if isinstance(f.value, tuple):
                found.extend(f.value)
            else:
                found.append(f.value)
        return found

    def without(self, *names: str) -> Message:
        """This message less every field called one of ``names``."""
        return Message(tuple(f for f in self.fields if f.name not in names))


#: A value that is not a message: a string, an integer, a float or a bare name.
Scalar: TypeAlias = str | int | float | Symbol
#: One value, or one entry of a list.
Item: TypeAlias = Scalar | Message
#: What a field holds; a list (``field: [ ... ]``) is a tuple.
Value: TypeAlias = Item | tuple[Item, ...]


# ------------------------------------------------------------------------------ tokens
@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # ident, number, string, punct, end
    text: str
    line: int


_LEXEME = re.compile(
    r"""(?P<space>(?:[ \t\r\n\v\f]+|\#[^\n]*)+)
      | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<number>-?(?:0[xX][0-9A-Fa-f]+|[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?
                    |\.[0-9]+(?:[eE][+-]?[0-9]+)?)[fF]?)
      | (?P<string>"(?:[^"\\\n]|\\[^\n])*"|'(?:[^'\\\n]|\\[^\n])*')
      | (?P<punct>[{}\[\]:,;])""",
    re.VERBOSE,
)
_NUMBER_TAIL = re.compile(r"[A-Za-z0-9_.]+")


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos, line = 0, 1
    while pos < len(text):
        match = _LEXEME.match(text, pos)
        if match is None:
            char = text[pos]
            if char in "\"'":
                raise PbtxtSyntaxError("unterminated string", line)
            raise PbtxtSyntaxError(f"unexpected character {_char(char)}", line)
        kind = match.lastgroup or ""
        lexeme = match.group()
        pos = match.end()
        if kind == "space":
            line += lexeme.count("\n")
            continue
        tail = _NUMBER_TAIL.match(text, pos) if kind == "number" else None
        if tail is not None:
            raise PbtxtSyntaxError(f"invalid number {_char(lexeme + tail.group())}", line)
        if len(tokens) == MAX_TOKENS:
            raise PbtxtSyntaxError(f"more than {MAX_TOKENS:,} tokens", line,
                                   rule=f"must have at most {MAX_TOKENS:,} tokens")
        tokens.append(_Token(kind, lexeme, line))
    tokens.append(_Token("end", "", line))
    return tokens


def _char(text: str) -> str:
    """``text`` quoted for a message, control and surrogate characters escaped."""
    return repr(clip(text, 40))


def _number(text: str, line: int) -> int | float:
    """A number token's value: decimal, ``0x`` hex or ``0`` octal integers, floats with an
    optional ``f``; the sign is part of the token, as protobuf requires."""
    digits = text.removeprefix("-")
    value: int | float
    try:
        if digits[:2] in ("0x", "0X"):
            value = int(digits, 16) if len(digits) <= 20 else _INT_RANGE[1] + 1
        elif any(c in digits for c in ".eEfF"):
            value = float(digits.rstrip("fF"))
        elif len(digits) > 25:
            value = _INT_RANGE[1] + 1
        else:
            value = int(digits, 8) if len(digits) > 1 and digits[0] == "0" else int(digits)
    except ValueError:
        raise PbtxtSyntaxError(f"invalid number {_char(text)}", line) from None
    value = -value if text.startswith("-") else value
    if isinstance(value, float) and not math.isfinite(value):
        raise PbtxtSyntaxError(f"number {_char(text)} is out of range", line)
    if isinstance(value, int) and not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
        raise PbtxtSyntaxError(f"integer {_char(text)} does not fit in 64 bits", line)
    return value


_ESCAPE = re.compile(
    r"\\(?:([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))"
)
_SIMPLE_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "a": b"\a", "b": b"\b", "f": b"\f",
                   "v": b"\v", "\\": b"\\", "'": b"'", '"': b'"', "?": b"?"}


def _string(lexeme: str, line: int) -> str:
    """A quoted literal decoded as protobuf does: escapes make bytes, which must be UTF-8."""
    body = lexeme[1:-1]
    raw = bytearray()
    pos = 0
    try:
        for match in _ESCAPE.finditer(body):
            raw += body[pos:match.start()].encode("utf-8")
            octal, hex_, short, long, simple = match.groups()
            if octal is not None:
                if int(octal, 8) > 0xFF:
                    raise PbtxtSyntaxError(f"invalid escape {_char(match.group())}", line)
                raw.append(int(octal, 8))
            elif hex_ is not None:
                raw.append(int(hex_, 16))
            elif short is not None or long is not None:
                code = int(short or long, 16)
                if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
                    raise PbtxtSyntaxError(f"invalid escape {_char(match.group())}", line)
                raw += chr(code).encode("utf-8")
            elif simple in _SIMPLE_ESCAPES:
                raw += _SIMPLE_ESCAPES[simple]
            else:
                raise PbtxtSyntaxError(f"invalid escape {_char(match.group())}", line)
            pos = match.end()
        raw += body[pos:].encode("utf-8")
        return raw.decode("utf-8")
    except UnicodeError:
        raise PbtxtSyntaxError("string is not valid UTF-8", line) from None


# ------------------------------------------------------------------------------ parsing
_CLOSER = {"{": "}", "[": "]"}


class _Parser:
    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> _Token:
        return self.tokens[self.pos]

    def take(self) -> _Token:
        token = self.tokens[self.pos]
        if token.kind != "end":
            self.pos += 1
        return token

    def accept(self, text: str) -> bool:
        if self.peek().kind == "punct" and self.peek().text == text:
            self.pos += 1
            return True
        return False

    def message(self, opener: _Token | None, depth: int) -> Message:
        """Fields up to the ``}`` closing ``opener``, or to the end of the file at the top."""
        fields: list[Field] = []
        while True:
            token = self.take()
            if token.kind == "ident":
                fields.append(self.field(token, depth))
                if not self.accept(","):
                    self.accept(";")
                continue
            closing = token.kind == "end" if opener is None else token.text == "}"
            if closing:
                return Message(tuple(fields))
            raise self.unexpected(token, opener, "a field name")

    def field(self, name: _Token, depth: int) -> Field:
        colon = self.accept(":")
        token = self.peek()
        value: Value
        if token.text == "{" and token.kind == "punct":
            value = self.message(self.opening(depth), depth + 1)
        elif token.text == "[" and token.kind == "punct":
            value = self.list(self.opening(depth), depth + 1)
            if value and not colon and not isinstance(value[0], Message):
                # Protobuf lets only a message field leave the colon out.
                raise PbtxtSyntaxError(
                    f"expected ':' after {name.text!r}: a list of values needs one", name.line)
        elif not colon:
            raise PbtxtSyntaxError(f"expected ':' after {name.text!r}, found {_found(token)}",
                                   token.line)
        else:
            value = self.scalar()
        return Field(name.text, value, name.line)

    def list(self, opener: _Token, depth: int) -> tuple[Item, ...]:
        items: list[Item] = []
        if self.accept("]"):
            return ()
        while True:
            token = self.peek()
            item: Item
            if token.text == "{" and token.kind == "punct":
                item = self.message(self.opening(depth), depth + 1)
            elif token.kind in ("end", "punct"):
                raise self.unexpected(self.take(), opener, "a value")
            else:
                item = self.scalar()
            if items and isinstance(item, Message) != isinstance(items[0], Message):
                raise PbtxtSyntaxError("a list mixes messages and values", token.line)
            items.append(item)
            if self.accept("]"):
                return tuple(items)
            if not self.accept(","):
                raise self.unexpected(self.take(), opener, "',' or ']'")

    def scalar(self) -> Scalar:
        token = self.take()
        if token.kind == "number":
            return _number(token.text, token.line)
        if token.kind == "ident":
            return Symbol(token.text)
        if token.kind == "string":
            # Adjacent literals are one string, as in C.
            parts = [_string(token.text, token.line)]
            while self.peek().kind == "string":
                literal = self.take()
                parts.append(_string(literal.text, literal.line))
            return "".join(parts)
        raise PbtxtSyntaxError(f"expected a value, found {_found(token)}", token.line)

    def opening(self, depth: int) -> _Token:
        token = self.take()
        if depth >= MAX_DEPTH:
            raise PbtxtSyntaxError(f"nested deeper than {MAX_DEPTH} levels", token.line,
                                   rule=f"must nest at most {MAX_DEPTH} levels")
        return token

    @staticmethod
    def unexpected(token: _Token, opener: _Token | None, wanted: str) -> PbtxtSyntaxError:
        """The error for ``token`` where ``wanted`` should be: an end of file or a closing
        bracket that does not match is reported as the imbalance it is."""
        if token.kind == "end" and opener is not None:
            return PbtxtSyntaxError(f"unbalanced {opener.text!r}", opener.line)
        if token.kind == "punct" and token.text in "}]":
            if opener is None:
                return PbtxtSyntaxError(f"unbalanced {token.text!r}", token.line)
            if token.text != _CLOSER[opener.text]:
                return PbtxtSyntaxError(
                    f"{token.text!r} does not close the {opener.text!r} of line {opener.line}",
                    token.line)
        return PbtxtSyntaxError(f"expected {wanted}, found {_found(token)}", token.line)


def _found(token: _Token) -> str:
    if token.kind == "end":
        return "the end of the file"
    if token.kind == "string":
        return "a string"
    return _char(token.text)


def parse(text: str) -> Message:
    """The tree of protobuf text ``text``.

    Raises PbtxtSyntaxError naming the line when the text is not protobuf text format
    or exceeds the limits (``MAX_BYTES``, ``MAX_TOKENS``, ``MAX_DEPTH``).
    """
    if len(text) > MAX_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise PbtxtSyntaxError(f"larger than {MAX_BYTES:,} bytes",
                               rule=f"must be at most {MAX_BYTES:,} bytes")
    return _Parser(_tokenize(text)).message(None, 0)


# ------------------------------------------------------------------------------ rendering
_NEEDS_ESCAPE = re.compile(r'[\\"\x00-\x1f\x7f]')
_RENDERED_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def quote(text: str) -> str:
    """``text`` as a double-quoted literal that ``parse`` reads back as ``text``."""
    # Three-digit octal for other control characters: no following character can be
    # read as part of the escape.
    escaped = _NEEDS_ESCAPE.sub(
        lambda m: _RENDERED_ESCAPES.get(m.group(), f"\\{ord(m.group()):03o}"), text)
    return f'"{escaped}"'


def format_scalar(value: Scalar) -> str:
    """A value that is not a message, as it is written in text format."""
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, Symbol):
        return value.name
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _render_fields(message: Message, indent: int, out: list[str]) -> None:
    pad = "  " * indent
    for f in message.fields:
        value = f.value
        if isinstance(value, Message):
            if value.fields:
                out.append(f"{pad}{f.name} {{")
                _render_fields(value, indent + 1, out)
                out.append(f"{pad}}}")
            else:
                out.append(f"{pad}{f.name} {{}}")
        elif not isinstance(value, tuple):
            out.append(f"{pad}{f.name}: {format_scalar(value)}")
        elif not value:
            out.append(f"{pad}{f.name}: []")
        elif all(isinstance(item, Message) for item in value):
            out.append(f"{pad}{f.name} [")
            for index, item in enumerate(value):
                assert isinstance(item, Message)
                out.append(f"{pad}  {{")
                _render_fields(item, indent + 2, out)
                out.append(f"{pad}  }}" + ("," if index < len(value) - 1 else ""))
            out.append(f"{pad}]")
        elif any(isinstance(item, Message) for item in value):
            raise ValueError(f"field {f.name!r}: a list mixes messages and values")
        else:
            items = ", ".join(format_scalar(item) for item in value
                              if not isinstance(item, Message))
            out.append(f"{pad}{f.name}: [ {items} ]")


def render(message: Message) -> str:
    """``message`` as text format, two-space indented, one field a line, lists of
    values on one line. Comments and separators are not kept; ``parse`` of the result
    gives back ``message``. Raises ValueError for a list that mixes messages and values
    (which ``parse`` never builds)."""
    out: list[str] = []
    _render_fields(message, 0, out)
    return "".join(line + "\n" for line in out)

