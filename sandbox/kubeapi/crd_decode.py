"""What decoding a custom resource does before anything validates it: prune, then default.

kube-apiserver's decoder for custom resources (k8s.io/apiextensions-apiserver v0.32.0,
pkg/apiserver/customresource_handler.go ``unstructuredSchemaCoercer``) runs, in order:

1. pruning (pkg/apiserver/schema/pruning/algorithm.go): every field the structural schema
   does not declare is dropped, except below ``x-kubernetes-preserve-unknown-fields`` and
   the ``apiVersion``/``kind``/``metadata`` of the root and of embedded resources; the
   dropped paths (sorted) are what ``fieldValidation`` warns about or refuses;
2. null pruning (schema/defaulting/prunenulls.go): a ``null`` where the schema is not
   ``nullable`` and has no default is removed;
3. defaulting (schema/defaulting/algorithm.go): an absent property with a ``default``, or
   a non-nullable ``null`` with one, gets a deep copy of it, top-down (a defaulted object
   gets its own properties' defaults).

All three change the object in place. The root's metadata is not the schema's business
(ObjectMeta is decoded as the built-in type: :mod:`sandbox.kubeapi.fields`).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from sandbox.kubeapi.crd_schema import Schema

__all__ = ["apply_defaults", "decode", "prune", "prune_nulls"]

_META = frozenset({"apiVersion", "kind", "metadata"})


def decode(obj: dict[str, Any], schema: Schema) -> list[str]:
    """Prune, prune nulls and default a whole custom resource in place; the pruned paths."""
    unknown = prune(obj, schema, root=True)
    prune_nulls(obj, schema)
    apply_defaults(obj, schema)
    return unknown


def prune(value: Any, schema: Schema | None, *, root: bool = False,
          by_keys: bool = False) -> list[str]:
    """Drop undeclared fields of ``value`` in place; their paths, sorted as the server
    sorts them (``spec.replicatedJobs[0].groupName``). ``by_keys`` names the items of
    set and map lists as server-side apply's field paths do
    (``spec.replicatedJobs[name="w"].groupName``)."""
    unknown: list[str] = []
    _prune(value, schema, "", unknown, embedded=root, by_keys=by_keys)
    unknown.sort()
    return unknown


def _item(schema: Schema | None, index: int, item: Any, by_keys: bool) -> str:
    """How a path names a list item: its index, or (``by_keys``) its keys or value."""
    if by_keys and schema is not None:
        if schema.list_type == "map" and isinstance(item, dict):
            keys = ",".join(f"{k}={json.dumps(item[k])}" for k in schema.list_map_keys
                            if k in item)
            return f"[{keys}]"
        if schema.list_type == "set":
            return f"[={json.dumps(item)}]"
    return f"[{index}]"


def _prune(value: Any, schema: Schema | None, path: str, unknown: list[str],
           *, embedded: bool = False, by_keys: bool = False) -> None:
    if schema is not None and schema.preserve_unknown:
        _skip_prune(value, schema, path, unknown)
        return
    if isinstance(value, dict):
        if schema is None:
            for key in list(value):
                unknown.append(_key(path, key))
                del value[key]
            return
        embedded = embedded or schema.embedded
        properties = schema.properties
        for key in list(value):
            if embedded and key in _META:
                continue
            child = properties.get(key) if properties is not None else None
            if child is not None:
                _prune(value[key], child, _key(path, key), unknown, by_keys=by_keys)
            elif schema.additional is not None:
                _prune(value[key], schema.additional, _key(path, key), unknown,
                       by_keys=by_keys)
            else:
                if key not in _META or path:
                    unknown.append(_key(path, key))
                del value[key]
    elif isinstance(value, list):
        items = schema.items if schema is not None else None
        for index, item in enumerate(value):
            _prune(item, items, path + _item(schema, index, item, by_keys), unknown,
                   by_keys=by_keys)


def _skip_prune(value: Any, schema: Schema, path: str, unknown: list[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if schema.embedded and key in _META:
                continue
            child = schema.properties.get(key) if schema.properties is not None else None
            if child is None:
                child = schema.additional
            if child is not None:
                _prune(item, child, _key(path, key), unknown)
    elif isinstance(value, list) and schema.items is not None:
        for index, item in enumerate(value):
            _skip_prune(item, schema.items, f"{path}[{index}]", unknown)


def _key(path: str, key: str) -> str:
    return f"{path}.{key}" if path else str(key)


def prune_nulls(value: Any, schema: Schema | None) -> None:
    """Remove ``null`` values whose schema is neither nullable nor defaulted."""
    if isinstance(value, dict):
        for key in list(value):
            child = schema.child(key) if schema is not None else None
            item = value[key]
            if item is None and child is not None and not child.nullable \
                    and not child.has_default:
                del value[key]
            else:
                prune_nulls(item, child)
    elif isinstance(value, list):
        items = schema.items if schema is not None else None
        for item in value:
            prune_nulls(item, items)


def apply_defaults(value: Any, schema: Schema | None) -> None:
    """Fill in the schema's defaults, in place."""
    if schema is None:
        return
    if isinstance(value, dict):
        if schema.properties is not None and schema.has_defaults:
            for key, child in schema.properties.items():
                if child.has_default and (key not in value
                                          or (value[key] is None and not child.nullable)):
                    value[key] = copy.deepcopy(child.default)
        if not schema.has_defaults:
            return
        for key, item in value.items():
            declared = schema.properties.get(key) if schema.properties is not None else None
            if declared is not None:
                apply_defaults(item, declared)
            elif schema.additional is not None:
                extra = schema.additional
                if item is None and not extra.nullable and extra.has_default:
                    value[key] = item = copy.deepcopy(extra.default)
                apply_defaults(item, extra)
    elif isinstance(value, list) and schema.items is not None and \
            (schema.items.has_defaults or schema.items.has_default):
        items = schema.items
        for index, item in enumerate(value):
            if item is None and not items.nullable and items.has_default:
                value[index] = item = copy.deepcopy(items.default)
            apply_defaults(item, items)
