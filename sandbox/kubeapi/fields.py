"""Unknown fields in request bodies, found as kube-apiserver's decoders find them.

The real API knows every field of its built-in kinds (Go structs) and of custom
resources (CRD structural schemas). Depending on ``?fieldValidation=`` an
unknown field is refused (``Strict``: 400 ``strict decoding error: unknown
field "spec.foo"``), dropped with a ``Warning`` header (``Warn``, the default)
or dropped silently (``Ignore``); server-side apply refuses it whatever the
directive (``.spec.foo: field not declared in schema``).

Schemas come from two places:

* built-in kinds: the ``kubernetes`` client's generated models (``openapi_types``
  and ``attribute_map``), which are generated from kube-apiserver's own OpenAPI;
* custom resources with a CRD in :mod:`sandbox.kubeapi.crd_schema` (JobSet, Kueue's
  kinds, PodMonitoring): the pruning algorithm of their structural schema
  (:mod:`sandbox.kubeapi.crd_decode`), with their ``metadata`` decoded as the built-in
  ObjectMeta, as the custom resource decoder does.

Value types, enums, required fields and CEL rules of custom resources are validated on
write (:mod:`sandbox.kubeapi.custom_resources`); of built-in kinds, only unknown
fields are. Resources of other groups are not checked at all.
"""

from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass, field
from typing import Any

from sandbox.kubeapi import crd_decode, crd_schema, resources
from sandbox.kubeapi.errors import ApiError, JsonObject

_PRIMITIVES = frozenset({"str", "int", "float", "bool", "datetime", "date", "bytes", "object"})
_LIST = re.compile(r"^List\[(.+)\]$")
_DICT = re.compile(r"^Dict\[str, (.+)\]$")
_CRD = "crd"  # root_type of a custom resource with a CRD schema

@dataclass
class FieldReport:
    """A body with unknown fields removed, and the paths of what was removed."""

    pruned: Any
    unknown: list[str] = field(default_factory=list)


def root_type(group: str, version: str, kind: str) -> str | None:
    """The built-in model name for objects of this kind, ``"crd"`` for a custom resource
    with a CRD schema, None when the sandbox has neither."""
    if crd_schema.version_schema(group, version, kind) is not None:
        return _CRD
    if not resources.is_builtin(group):
        return None
    version_word = version[:1].upper() + version[1:]
    group_word = "Core" if not group else group.split(".", 1)[0].capitalize()
    for candidate in (f"{group_word}{version_word}{kind}", f"{version_word}{kind}"):
        if _fields(candidate) is not None:
            return candidate
    return None


def load_models() -> None:
    """Import the generated models and compile the CRDs now, on the calling thread
    (~0.4 s and ~0.9 s, once).

    A server calls this before it accepts requests. Left to the first request
    thread that checks a body, the import can race another thread of the process
    importing a library with the same dependencies (the cluster process imports
    google-cloud-pubsub as it starts; both pull in ``requests``), and one of the two
    then fails on a partially initialised module: the cluster crashed that way.
    """
    import kubernetes.client.models  # noqa: F401

    crd_schema.load()


@functools.cache
def _fields(type_name: str) -> dict[str, str] | None:
    """JSON field name -> type expression of a schema type, None when unknown."""
    # Imported by load_models before the server starts; here it is a lookup.
    from kubernetes.client import models

    model = getattr(models, type_name, None)
    types = getattr(model, "openapi_types", None)
    names = getattr(model, "attribute_map", None)
    if not isinstance(types, dict) or not isinstance(names, dict):
        return None
    return {str(names[attr]): str(expr) for attr, expr in types.items()}


def check(type_name: str, body: Any, crd: tuple[str, str, str] | None = None, *,
          by_keys: bool = False) -> FieldReport:
    """Walk ``body`` against the built-in schema ``type_name``, or the CRD schema of
    ``crd`` = (group, version, kind); never modifies ``body``. ``by_keys``: name items of
    a CRD's set and map lists by their keys, as server-side apply does."""
    report = FieldReport(pruned=None)
    if crd is not None:
        served = crd_schema.version_schema(*crd)
        if served is not None and isinstance(body, dict):
            pruned = copy.deepcopy(body)
            unknown = crd_decode.prune(pruned, served.schema, root=True, by_keys=by_keys)
            if "metadata" in body:
                pruned["metadata"] = _walk("V1ObjectMeta", body["metadata"], "metadata",
                                           report.unknown)
            report.unknown.extend(unknown)
            report.pruned = pruned
            return report
    report.pruned = _walk(type_name, body, "", report.unknown)
    return report


def _check_kind(group: str, version: str, kind: str, body: Any, *,
                by_keys: bool = False) -> FieldReport | None:
    schema = root_type(group, version, kind)
    if schema is None:
        return None
    return check(schema, body, (group, version, kind) if schema == _CRD else None,
                 by_keys=by_keys)


def directive(value: str | None) -> str:
    """The ``fieldValidation`` directive of a request; the real API's default is Warn."""
    value = value or "Warn"
    if value not in ("Ignore", "Warn", "Strict"):
        raise ApiError.bad_request(
            f'fieldValidation parameter unsupported: {value} (must be one of "Ignore", '
            '"Warn", "Strict")'
        )
    return value


def checked_write(
    group: str, version: str, kind: str, body: JsonObject, validation: str | None
) -> tuple[JsonObject, dict[str, str]]:
    """A create, update or merge-patch body without its unknown fields, and the Warning
    header naming them; 400 ApiError under ``Strict``, worded like the real decoders."""
    wanted = directive(validation)
    report = _check_kind(group, version, kind, body) or FieldReport(body)
    if not report.unknown:
        return body, {}
    if wanted == "Strict":
        problems = ", ".join(f'unknown field "{path}"' for path in report.unknown)
        prefix = (
            f'{kind} in version "{version}" cannot be handled as a {kind}: '
            if resources.is_builtin(group)
            else ""
        )
        raise ApiError.bad_request(f"{prefix}strict decoding error: {problems}")
    headers = {}
    if wanted == "Warn":
        headers["Warning"] = ", ".join(
            f'299 - "unknown field \\"{path}\\""' for path in report.unknown
        )
    return report.pruned, headers


def check_applied(group: str, version: str, kind: str, body: JsonObject, where: str) -> None:
    """Server-side apply refuses unknown fields whatever the directive: a 500 whose message
    is the one kube-apiserver's field manager gives (``where`` is ``namespace/name``)."""
    report = _check_kind(group, version, kind, body, by_keys=True)
    unknown = report.unknown if report is not None else []
    if not unknown:
        return
    errors = [f".{path}: field not declared in schema" for path in unknown]
    detail = errors[0] if len(errors) == 1 else "errors:\n  " + "\n  ".join(errors)
    raise ApiError(
        500,
        "",
        f"failed to create typed patch object ({where}; {group}/{version}, Kind={kind}): "
        f"{detail}",
    )


def _walk(expr: str, value: Any, path: str, unknown: list[str]) -> Any:
    if expr in _PRIMITIVES or value is None:
        return value
    match = _LIST.match(expr)
    if match:
        if not isinstance(value, list):
            return value
        return [_walk(match[1], item, f"{path}[{i}]", unknown) for i, item in enumerate(value)]
    match = _DICT.match(expr)
    if match:
        if not isinstance(value, dict):
            return value
        return {
            key: _walk(match[1], item, _join(path, str(key)), unknown)
            for key, item in value.items()
        }
    fields = _fields(expr)
    if fields is None or not isinstance(value, dict):
        return value
    kept: dict[str, Any] = {}
    for key, item in value.items():
        if key in fields:
            kept[key] = _walk(fields[key], item, _join(path, key), unknown)
        elif isinstance(key, str) and key.startswith("$"):
            kept[key] = item  # strategic-merge directives are not fields
        else:
            unknown.append(_join(path, str(key)))
    return kept


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
