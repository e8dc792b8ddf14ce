"""Field-level validation errors, worded and aggregated as kube-apiserver words them.

The sandbox's one copy of ``k8s.io/apimachinery/pkg/util/validation/field`` (errors.go,
path.go), of ``ErrorList.ToAggregate()`` (``pkg/util/errors/errors.go``) and of
``apierrors.NewInvalid`` (``pkg/api/errors/errors.go``), at k8s.io/apimachinery v0.32.0,
for every part of the sandbox that refuses something in Kubernetes' words: the CRD schema
validation, the built-in kinds' checks, the store, and the ported JobSet v0.7.2 and Kueue
v0.10.1 webhooks (which vendor apimachinery v0.31.1 and v0.31.4: their ``ErrorBody`` is
the same, only ``TooLongMaxLength`` words its detail differently, see
:func:`too_long_max_length`). The name and label checks that produce these errors live
in :mod:`sandbox.kubeapi.validation`.

Each error renders as ``<field>: <Type>: <value>: <detail>`` (``ErrorBody``): the value
is left out for Required, Forbidden, TooLong and Internal errors and for an omitted one
(:data:`OMIT`), and otherwise printed as Go prints it (:func:`go_value`): ``%q`` for
strings (a nil value is the string ``"null"``), ``%v`` for numbers and booleans, the
``String()`` of a Go type that has one (:class:`Bare`, e.g. ``corev1.ResourceName``),
``%#v`` otherwise (``map[string]interface {}{"name":"w"}``; :class:`GoValue` carries the
``%#v`` of a typed struct as the caller composed it, abbreviated where Go's output would
hold pointer addresses). A list of errors becomes one 422 ``Invalid`` Status whose
message is ``<Kind>.<group> "<name>" is invalid: [<error>, <error>]`` (no brackets for
one error, duplicates dropped) and whose ``details.causes`` carry every error's reason,
field and body (:func:`invalid_error`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sandbox.kubeapi.errors import ApiError, JsonObject

__all__ = [
    "OMIT",
    "Bare",
    "FieldError",
    "GoValue",
    "Omitted",
    "Path",
    "aggregate",
    "duplicate",
    "forbidden",
    "go_float",
    "go_quote",
    "go_syntax",
    "go_value",
    "internal",
    "invalid",
    "invalid_error",
    "not_found",
    "not_supported",
    "required",
    "too_long",
    "too_long_max_length",
    "too_many",
    "type_invalid",
]

# ErrorType -> the words ErrorType.String() gives.
_WORDS = {
    "FieldValueNotFound": "Not found",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "InternalError": "Internal error",
    "FieldValueTypeInvalid": "Invalid value",
}
# Types whose body never shows the value.
_VALUELESS = frozenset(
    {"FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong", "InternalError"}
)


class Omitted:
    """The value of an error that prints none (``field.OmitValueType{}``)."""


OMIT = Omitted()


class Bare(str):
    """A value of a Go type with ``String()``: printed as it is, without quotes."""


class GoValue(str):
    """A value printed as the caller composed it (Go's ``%#v`` of a typed struct)."""


class Path(str):
    """A ``field.Path``: ``Path("spec").child("a").at(0).key("k")`` is ``spec.a[0][k]``."""

    def child(self, *names: str) -> Path:
        text = str(self)
        for name in names:
            text = f"{text}.{name}" if text else name
        return Path(text)

    def at(self, index: int) -> Path:
        return Path(f"{self}[{index}]")

    def key(self, key: str) -> Path:
        return Path(f"{self}[{key}]")


@dataclass(frozen=True)
class FieldError:
    """One ``field.Error``: its type (the cause's reason), path, bad value and detail."""

    type: str
    field: str
    value: Any = OMIT
    detail: str = ""

    def body(self) -> str:
        """``ErrorBody()``: the message without the field."""
        words = _WORDS[self.type]
        if self.type in _VALUELESS or isinstance(self.value, Omitted):
            text = words
        else:
            text = f"{words}: {go_value(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


# ----------------------------------------------------------------------------- constructors


def required(field: str, detail: str = "") -> FieldError:
    return FieldError("FieldValueRequired", field, "", detail)


def invalid(field: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueInvalid", field, value, detail)


def type_invalid(field: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueTypeInvalid", field, value, detail)


def forbidden(field: str, detail: str) -> FieldError:
    return FieldError("FieldValueForbidden", field, "", detail)


def duplicate(field: str, value: Any) -> FieldError:
    return FieldError("FieldValueDuplicate", field, value)


def not_found(field: str, value: Any) -> FieldError:
    return FieldError("FieldValueNotFound", field, value)


def not_supported(field: str, value: Any, supported: Iterable[str]) -> FieldError:
    choices = [go_quote(str(v)) for v in supported]
    detail = "supported values: " + ", ".join(choices) if choices else ""
    return FieldError("FieldValueNotSupported", field, value, detail)


def too_long(field: str, max_length: int) -> FieldError:
    """``TooLong`` as apimachinery v0.32 words it (kube-apiserver's own checks)."""
    detail = (f"may not be more than {max_length} bytes" if max_length >= 0
              else "value is too long")
    return FieldError("FieldValueTooLong", field, "<value omitted>", detail)


def too_long_max_length(field: str, value: Any, max_length: int) -> FieldError:
    """``TooLongMaxLength`` as apimachinery v0.31 words it: the version the JobSet v0.7.2
    and Kueue v0.10.1 webhooks are built with (v0.32 made it an alias of ``TooLong``)."""
    detail = f"may not be longer than {max_length}" if max_length >= 0 else "value is too long"
    return FieldError("FieldValueTooLong", field, value, detail)


def too_many(field: str, actual: int, maximum: int) -> FieldError:
    detail = f"must have at most {maximum} items" if maximum >= 0 else "has too many items"
    return FieldError("FieldValueTooMany", field, actual if actual >= 0 else OMIT, detail)


def internal(field: str, detail: str) -> FieldError:
    return FieldError("InternalError", field, None, detail)


# ----------------------------------------------------------------------------- aggregation


def aggregate(errors: Iterable[FieldError]) -> str:
    """``ErrorList.ToAggregate().Error()``: unique messages, bracketed when several;
    "" for none."""
    messages = list(dict.fromkeys(str(error) for error in errors))
    if not messages:
        return ""
    if len(messages) == 1:
        return messages[0]
    return "[" + ", ".join(messages) + "]"


def invalid_error(group: str, kind: str, name: str, errors: Sequence[FieldError]) -> ApiError:
    """The 422 ``Invalid`` Status kube-apiserver answers for ``errors`` (``NewInvalid``;
    ``StatusDetails`` leaves out its empty fields, as their ``omitempty`` tags do)."""
    qualified = f"{kind}.{group}" if group else kind
    message = f'{qualified} "{name}" is invalid'
    if errors:
        message += f": {aggregate(errors)}"
    details: JsonObject = {"name": name, "group": group, "kind": kind,
                           "causes": [{"reason": e.type, "message": e.body(), "field": e.field}
                                      for e in errors]}
    return ApiError(422, "Invalid", message,
                    details={key: value for key, value in details.items() if value})


# ----------------------------------------------------------------------------- Go formatting


def go_quote(text: str) -> str:
    """Go's ``%q`` / ``strconv.Quote`` of a string (JSON escapes are the same for the
    characters that occur in object fields)."""
    return json.dumps(text, ensure_ascii=False)


def go_value(value: Any) -> str:
    """How ``ErrorBody`` prints a bad value: ``%q`` for strings, ``%v`` for numbers and
    booleans, ``String()`` for :class:`Bare`, ``%#v`` otherwise."""
    if value is None:
        return '"null"'  # ErrorBody turns a nil value into the string "null", then %q
    if isinstance(value, (Bare, GoValue)):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    return go_syntax(value)


def go_float(value: float) -> str:
    """``%v`` of a float64: Go's shortest digits, in %e form when the exponent is below
    -4 or 6 and above (``strconv.FormatFloat(f, 'g', -1, 64)``): 1e+06, 123456, 0.0001."""
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    point = len(text) + exponent  # digits before the decimal point
    exp = point - 1
    if exp < -4 or exp >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        out = f"{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    elif point <= 0:
        out = "0." + "0" * -point + text
    elif point >= len(text):
        out = text + "0" * (point - len(text))
    else:
        out = text[:point] + "." + text[point:]
    return ("-" if sign else "") + out


def go_syntax(value: Any) -> str:
    """``%#v`` of a decoded JSON value (``map[string]interface {}{"name":"w"}``)."""
    if isinstance(value, dict):
        inner = ", ".join(f"{go_quote(str(k))}:{go_syntax(v)}" for k, v in sorted(value.items()))
        return "map[string]interface {}{" + inner + "}"
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(go_syntax(v) for v in value) + "}"
    if value is None:
        return "interface {}(nil)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    return go_quote(str(value))
