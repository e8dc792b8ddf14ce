"""OpenAPI value validation of custom resources, as kube-openapi's validator does it.

A port of the parts of k8s.io/kube-openapi (32ad38e42d3f, the version apiextensions-apiserver
v0.32.0 uses) pkg/validation/validate that a structural schema exercises — type (with
``integer`` vs ``number``: a whole float is an integer, an integer is a number;
int-or-string; nullable), anyOf/allOf/oneOf/not, string length (in runes), pattern
(unanchored search), format, number bounds and multipleOf, items, min/max items,
uniqueItems, enum, min/max properties, additionalProperties, required — and of
apiextensions-apiserver's translation of its results into field errors
(pkg/apiserver/validation/validation.go ``kubeOpenAPIResultToFieldErrors``): messages say
``<path> in body should match '<pattern>'`` and the like, enum failures become
``Unsupported value``, maxLength ``Too long``, maxItems/maxProperties ``Too many``, type
failures ``FieldValueTypeInvalid``, anyOf/allOf/oneOf failures a ``<nil>`` (or the
subresource's) error.

On update the main resource is validated with ratcheting
(pkg/apiserver/validation/ratcheting.go, CRDValidationRatcheting is on by default): errors
of a value that is unchanged from its correlated old value (objects by key, ``list-type:
map`` items by their keys) are dropped, so an object stored before a rule existed can
still be updated elsewhere. Errors are reported in the schema's property order where
Go iterates a map (the real order is random).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sandbox.kubeapi import field_errors as fe
from sandbox.kubeapi.crd_schema import Schema
from sandbox.kubeapi.field_errors import FieldError, go_float, go_quote
from sandbox.kubeapi.formats import format_ok

__all__ = ["UNCORRELATED", "correlated_items", "deep_equal", "json_type", "validate_value"]


class _Uncorrelated:
    """No old value corresponds to this one."""


UNCORRELATED: Any = _Uncorrelated()


@dataclass
class _Error:
    """A kube-openapi error before translation: its code name, path, value and message."""

    code: str
    name: str
    message: str
    value: Any = None
    valid: Any = None
    values: Sequence[Any] = ()


@dataclass
class _Result:
    errors: list[_Error] = field(default_factory=list)
    matches: int = 0

    def add(self, error: _Error) -> None:
        if all(e.message != error.message or e.code != error.code for e in self.errors):
            self.errors.append(error)

    def merge(self, other: _Result) -> None:
        for error in other.errors:
            self.add(error)
        self.matches += other.matches


def validate_value(schema: Schema, value: Any, prefix: str = "",
                   old: Any = UNCORRELATED) -> list[FieldError]:
    """Field errors of ``value`` against ``schema``; ``prefix`` is the field path the
    value sits at (``status`` for a status update), ``old`` its old value for ratcheting."""
    result = _validate(schema, value, "", old)
    return [_translate(error, prefix) for error in result.errors]


# ----------------------------------------------------------------------------- one node


def _validate(schema: Schema, value: Any, path: str, old: Any) -> _Result:
    if old is not UNCORRELATED and deep_equal(value, old, schema):
        return _Result()  # ratcheted: an unchanged value keeps whatever it was
    result = _Result()
    if value is None:
        result.merge(_type(schema, value, path))
        result.merge(_enum(schema, value, path))
        return result
    kind = json_type(value)
    result.merge(_type(schema, value, path))
    result.merge(_combinators(schema, value, path))
    if kind == "string":
        result.merge(_string(schema, value, path))
        if schema.check_format:
            result.merge(_format(schema, value, path))
    elif kind in ("integer", "number"):
        result.merge(_number(schema, value, path))
    elif kind == "array":
        result.merge(_array(schema, value, path, old))
    result.merge(_enum(schema, value, path))
    if kind == "object":
        result.merge(_object(schema, value, path, old))
    result.matches += 1
    return result


def json_type(value: Any) -> str:
    """The JSON type kube-openapi infers for a decoded value."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null" if value is None else type(value).__name__


def _fail(code: str, name: str, message: str, **extra: Any) -> _Result:
    return _Result(errors=[_Error(code, name, message, **extra)])


def _type(schema: Schema, value: Any, path: str) -> _Result:
    types = schema.types
    raw_format = schema.format if schema.check_format else ""
    if not types and not raw_format:
        return _Result()
    if value is None:
        if types and "null" not in types and not schema.nullable:
            return _invalid_type(path, ",".join(types), "null")
        return _Result(matches=1)
    kind = json_type(value)
    if kind == "boolean":
        value_format = ""
    elif kind == "integer":
        value_format = "int64"
    elif kind == "number":
        value_format = "float64"
    else:
        value_format = ""
    float_int = kind == "number" and float(value).is_integer() and "integer" in types
    int_float = kind == "integer" and "number" in types
    if kind not in ("string", "array") and raw_format and not (
            kind in types or value_format == raw_format or float_int or int_float):
        return _invalid_type(path, raw_format, value_format)
    if "number" not in types and "integer" not in types and raw_format \
            and kind in ("string", "array"):
        return _Result(matches=1)
    if not (kind in types or float_int or int_float):
        return _invalid_type(path, ",".join(types), kind)
    return _Result(matches=1)


def _invalid_type(path: str, type_name: str, value: str) -> _Result:
    return _fail("InvalidType", path,
                 f"{path} in body must be of type {type_name}: {go_quote(value)}", value=value)


def _combinators(schema: Schema, value: Any, path: str) -> _Result:
    result = _Result()
    if schema.any_of:
        best: _Result | None = None
        for option in schema.any_of:
            attempt = _validate(option, value, path, UNCORRELATED)
            if not attempt.errors:
                best = None
                result.merge(attempt)
                break
            if best is None or attempt.matches > best.matches:
                best = attempt
        else:
            result.add(_Error("Composite", path,
                              f"{go_quote(path)} must validate at least one schema (anyOf)"))
        if best is not None:
            result.merge(best)
    if schema.one_of:
        valid = 0
        best = None
        for option in schema.one_of:
            attempt = _validate(option, value, path, UNCORRELATED)
            if not attempt.errors:
                valid += 1
                best = None
                continue
            if valid == 0 and (best is None or attempt.matches > best.matches):
                best = attempt
        if valid != 1:
            found = "Found none valid" if valid == 0 else f"Found {valid} valid alternatives"
            result.add(_Error("Composite", path, f"{go_quote(path)} must validate one and "
                                                 f"only one schema (oneOf). {found}"))
            if best is not None:
                result.merge(best)
    if schema.all_of:
        passed = 0
        for option in schema.all_of:
            attempt = _validate(option, value, path, UNCORRELATED)
            passed += not attempt.errors
            result.merge(attempt)
        if passed != len(schema.all_of):
            tail = ". None validated" if passed == 0 else ""
            result.add(_Error("Composite", path,
                              f"{go_quote(path)} must validate all the schemas (allOf){tail}"))
    if schema.not_ is not None and not _validate(schema.not_, value, path,
                                                 UNCORRELATED).errors:
        result.add(_Error("Composite", path,
                          f"{go_quote(path)} must not validate the schema (not)"))
    result.matches += 1
    return result


def _string(schema: Schema, value: str, path: str) -> _Result:
    length = len(value)
    if schema.max_length is not None and length > schema.max_length:
        return _fail("TooLong", path, f"{path} in body should be at most {schema.max_length} "
                     "chars long", value=value, valid=schema.max_length)
    if schema.min_length is not None and length < schema.min_length:
        return _fail("TooShort", path, f"{path} in body should be at least "
                     f"{schema.min_length} chars long", value=value)
    if schema.pattern_error:
        return _fail("Pattern", path, f"{path} in body should match '{schema.pattern_text}, "
                     f"but pattern is invalid: {schema.pattern_error}'", value=value)
    if schema.pattern is not None and schema.pattern.search(value) is None:
        return _fail("Pattern", path, f"{path} in body should match '{schema.pattern_text}'",
                     value=value)
    return _Result(matches=1)


def _format(schema: Schema, value: str, path: str) -> _Result:
    if format_ok(schema.check_format, value):
        return _Result()
    return _fail("InvalidType", path,
                 f"{path} in body must be of type {schema.format}: {go_quote(value)}",
                 value=value)


def _number(schema: Schema, value: float, path: str) -> _Result:
    result = _Result(matches=1)
    whole = isinstance(value, int)

    def bound(limit: float) -> str:
        return str(int(limit)) if whole else go_float(limit)

    if schema.multiple_of is not None:
        factor = schema.multiple_of
        if factor <= 0:
            result.add(_Error("MultipleOfMustBePositive", path, f"factor MultipleOf declared "
                              f"for {path} must be positive: {bound(factor)}", value=factor))
        elif (whole and value % int(factor) != 0) or (
                not whole and not ((1 / factor * value) if factor < 1
                                   else (value / factor)).is_integer()):
            result.add(_Error("MultipleOf", path, f"{path} in body should be a multiple of "
                              f"{bound(factor)}", value=value))
    if schema.minimum is not None:
        low = int(schema.minimum) if whole else schema.minimum
        if value < low or (schema.exclusive_minimum and value == low):
            words = "greater than" if schema.exclusive_minimum else \
                "greater than or equal to"
            result.add(_Error("Minimum", path, f"{path} in body should be {words} "
                              f"{bound(schema.minimum)}", value=value))
    if schema.maximum is not None:
        high = int(schema.maximum) if whole else schema.maximum
        if value > high or (schema.exclusive_maximum and value == high):
            words = "less than" if schema.exclusive_maximum else "less than or equal to"
            result.add(_Error("Maximum", path, f"{path} in body should be {words} "
                              f"{bound(schema.maximum)}", value=value))
    return result


def _array(schema: Schema, value: list[Any], path: str, old: Any) -> _Result:
    result = _Result()
    if schema.items is not None:
        olds = correlated_items(schema, value, old)
        for index, item in enumerate(value):
            result.merge(_validate(schema.items, item, f"{path}[{index}]", olds[index]))
    size = len(value)
    if schema.min_items is not None and size < schema.min_items:
        result.add(_Error("MinItems", path, f"{path} in body should have at least "
                          f"{schema.min_items} items", value=size))
    if schema.max_items is not None and size > schema.max_items:
        result.add(_Error("MaxItems", path, f"{path} in body should have at most "
                          f"{schema.max_items} items", value=size, valid=schema.max_items))
    if schema.unique_items and any(value[i] in value[:i] for i in range(1, size)):
        result.add(_Error("Unique", path, f"{path} in body shouldn't contain duplicates"))
    result.matches += 1
    return result


def _enum(schema: Schema, value: Any, path: str) -> _Result:
    if not schema.enum:
        return _Result(matches=1)
    for allowed in schema.enum:
        if value is not None and _enum_equal(value, allowed):
            return _Result(matches=1)
    return _fail("Enum", path, f"{path} in body should be one of {list(schema.enum)}",
                 value=value, values=schema.enum)


def _enum_equal(value: Any, allowed: Any) -> bool:
    if isinstance(value, bool) or isinstance(allowed, bool):
        return type(value) is type(allowed) and value == allowed
    if isinstance(value, (int, float)) and isinstance(allowed, (int, float)):
        return float(value) == float(allowed)
    return bool(value == allowed)


def _object(schema: Schema, value: dict[str, Any], path: str, old: Any) -> _Result:
    result = _Result()
    count = len(value)
    if schema.min_properties is not None and count < schema.min_properties:
        result.add(_Error("TooFewProperties", path, f"{path} in body should have at least "
                          f"{schema.min_properties} properties", value=count))
    if schema.max_properties is not None and count > schema.max_properties:
        result.add(_Error("TooManyProperties", path, f"{path} in body should have at most "
                          f"{schema.max_properties} properties", value=count,
                          valid=schema.max_properties))
    properties = schema.properties or {}
    old_map = old if isinstance(old, dict) else None
    if schema.additional_allowed is False:
        for key in value:
            if key not in properties:
                result.add(_Error("UnallowedProperty", path,
                                  f"{path}.{key} in body is a forbidden property", value=key))
    elif schema.additional is not None:
        for key, item in value.items():
            if key not in properties:
                child_old = old_map.get(key, UNCORRELATED) if old_map is not None \
                    else UNCORRELATED
                result.merge(_validate(schema.additional, item, f"{path}.{key}", child_old))
    for name, child in properties.items():
        if name in value:
            child_path = f"{path}.{name}" if path else name
            child_old = UNCORRELATED
            if old_map is not None and name in old_map and not (
                    path == "" and name in ("apiVersion", "kind")):
                child_old = old_map[name]
            result.merge(_validate(child, value[name], child_path, child_old))
    for name in schema.required:
        if name not in value:
            result.add(_Error("Required", f"{path}.{name}", f"{path}.{name} in body is required"))
    result.matches += 1
    return result


# ----------------------------------------------------------------------------- ratcheting


def deep_equal(new: Any, old: Any, schema: Schema | None) -> bool:
    """CorrelatedObject.CachedDeepEqual: equal values, ``list-type: map`` lists compared
    item by item through their keys (so a reordering is no change)."""
    if new == old and type(new) is type(old):
        return True
    if schema is None or not schema.has_list_sets:
        return False
    if isinstance(new, dict) and isinstance(old, dict):
        if new.keys() != old.keys():
            return False
        return all(deep_equal(new[k], old[k], schema.child(k)) for k in new)
    if isinstance(new, list) and isinstance(old, list):
        if len(new) != len(old):
            return False
        if schema.list_type != "map":
            return False
        olds = correlated_items(schema, new, old)
        return all(o is not UNCORRELATED and deep_equal(n, o, schema.items)
                   for n, o in zip(new, olds, strict=True))
    return False


def correlated_items(schema: Schema, new: list[Any], old: Any) -> list[Any]:
    """The old item of each new item of a ``list-type: map`` list (by its keys)."""
    if schema.list_type != "map" or not isinstance(old, list) or not schema.list_map_keys:
        return [UNCORRELATED] * len(new)
    keys = schema.list_map_keys
    by_key: dict[str, Any] = {}
    for item in old:
        if isinstance(item, dict):
            by_key.setdefault(_map_key(item, keys), item)
    return [by_key.get(_map_key(item, keys), UNCORRELATED) if isinstance(item, dict)
            else UNCORRELATED for item in new]


def _map_key(item: dict[str, Any], keys: Sequence[str]) -> str:
    return repr([item.get(k) for k in keys])


# ----------------------------------------------------------------------------- translation


def _translate(error: _Error, prefix: str) -> FieldError:
    name = error.name.lstrip(".") if error.name not in ("", ".") else ""
    where = ".".join(p for p in (prefix, name) if p)
    if error.code == "Composite":
        return fe.invalid(prefix or "<nil>", "", error.message)
    if error.code == "Required":
        return fe.required(where)
    if error.code == "Enum":
        supported = [v if isinstance(v, str) else _json(v) for v in error.values]
        return fe.not_supported(where, error.value, supported)
    if error.code == "TooLong":
        return fe.too_long(where, int(error.valid))
    if error.code in ("MaxItems", "TooManyProperties"):
        return fe.too_many(where, int(error.value), int(error.valid))
    if error.code == "InvalidType":
        return fe.type_invalid(where, error.value if error.value is not None else "",
                               error.message)
    return fe.invalid(where, error.value if error.value is not None else "", error.message)


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
