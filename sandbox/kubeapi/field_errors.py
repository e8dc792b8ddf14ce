"""Field-level validation errors, worded and aggregated as kube-apiserver words them.

A port of ``k8s.io/apimachinery/pkg/util/validation/field`` (errors.go, path.go) and of
``apierrors.NewInvalid`` (k8s.io/apimachinery v0.32.0, pkg/api/errors/errors.go): each
error renders as ``<field>: <Type>: <value>: <detail>`` with Go's formatting of the bad
value (``%q`` for strings, ``%v`` for numbers, ``%#v`` for maps), and a list of them
becomes one 422 ``Invalid`` Status whose message is
``<Kind>.<group> "<name>" is invalid: [<error>, <error>]`` (no brackets for one error,
duplicates dropped) and whose ``details.causes`` carry every error's reason, field and
body.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sandbox.kubeapi.errors import ApiError, JsonObject

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
    """The value of an error that prints none (field.OmitValueType)."""


OMIT = Omitted()


@dataclass(frozen=True)
class FieldError:
    """One ``field.Error``: its type (the cause's reason), path, bad value and detail."""

    type: str
    field: str
    value: Any = ""
    detail: str = ""

    def body(self) -> str:
        """``ErrorBody()``: the message without the field."""
        words = _WORDS[self.type]
        if self.type in _VALUELESS or self.value is OMIT:
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


def not_supported(field: str, value: Any, supported: Sequence[str]) -> FieldError:
    detail = ""
    if supported:
        detail = "supported values: " + ", ".join(go_quote(str(v)) for v in supported)
    return FieldError("FieldValueNotSupported", field, value, detail)


def too_long(field: str, max_length: int) -> FieldError:
    detail = (f"may not be more than {max_length} bytes" if max_length >= 0
              else "value is too long")
    return FieldError("FieldValueTooLong", field, "<value omitted>", detail)


def too_many(field: str, actual: int, maximum: int) -> FieldError:
    detail = f"must have at most {maximum} items" if maximum >= 0 else "has too many items"
    return FieldError("FieldValueTooMany", field, actual if actual >= 0 else OMIT, detail)


def internal(field: str, detail: str) -> FieldError:
    return FieldError("InternalError", field, None, detail)


# ----------------------------------------------------------------------------- aggregation


def aggregate(errors: Iterable[FieldError]) -> str:
    """``ErrorList.ToAggregate().Error()``: unique messages, bracketed when several."""
    seen: list[str] = []
    for error in errors:
        text = str(error)
        if text not in seen:
            seen.append(text)
    if len(seen) == 1:
        return seen[0]
    return "[" + ", ".join(seen) + "]"


def invalid_error(group: str, kind: str, name: str, errors: Sequence[FieldError]) -> ApiError:
    """The 422 ``Invalid`` Status kube-apiserver answers for ``errors`` (NewInvalid)."""
    qualified = f"{kind}.{group}" if group else kind
    message = f'{qualified} "{name}" is invalid'
    if errors:
        message += f": {aggregate(errors)}"
    details: JsonObject = {"name": name, "group": group, "kind": kind,
                           "causes": [{"reason": e.type, "message": e.body(), "field": e.field}
                                      for e in errors]}
    if not group:
        del details["group"]
    return ApiError(422, "Invalid", message, details=details)


# ----------------------------------------------------------------------------- Go formatting


def go_quote(text: str) -> str:
    """Go's ``%q`` / ``strconv.Quote`` of a string (JSON escapes are the same for the
    characters that occur in object fields)."""
    return json.dumps(text, ensure_ascii=False)


def go_value(value: Any) -> str:
    """How ``ErrorBody`` prints a bad value: ``%q`` for strings, ``%v`` for numbers and
    booleans, ``%#v`` for what decoding JSON gives otherwise."""
    if value is None:
        return '"null"'  # ErrorBody turns a nil value into the string "null", then %q
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
