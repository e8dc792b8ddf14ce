"""Where and with what values a custom resource's CEL rules run.

The walk of k8s.io/apiextensions-apiserver v0.32.0 pkg/apiserver/schema/cel/validation.go
(``Validator.validate``): every node that carries ``x-kubernetes-validations`` has its
rules run (:func:`sandbox.kubeapi.cel.evaluate_rules`) on each non-null value, with
``oldSelf`` the correlated old value — object properties by name, ``list-type: map``
items by their keys, nothing for other list items — so a transition rule under an
atomic list never runs. With ratcheting (updates of the main resource), a rule that does
not use ``oldSelf`` is not held against a value that is unchanged, nor against one under
an unchanged nearest correlated ancestor.

Values are handed to CEL as k8s.io/apiserver pkg/cel/common/values.go builds them
(:func:`to_cel`): the root and embedded resources show ``apiVersion``, ``kind`` and only
``name``/``generateName`` of their metadata.
"""

from __future__ import annotations

import base64
import binascii
from datetime import timedelta
from typing import Any

from sandbox.kubeapi import cel
from sandbox.kubeapi.crd_openapi import UNCORRELATED, correlated_items, deep_equal
from sandbox.kubeapi.crd_schema import Schema
from sandbox.kubeapi.field_errors import FieldError

__all__ = ["to_cel", "validate_rules"]


def validate_rules(schema: Schema, obj: Any, old: Any = UNCORRELATED, *,
                   ratchet: bool = False) -> list[FieldError]:
    """Field errors of the rules not met anywhere in the resource ``obj``."""
    errors: list[FieldError] = []
    if schema.has_rules:
        _walk(schema, obj, old, "", errors, ratchet=ratchet, unchanged=False, root=True)
    return errors


def _walk(schema: Schema, value: Any, old: Any, path: str, errors: list[FieldError], *,
          ratchet: bool, unchanged: bool, root: bool = False) -> None:
    if value is None:
        return
    if old is None:
        old = UNCORRELATED
    correlated = old is not UNCORRELATED
    if ratchet and correlated:
        unchanged = deep_equal(value, old, schema)
    if schema.rules:
        rules = [r for r in schema.rules if r.uses_old_self or not (ratchet and unchanged)]
        if rules:
            resource = root or schema.embedded
            mine = to_cel(value, schema, resource=resource)
            theirs = to_cel(old, schema, resource=resource) if correlated and any(
                r.uses_old_self for r in rules) else None
            errors.extend(cel.evaluate_rules(rules, path or "<nil>", schema.type,
                                             mine, theirs, correlated))
    if isinstance(value, dict):
        old_map = old if isinstance(old, dict) else None
        for key, item in value.items():
            child = schema.properties.get(key) if schema.properties is not None else None
            if child is None:
                child = schema.additional
                where = f"{path}[{key}]"
            else:
                where = f"{path}.{key}" if path else key
            if child is None or not child.has_rules:
                continue
            child_old = old_map.get(key, UNCORRELATED) if old_map is not None else UNCORRELATED
            _walk(child, item, child_old, where, errors, ratchet=ratchet, unchanged=unchanged)
    elif isinstance(value, list) and schema.items is not None and schema.items.has_rules:
        olds = correlated_items(schema, value, old)
        for index, item in enumerate(value):
            _walk(schema.items, item, olds[index], f"{path}[{index}]", errors,
                  ratchet=ratchet, unchanged=unchanged)


# ----------------------------------------------------------------------------- values


def to_cel(value: Any, schema: Schema | None, *, resource: bool = False) -> Any:
    """``value`` as a CEL rule sees it under ``schema``."""
    if value is None or schema is None:
        return value
    if schema.int_or_string:
        return value
    if isinstance(value, dict):
        if schema.properties is not None or resource or schema.embedded:
            out: dict[str, Any] = {}
            if resource or schema.embedded:
                for name in ("apiVersion", "kind"):
                    if name in value:
                        out[name] = value[name]
                meta = value.get("metadata")
                if isinstance(meta, dict):
                    out["metadata"] = {k: meta[k] for k in ("name", "generateName")
                                       if k in meta}
            for key, item in value.items():
                if key in out:
                    continue  # a resource's type and object metadata, as set above
                child = schema.properties.get(key) if schema.properties is not None else None
                escaped = schema.cel_names.get(key)
                if child is not None and escaped is not None:
                    out[escaped] = to_cel(item, child)
            return out
        if schema.additional is not None:
            return {key: to_cel(item, schema.additional) for key, item in value.items()}
        return value
    if isinstance(value, list):
        return [to_cel(item, schema.items) for item in value]
    if isinstance(value, str):
        return _string(value, schema)
    if schema.type == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _string(value: str, schema: Schema) -> Any:
    if schema.format == "duration":
        parsed: timedelta | None = cel.duration_value(value)
        return value if parsed is None else parsed
    if schema.format in ("date-time", "date"):
        moment = cel.timestamp_value(value if schema.format == "date-time"
                                     else f"{value}T00:00:00Z")
        return value if moment is None else moment
    if schema.format == "byte":
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return value
    return value
