"""``x-kubernetes-list-type`` invariants and embedded resources of custom resources.

Ports of k8s.io/apiextensions-apiserver v0.32.0:

* pkg/apiserver/schema/listtype/validation.go — items of a ``set`` list are unique
  (``Duplicate value: "a"``), keys of a ``map`` list are unique
  (``Duplicate value: map[string]interface {}{"name":"w"}``), and a ``map`` list holds
  only objects;
* pkg/apiserver/schema/objectmeta/validation.go — an ``x-kubernetes-embedded-resource``
  object needs a string ``apiVersion`` and ``kind`` (its metadata is decoded and checked as
  the built-in ObjectMeta is, elsewhere).
"""

from __future__ import annotations

import json
from typing import Any

from sandbox.kubeapi import field_errors as fe
from sandbox.kubeapi.crd_schema import Schema
from sandbox.kubeapi.field_errors import FieldError
from sandbox.kubeapi.validation import is_dns1035_label

__all__ = ["validate_embedded", "validate_list_types"]


def validate_list_types(schema: Schema, obj: Any, path: str = "") -> list[FieldError]:
    """Errors of the set/map lists anywhere in ``obj``."""
    errors: list[FieldError] = []
    if schema.has_list_sets:
        _walk(schema, obj, path, errors)
    return errors


def _walk(schema: Schema, value: Any, path: str, errors: list[FieldError]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            child = schema.properties.get(key) if schema.properties is not None else None
            if child is not None:
                if child.has_list_sets:
                    _walk(child, item, f"{path}.{key}" if path else key, errors)
            elif schema.additional is not None and schema.additional.has_list_sets:
                _walk(schema.additional, item, f"{path}[{key}]", errors)
    elif isinstance(value, list):
        if schema.list_type == "set":
            errors.extend(fe.duplicate(f"{path}[{i}]", value[i]) for i in _repeats(value))
        elif schema.list_type == "map":
            errors.extend(_map_list(schema, value, path))
        if schema.items is not None and schema.items.has_list_sets:
            for index, item in enumerate(value):
                _walk(schema.items, item, f"{path}[{index}]", errors)


def _repeats(items: list[Any]) -> list[int]:
    """Indices of the second appearance of each repeated item."""
    seen: dict[str, int] = {}
    repeats = []
    for index, item in enumerate(items):
        key = json.dumps(item, sort_keys=True) if isinstance(item, (dict, list)) \
            else repr((type(item).__name__, item))
        seen[key] = seen.get(key, 0) + 1
        if seen[key] == 2:
            repeats.append(index)
    return repeats


def _map_list(schema: Schema, items: list[Any], path: str) -> list[FieldError]:
    for index, item in enumerate(items):
        if item is not None and not isinstance(item, dict):
            return [fe.invalid(f"{path}[{index}]", item,
                               "must be an object for an array of list-type map")]
    keys = schema.list_map_keys
    values = [{k: item[k] for k in keys if k in item} if isinstance(item, dict) else {}
              for item in items]
    return [fe.duplicate(f"{path}[{i}]", values[i]) for i in _repeats(values)]


def validate_embedded(schema: Schema, value: Any, path: str = "") -> list[FieldError]:
    """Errors of the embedded resources below ``value`` (the root is not one)."""
    errors: list[FieldError] = []
    _embedded(schema, value, path, errors, root=True)
    return errors


def _embedded(schema: Schema | None, value: Any, path: str, errors: list[FieldError], *,
              root: bool = False) -> None:
    if schema is None:
        return
    if isinstance(value, dict):
        if schema.embedded and not root:
            errors.extend(_type_meta(value, path))
        for key, item in value.items():
            child = schema.properties.get(key) if schema.properties is not None else None
            if child is not None:
                _embedded(child, item, f"{path}.{key}" if path else key, errors)
            elif schema.additional is not None:
                _embedded(schema.additional, item, f"{path}[{key}]", errors)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _embedded(schema.items, item, f"{path}[{index}]", errors)


def _type_meta(value: dict[str, Any], path: str) -> list[FieldError]:
    errors = []
    for name in ("apiVersion", "kind"):
        where = f"{path}.{name}"
        if name not in value:
            errors.append(fe.required(where, "must not be empty"))
            continue
        text = value[name]
        if not isinstance(text, str):
            errors.append(fe.invalid(where, text, "must be a string"))
        elif not text:
            errors.append(fe.invalid(where, text, "must not be empty"))
        elif name == "kind" and (problems := is_dns1035_label(text.lower())):
            errors.append(fe.invalid(where, text, "may have mixed case, but should otherwise "
                                     "match: " + ",".join(problems)))
        elif name == "apiVersion" and text.count("/") > 1:
            errors.append(fe.invalid(where, text,
                                     f"unexpected GroupVersion string: {text}"))
    return errors
