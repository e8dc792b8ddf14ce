"""Kubernetes' name, label and selector checks, with their texts.

The sandbox's one copy of the checks of ``k8s.io/apimachinery`` v0.32.0 that the API and
the ported webhooks refuse names and labels with: ``pkg/util/validation/validation.go``
(``IsDNS1123Label``, ``IsDNS1123Subdomain``, ``IsDNS1035Label``, ``IsQualifiedName``,
``IsValidLabelValue``, ``IsDomainPrefixedPath``, ``MaxLenError``, ``RegexError``),
``pkg/apis/meta/v1/validation/validation.go`` (``ValidateLabelName``,
``ValidateLabels``, ``ValidateLabelSelector`` with the default options) and
``pkg/api/validation`` (``ValidateImmutableField`` and ``FieldImmutableErrorMsg`` of
objectmeta.go, ``IsNegativeErrorMsg`` of generic.go). These
are unchanged between v0.31 (what JobSet v0.7.2 and Kueue v0.10.1 are built with) and
v0.32 (kube-apiserver 1.32) for everything ported here. The ``Is*`` checks return the
problems as strings, as Go's do; the ``Validate*`` ones return field errors
(:mod:`sandbox.kubeapi.field_errors`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sandbox.kubeapi.field_errors import FieldError, Path, forbidden, invalid, required

__all__ = [
    "FIELD_IMMUTABLE",
    "IS_NEGATIVE",
    "immutable",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_domain_prefixed_path",
    "is_qualified_name",
    "is_valid_label_value",
    "max_len_error",
    "regex_error",
    "validate_label_name",
    "validate_label_selector",
    "validate_labels",
]

FIELD_IMMUTABLE = "field is immutable"
IS_NEGATIVE = "must be greater than or equal to 0"

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
_DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric "
                      "characters or '-', and must start and end with an alphanumeric character")
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


# ---------------------------------------------------------------------- string checks


def is_dns1123_label(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append(max_len_error(63))
    if not _matches(_DNS1123_LABEL, value):
        if _matches(_DNS1123_SUBDOMAIN, value):
            errors.append("must not contain dots")  # a subdomain, of the right length
        else:
            errors.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL, "my-name", "123-abc"))
    return errors


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


# ---------------------------------------------------------------------- field checks


def immutable(path: str, new: Any, old: Any, shown: Any = None) -> list[FieldError]:
    """``ValidateImmutableField``: an error when ``new`` differs from ``old`` (``shown``
    is how the new value is printed, when it is not a simple value)."""
    if new == old:
        return []
    return [invalid(path, new if shown is None else shown, FIELD_IMMUTABLE)]


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
