"""Field errors and value checks worded as ``k8s.io/apimachinery`` v0.31 words them.

The webhooks the sandbox ports (JobSet v0.7.2, Kueue v0.10.1) build their refusals
from apimachinery: ``field.Error`` (``pkg/util/validation/field/errors.go``:
``<path>: <Type>: <value>: <detail>``), ``ErrorList.ToAggregate()`` (one message,
or ``[a, b]`` for several, duplicates dropped: ``pkg/util/errors/errors.go``) and the
checks of ``pkg/util/validation/validation.go`` (``IsDNS1123Subdomain``,
``IsDNS1035Label``, ``IsQualifiedName``, ``IsValidLabelValue``,
``IsDomainPrefixedPath``) and ``pkg/apis/meta/v1/validation`` (``ValidateLabels``,
``ValidateLabelName``, ``ValidateLabelSelector``). This module holds the sandbox's
own copy of them, with their texts.

How a bad value is printed follows ``ErrorBody``: strings quoted (``%q``), numbers and
booleans bare, values of Go types with a ``String()`` method (``corev1.ResourceName``)
bare (:class:`Bare`), structs as Go's ``%#v`` would (:class:`GoValue` carries text the
caller composed; for large structs the sandbox prints an abbreviation, as Go's
output there includes pointer addresses no stand-in can reproduce).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Bare",
    "FieldError",
    "GoValue",
    "Path",
    "aggregate",
    "duplicate",
    "forbidden",
    "immutable",
    "invalid",
    "is_dns1035_label",
    "is_dns1123_subdomain",
    "is_qualified_name",
    "is_valid_label_value",
    "not_found",
    "not_supported",
    "required",
    "too_long_max_length",
    "validate_label_name",
    "validate_label_selector",
    "validate_labels",
]

FIELD_IMMUTABLE = "field is immutable"
IS_NEGATIVE = "must be greater than or equal to 0"


class Bare(str):
    """A value of a Go type with ``String()``: printed without quotes."""


class GoValue(str):
    """A value printed as the caller composed it (Go's ``%#v`` of a struct)."""


class Omit:
    """``field.OmitValueType{}``: the error names no value."""


OMIT = Omit()


class Path(str):
    """A field path: ``Path("spec").child("a").at(0).key("k")`` → ``spec.a[0][k]``."""

    def child(self, *names: str) -> Path:
        text = str(self)
        for name in names:
            text = f"{text}.{name}" if text else name
        return Path(text)

    def at(self, i: int) -> Path:
        return Path(f"{self}[{i}]")

    def key(self, k: str) -> Path:
        return Path(f"{self}[{k}]")


_TYPE_TEXT = {
    "FieldValueNotFound": "Not found",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
}


def _go_quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def render_value(value: Any) -> str:
    """A bad value as ``ErrorBody`` prints it."""
    if value is None:
        return "null"
    if isinstance(value, (Bare, GoValue)):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return _go_quote(value)
    return GoValue(json.dumps(value, sort_keys=True))


@dataclass(frozen=True)
class FieldError:
    """One ``field.Error``."""

    type: str
    field: str
    value: Any = OMIT
    detail: str = ""

    def body(self) -> str:
        text = _TYPE_TEXT[self.type]
        if self.type not in ("FieldValueRequired", "FieldValueForbidden",
                             "FieldValueTooLong") and not isinstance(self.value, Omit):
            text = f"{text}: {render_value(self.value)}"
        if self.detail:
            text = f"{text}: {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueInvalid", path, value, detail)


def required(path: str, detail: str = "") -> FieldError:
    return FieldError("FieldValueRequired", path, "", detail)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError("FieldValueForbidden", path, "", detail)


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError("FieldValueDuplicate", path, value)


def not_found(path: str, value: Any) -> FieldError:
    return FieldError("FieldValueNotFound", path, value)


def not_supported(path: str, value: Any, valid: Iterable[str]) -> FieldError:
    choices = ", ".join(_go_quote(v) for v in valid)
    return FieldError("FieldValueNotSupported", path, value,
                      f"supported values: {choices}" if choices else "")


def too_long_max_length(path: str, value: Any, max_length: int) -> FieldError:
    return FieldError("FieldValueTooLong", path, value, f"may not be longer than {max_length}")


def immutable(path: str, new: Any, old: Any, shown: Any = None) -> list[FieldError]:
    """``ValidateImmutableField``: an error when ``new`` differs from ``old`` (``shown``
    is how the new value is printed, when it is not a simple value)."""
    if new == old:
        return []
    return [invalid(path, new if shown is None else shown, FIELD_IMMUTABLE)]


def aggregate(errors: Iterable[object]) -> str:
    """``ErrorList.ToAggregate().Error()``: one message, or ``[a, b]``; "" for none."""
    messages = list(dict.fromkeys(str(e) for e in errors))
    if not messages:
        return ""
    if len(messages) == 1:
        return messages[0]
    return "[" + ", ".join(messages) + "]"


# ---------------------------------------------------------------------- string checks

_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = _DNS1123_LABEL + "(\\." + _DNS1123_LABEL + ")*"
_DNS1035_LABEL = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QNAME_CHAR = "[A-Za-z0-9]"
_QNAME_EXT_CHAR = "[-A-Za-z0-9_.]"
_QUALIFIED_NAME = "(" + _QNAME_CHAR + _QNAME_EXT_CHAR + "*)?" + _QNAME_CHAR
_LABEL_VALUE = "(" + _QUALIFIED_NAME + ")?"
_HTTP_PATH = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"

_QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must "
                       "start and end with an alphanumeric character")
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric "
                    "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                    "character")
_DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case "
                          "alphanumeric characters, '-' or '.', and must start and end with an "
                          "alphanumeric character")
_DNS1035_LABEL_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or "
                      "'-', start with an alphabetic character, and end with an alphanumeric "
                      "character")


def _matches(pattern: str, value: str) -> bool:
    return re.fullmatch(pattern, value) is not None


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def regex_error(message: str, pattern: str, *examples: str) -> str:
    if not examples:
        return f"{message} (regex used for validation is '{pattern}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def is_dns1123_subdomain(value: str) -> list[str]:
    errors = []
    if len(value) > 253:
        errors.append(max_len_error(253))
    if not _matches(_DNS1123_SUBDOMAIN, value):
        errors.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN, "example.com"))
    return errors


def is_dns1035_label(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append(max_len_error(63))
    if not _matches(_DNS1035_LABEL, value):
        errors.append(regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL, "my-name", "abc-123"))
    return errors


def is_qualified_name(value: str) -> list[str]:
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors += [f"prefix part {m}" for m in is_dns1123_subdomain(prefix)]
    else:
        return [
            "a qualified name "
            + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part " + max_len_error(63))
    if not _matches(_QUALIFIED_NAME, name):
        errors.append("name part " + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME, "MyName",
                                                 "my.name", "123-abc"))
    return errors


def is_valid_label_value(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append(max_len_error(63))
    if not _matches(_LABEL_VALUE, value):
        errors.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE, "MyValue", "my_value", "12345"))
    return errors


def is_domain_prefixed_path(path: str, value: str) -> list[FieldError]:
    if not value:
        return [required(path)]
    segments = value.split("/", 1)
    if len(segments) != 2 or not segments[0] or not segments[1]:
        return [invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    host, rest = segments
    errors = [invalid(path, host, message) for message in is_dns1123_subdomain(host)]
    if not _matches(_HTTP_PATH, rest):
        errors.append(invalid(path, rest, regex_error("Invalid path", _HTTP_PATH)))
    return errors


# ---------------------------------------------------------------------- metav1 validation

def validate_label_name(name: str, path: str) -> list[FieldError]:
    return [invalid(path, name, message) for message in is_qualified_name(name)]


def validate_labels(labels: Mapping[str, Any] | None, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for key, value in (labels or {}).items():
        errors += validate_label_name(str(key), path)
        errors += [invalid(path, str(value), m) for m in is_valid_label_value(str(value))]
    return errors


def validate_label_selector(selector: Mapping[str, Any] | None, path: Path) -> list[FieldError]:
    """``ValidateLabelSelector`` with the default options."""
    if not selector:
        return []
    errors = validate_labels(selector.get("matchLabels"), path.child("matchLabels"))
    for i, requirement in enumerate(selector.get("matchExpressions") or []):
        where = path.child("matchExpressions").at(i)
        operator = requirement.get("operator")
        values = requirement.get("values") or []
        if operator in ("In", "NotIn"):
            if not values:
                errors.append(required(where.child("values"),
                                       "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errors.append(forbidden(where.child("values"), "may not be specified when "
                                                               "`operator` is 'Exists' or "
                                                               "'DoesNotExist'"))
        else:
            errors.append(invalid(where.child("operator"), str(operator or ""),
                                  "not a valid selector operator"))
        errors += validate_label_name(str(requirement.get("key") or ""), where.child("key"))
        for j, value in enumerate(values):
            errors += [invalid(where.child("values").at(j), str(value), m)
                       for m in is_valid_label_value(str(value))]
    return errors
