"""A user's Triton ``config.pbtxt``: checked before anything is deployed, then pinned.

A release snapshot holds one model at one version, immutable. The config Triton serves
from it must therefore name the model exactly and serve exactly the snapshot's version,
whatever the user wrote; and a config that Triton would refuse to load, or that would
make Triton reach outside the snapshot, must be refused while the upload event can still
be acknowledged with a reason, not discovered when a server fails to start.

This module holds Triton's rules; the text format they are written in, with its limits
on hostile uploads, is :mod:`shared.serving.pbtxt`, whose tree and limits are exported
here too.

Design:

* **Fields this module knows nothing about** (newer Triton releases, backend-specific
  ones) pass through untouched: only the fields a rule names are looked at.
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

import re

from shared.errors import PermanentError
from shared.safetext import clip
from shared.serving import pbtxt
from shared.serving.pbtxt import (
    MAX_BYTES,
    MAX_DEPTH,
    MAX_TOKENS,
    SYNTAX_RULE,
    Field,
    Item,
    Message,
    PbtxtSyntaxError,
    Scalar,
    Symbol,
    Value,
    format_scalar,
    quote,
    render,
)

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

#: Triton's DataType enum, less TYPE_INVALID: what an input or output may declare.
DATA_TYPES = frozenset({
    "TYPE_BOOL", "TYPE_UINT8", "TYPE_UINT16", "TYPE_UINT32", "TYPE_UINT64", "TYPE_INT8",
    "TYPE_INT16", "TYPE_INT32", "TYPE_INT64", "TYPE_FP16", "TYPE_FP32", "TYPE_FP64",
    "TYPE_STRING", "TYPE_BF16",
})

#: What Triton substitutes with the model's own directory in parameter values.
MODEL_DIRECTORY = "$$TRITON_MODEL_DIRECTORY"

_INT32_MAX = 2**31 - 1


class ConfigPbtxtError(PermanentError):
    """The config.pbtxt is not text format, or breaks a rule accelops serves by.

    ``line`` is set for syntax errors; rule errors name the field in the message.
    """

    def __init__(self, message: str, line: int | None = None, *,
                 rule: str = SYNTAX_RULE) -> None:
        where = "config.pbtxt" if line is None else f"config.pbtxt line {line}"
        super().__init__(f"{where}: {message}", field="config.pbtxt", rule=rule)
        self.line = line


def parse(text: str) -> Message:
    """The tree of a config.pbtxt (:func:`shared.serving.pbtxt.parse`).

    Raises ConfigPbtxtError naming the line when the text is not protobuf text format
    or exceeds the limits (``MAX_BYTES``, ``MAX_TOKENS``, ``MAX_DEPTH``).
    """
    try:
        return pbtxt.parse(text)
    except PbtxtSyntaxError as exc:
        raise ConfigPbtxtError(exc.reason, exc.line, rule=exc.rule) from None


# ------------------------------------------------------------------------------ the rules
def _show(value: Value) -> str:
    if isinstance(value, str):
        return quote(clip(value, 80))
    if isinstance(value, Message):
        return "a message"
    if isinstance(value, tuple):
        return "a list"
    return clip(format_scalar(value), 80)


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
