"""A user's Triton ``config.pbtxt``: checked before anything is deployed, then pinned.

A release snapshot holds one model at one version, immutable. The config Triton serves
from it must therefore name the model exactly and serve exactly the snapshot's version,
whatever the user wrote; and a config that Triton would refuse to load, or that would
make Triton reach outside the snapshot, must be refused while the upload event can still
be acknowledged with a reason, not discovered when a server fails to start.

Design:

* **A parser of our own for the text-format subset Triton configs use.** Triton's
  ModelConfig proto is not a dependency of the library, and ``google.protobuf.text_format``
  cannot read a message without its descriptor. The subset is small: ``field: value``,
  quoted strings with escapes, numbers, bare enum names, ``field [ ... ]`` lists and
  ``field { ... }`` messages, ``#`` comments. The tree keeps every field in order, with
  duplicates and the list/non-list spelling, so fields this module knows nothing about
  (newer Triton releases, backend-specific ones) pass through untouched.
* **Hostile uploads are bounded before the work is done**: at most 64 KiB of text, 10,000
  tokens and 32 levels of nesting; integers within 64 bits. Parsing is linear in the
  text and its recursion is bounded by the nesting limit.
* **Pinning renders from the tree** in one canonical layout instead of editing the
  user's text: comments go, but no edit can be fooled by a ``name:`` inside a string or a
  comment, and ``parse(pin(x))`` is exactly the tree of ``x`` with ``name`` and
  ``version_policy`` replaced.
* **One error type.** :class:`ConfigPbtxtError` is a
  :class:`~shared.errors.PermanentError` on field ``config.pbtxt``: a syntax error
  names its line, a broken rule names the field (``input[1].dims``), and ``rule``
  says what would have been accepted.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import TypeAlias

from shared.errors import PermanentError
from shared.safetext import clip

__all__ = [
    "DATA_TYPES",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_TOKENS",
    "MODEL_DIRECTORY",
    "ConfigPbtxtError",
    "Field",
    "Item",
    "Message",
    "Scalar",
    "Symbol",
    "Value",
    "check",
    "parse",
    "pin",
    "pin_message",
    "render",
]

MAX_BYTES = 64 * 1024
MAX_DEPTH = 32
MAX_TOKENS = 10_000

#: Triton's DataType enum, less TYPE_INVALID: what an input or output may declare.
DATA_TYPES = frozenset({
    "TYPE_BOOL", "TYPE_UINT8", "TYPE_UINT16", "TYPE_UINT32", "TYPE_UINT64", "TYPE_INT8",
    "TYPE_INT16", "TYPE_INT32", "TYPE_INT64", "TYPE_FP16", "TYPE_FP32", "TYPE_FP64",
    "TYPE_STRING", "TYPE_BF16",
})

#: What Triton substitutes with the model's own directory in parameter values.
MODEL_DIRECTORY = "$$TRITON_MODEL_DIRECTORY"

_SYNTAX = "must be protobuf text format"
_INT_RANGE = (-(2**63), 2**64 - 1)  # int64 up to uint64: every integer field protobuf has
_INT32_MAX = 2**31 - 1


class ConfigPbtxtError(PermanentError):
    """The config.pbtxt is not text format, or breaks a rule accelops serves by.

    ``line`` is set for syntax errors; rule errors name the field in the message.
    """

    def __init__(self, message: str, line: int | None = None, *, rule: str = _SYNTAX) -> None:
        where = "config.pbtxt" if line is None else f"config.pbtxt line {line}"
        super().__init__(f"{where}: {message}", field="config.pbtxt", rule=rule)
        self.line = line


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
                raise ConfigPbtxtError("unterminated string", line)
            raise ConfigPbtxtError(f"unexpected character {_char(char)}", line)
        kind = match.lastgroup or ""
        lexeme = match.group()
        pos = match.end()
        if kind == "space":
            line += lexeme.count("\n")
            continue
        tail = _NUMBER_TAIL.match(text, pos) if kind == "number" else None
        if tail is not None:
            raise ConfigPbtxtError(f"invalid number {_char(lexeme + tail.group())}", line)
        if len(tokens) == MAX_TOKENS:
            raise ConfigPbtxtError(f"more than {MAX_TOKENS:,} tokens", line,
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
        raise ConfigPbtxtError(f"invalid number {_char(text)}", line) from None
    value = -value if text.startswith("-") else value
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigPbtxtError(f"number {_char(text)} is out of range", line)
    if isinstance(value, int) and not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
        raise ConfigPbtxtError(f"integer {_char(text)} does not fit in 64 bits", line)
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
                    raise ConfigPbtxtError(f"invalid escape {_char(match.group())}", line)
                raw.append(int(octal, 8))
            elif hex_ is not None:
                raw.append(int(hex_, 16))
            elif short is not None or long is not None:
                code = int(short or long, 16)
                if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
                    raise ConfigPbtxtError(f"invalid escape {_char(match.group())}", line)
                raw += chr(code).encode("utf-8")
            elif simple in _SIMPLE_ESCAPES:
                raw += _SIMPLE_ESCAPES[simple]
            else:
                raise ConfigPbtxtError(f"invalid escape {_char(match.group())}", line)
            pos = match.end()
        raw += body[pos:].encode("utf-8")
        return raw.decode("utf-8")
    except UnicodeError:
        raise ConfigPbtxtError("string is not valid UTF-8", line) from None


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
                raise ConfigPbtxtError(
                    f"expected ':' after {name.text!r}: a list of values needs one", name.line)
        elif not colon:
            raise ConfigPbtxtError(f"expected ':' after {name.text!r}, found {_found(token)}",
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
                raise ConfigPbtxtError("a list mixes messages and values", token.line)
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
        raise ConfigPbtxtError(f"expected a value, found {_found(token)}", token.line)

    def opening(self, depth: int) -> _Token:
        token = self.take()
        if depth >= MAX_DEPTH:
            raise ConfigPbtxtError(f"nested deeper than {MAX_DEPTH} levels", token.line,
                                   rule=f"must nest at most {MAX_DEPTH} levels")
        return token

    @staticmethod
    def unexpected(token: _Token, opener: _Token | None, wanted: str) -> ConfigPbtxtError:
        """The error for ``token`` where ``wanted`` should be: an end of file or a closing
        bracket that does not match is reported as the imbalance it is."""
        if token.kind == "end" and opener is not None:
            return ConfigPbtxtError(f"unbalanced {opener.text!r}", opener.line)
        if token.kind == "punct" and token.text in "}]":
            if opener is None:
                return ConfigPbtxtError(f"unbalanced {token.text!r}", token.line)
            if token.text != _CLOSER[opener.text]:
                return ConfigPbtxtError(
                    f"{token.text!r} does not close the {opener.text!r} of line {opener.line}",
                    token.line)
        return ConfigPbtxtError(f"expected {wanted}, found {_found(token)}", token.line)


def _found(token: _Token) -> str:
    if token.kind == "end":
        return "the end of the file"
    if token.kind == "string":
        return "a string"
    return _char(token.text)


def parse(text: str) -> Message:
    """The tree of a config.pbtxt.

    Raises ConfigPbtxtError naming the line when the text is not protobuf text format
    or exceeds the limits (``MAX_BYTES``, ``MAX_TOKENS``, ``MAX_DEPTH``).
    """
    if len(text) > MAX_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise ConfigPbtxtError(f"larger than {MAX_BYTES:,} bytes",
                               rule=f"must be at most {MAX_BYTES:,} bytes")
    return _Parser(_tokenize(text)).message(None, 0)


# ------------------------------------------------------------------------------ rendering
_NEEDS_ESCAPE = re.compile(r'[\\"\x00-\x1f\x7f]')
_RENDERED_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _quote(text: str) -> str:
    # Three-digit octal for other control characters: no following character can be
    # read as part of the escape.
    escaped = _NEEDS_ESCAPE.sub(
        lambda m: _RENDERED_ESCAPES.get(m.group(), f"\\{ord(m.group()):03o}"), text)
    return f'"{escaped}"'


def _scalar(value: Scalar) -> str:
    if isinstance(value, str):
        return _quote(value)
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
            out.append(f"{pad}{f.name}: {_scalar(value)}")
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
            items = ", ".join(_scalar(item) for item in value if not isinstance(item, Message))
            out.append(f"{pad}{f.name}: [ {items} ]")


def render(message: Message) -> str:
    """``message`` as config.pbtxt text, two-space indented, one field a line, lists of
    values on one line. Comments and separators are not kept; ``parse`` of the result
    gives back ``message``. Raises ValueError for a list that mixes messages and values
    (which ``parse`` never builds)."""
    out: list[str] = []
    _render_fields(message, 0, out)
    return "".join(line + "\n" for line in out)


# ------------------------------------------------------------------------------ the rules
def _show(value: Value) -> str:
    if isinstance(value, str):
        return _quote(clip(value, 80))
    if isinstance(value, Message):
        return "a message"
    if isinstance(value, tuple):
        return "a list"
    return clip(_scalar(value), 80)


def _single(message: Message, name: str, path: str) -> Field | None:
    fields = message.get(name)
    if len(fields) > 1:
        raise ConfigPbtxtError(f"{path!r} is set {len(fields)} times",
                               rule="a field that takes one value must be set once")
    return fields[0] if fields else None


def _check_name(config: Message, model: str) -> None:
    name = _single(config, "name", "name")
    if name is None:
        return
    rule = "'name' must be absent or the model's name"
    if not isinstance(name.value, str):
        raise ConfigPbtxtError(f"'name' must be a string, not {_show(name.value)}", rule=rule)
    if name.value != model:
        raise ConfigPbtxtError(f"'name' is {_show(name.value)} but the model is {_show(model)}",
                               rule=rule)


def _check_backend(config: Message) -> None:
    rule = "exactly one of 'backend' and 'platform' must be set, to a non-empty string"
    backend = _single(config, "backend", "backend")
    platform = _single(config, "platform", "platform")
    if backend is None and platform is None:
        raise ConfigPbtxtError("neither 'backend' nor 'platform' is set", rule=rule)
    if backend is not None and platform is not None:
        raise ConfigPbtxtError("both 'backend' and 'platform' are set; set exactly one",
                               rule=rule)
    chosen = backend or platform
    assert chosen is not None
    if not isinstance(chosen.value, str) or not chosen.value.strip():
        raise ConfigPbtxtError(
            f"{chosen.name!r} must be a non-empty string, not {_show(chosen.value)}", rule=rule)


def _check_max_batch_size(config: Message) -> None:
    size = _single(config, "max_batch_size", "max_batch_size")
    if size is None:
        return
    value = size.value
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= _INT32_MAX:
        raise ConfigPbtxtError(
            f"'max_batch_size' is {_show(value)}; it must be a non-negative integer",
            rule=f"'max_batch_size' must be an integer from 0 to {_INT32_MAX:,}")


def _check_tensor(path: str, entry: Item) -> None:
    rule = "each input and output needs 'name', a TYPE_* 'data_type' and integer 'dims'"
    if not isinstance(entry, Message):
        raise ConfigPbtxtError(f"{path!r} must be a message, not {_show(entry)}", rule=rule)
    for required in ("name", "data_type", "dims"):
        if not entry.get(required):
            raise ConfigPbtxtError(f"'{path}.{required}' is missing", rule=rule)
    name = _single(entry, "name", f"{path}.name")
    assert name is not None
    if not isinstance(name.value, str) or not name.value:
        raise ConfigPbtxtError(
            f"'{path}.name' must be a non-empty string, not {_show(name.value)}", rule=rule)
    data_type = _single(entry, "data_type", f"{path}.data_type")
    assert data_type is not None
    if not isinstance(data_type.value, Symbol) or data_type.value.name not in DATA_TYPES:
        raise ConfigPbtxtError(
            f"'{path}.data_type' is {_show(data_type.value)}; it must be one of "
            f"{', '.join(sorted(DATA_TYPES))}", rule=rule)
    for dim in entry.entries("dims"):
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < -1 or dim >= 2**63:
            raise ConfigPbtxtError(
                f"'{path}.dims' holds {_show(dim)}; a dimension is a size, or -1 for any size",
                rule=rule)


def _inside_model_directory(path: str) -> bool:
    prefix = MODEL_DIRECTORY + "/"
    if not path.startswith(prefix):
        return False
    rest = path[len(prefix):]
    return bool(rest.strip("/\\")) and ".." not in re.split(r"[/\\]", rest)


def _check_execution_env(config: Message) -> None:
    rule = f"EXECUTION_ENV_PATH must be a path under {MODEL_DIRECTORY}/"
    for index, entry in enumerate(config.entries("parameters")):
        if not isinstance(entry, Message):
            continue
        if not any(key.value == "EXECUTION_ENV_PATH" for key in entry.get("key")):
            continue
        paths = [
            path.value
            for value in entry.entries("value") if isinstance(value, Message)
            for path in value.get("string_value")
        ]
        if len(paths) != 1 or not isinstance(paths[0], str):
            raise ConfigPbtxtError(
                f"'parameters[{index}]' EXECUTION_ENV_PATH needs one 'value {{ string_value }}'",
                rule=rule)
        if not _inside_model_directory(paths[0]):
            raise ConfigPbtxtError(
                f"'parameters[{index}]' EXECUTION_ENV_PATH is {_show(paths[0])}, outside the "
                f"model directory; write it as \"{MODEL_DIRECTORY}/<path>\"", rule=rule)


def check(text: str, model: str) -> None:
    """Refuse a config.pbtxt that cannot be served as release ``model``.

    Beyond syntax: ``name`` absent or ``model``; exactly one of ``backend`` and
    ``platform``, a non-empty string; ``max_batch_size`` a non-negative integer; every
    ``input`` and ``output`` with a ``name``, a TYPE_* ``data_type`` and integer ``dims``
    (-1 allowed); no ``model_repository_agents``; an ``EXECUTION_ENV_PATH`` parameter
    only inside the model directory. ``version_policy`` may be anything: :func:`pin`
    replaces it.

    Raises ConfigPbtxtError naming the line (syntax) or the field and the rule.
    """
    config = parse(text)
    _check_name(config, model)
    _check_backend(config)
    _check_max_batch_size(config)
    if config.get("model_repository_agents"):
        # An agent rewrites the model's files as Triton loads them (decrypting, fetching,
        # converting): what would be served is no longer what the snapshot holds.
        raise ConfigPbtxtError(
            "'model_repository_agents' is not accepted: a repository agent changes or "
            "fetches model files when Triton loads them, so the release would not serve "
            "what was uploaded", rule="'model_repository_agents' must not be set")
    for kind in ("input", "output"):
        for index, entry in enumerate(config.entries(kind)):
            _check_tensor(f"{kind}[{index}]", entry)
    _check_execution_env(config)


# ------------------------------------------------------------------------------ pinning
def pin_message(config: Message, model: str, version: int) -> Message:
    """``config`` naming ``model`` and serving exactly ``version``: any ``name`` and
    ``version_policy`` are dropped, and both are put first; every other field keeps its
    place. Raises ValueError for an empty model name or a version below 1."""
    if not model:
        raise ValueError("the model name must not be empty")
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version < 2**63:
        raise ValueError(f"a Triton model version is an integer from 1, not {version!r}")
    policy = Message((Field("specific", Message((Field("versions", (version,)),))),))
    rest = config.without("name", "version_policy")
    return Message((Field("name", model), Field("version_policy", policy), *rest.fields))


def pin(text: str, model: str, version: int) -> str:
    """The config.pbtxt a release serves: ``text`` with ``name: "<model>"`` and
    ``version_policy { specific { versions: [ <version> ] } }``, rendered canonically.

    It does not apply :func:`check`'s rules (a different ``name`` is simply replaced);
    callers check first. Raises ConfigPbtxtError when ``text`` does not parse, and
    ValueError as :func:`pin_message` does.
    """
    return render(pin_message(parse(text), model, version))
