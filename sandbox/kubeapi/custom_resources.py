"""Custom resources written to the sandbox API are decoded and validated as kube-apiserver
decodes and validates them, against the pinned CRDs (:mod:`sandbox.kubeapi.crd_schema`).

One entry point for the write path, :func:`admit`, called by the object store for every
create and update of a kind with a CRD (HTTP requests and the simulated controllers'
writes alike, as a real Kueue or JobSet controller writes through the API server):

1. decode (:mod:`~sandbox.kubeapi.crd_decode`): prune undeclared fields, drop non-nullable
   nulls, apply the schema's defaults;
2. validate (:func:`validate_custom_resource`), following the customresource strategies
   of k8s.io/apiextensions-apiserver v0.32.0 (pkg/registry/customresource/strategy.go,
   status_strategy.go, validator.go): ``kind``/``apiVersion``; the OpenAPI schema
   (:mod:`~sandbox.kubeapi.crd_openapi`), ratcheted on update of the main resource and
   only ``status`` on a status update; embedded resources; set/map list invariants
   (:mod:`~sandbox.kubeapi.crd_lists`, not held against an update when the old object
   already broke them); then the CEL rules (:mod:`~sandbox.kubeapi.crd_rules`) — unless an
   earlier error is a type, required, enum, too-long or too-many one, in which case the
   rules are skipped with kube-apiserver's "some validation rules were not checked"
   error;
3. any error: a 422 ``Invalid`` Status (:func:`~sandbox.kubeapi.field_errors.invalid_error`)
   listing them all.

In the real server mutating admission webhooks run between decoding and validation, and
validating webhooks after validation: the store calls :func:`decode_resource` before the
mutating webhooks (:mod:`sandbox.kubeapi.admission`) and :func:`admit` (decoding again
what they added, then validating) before the validating ones.

Not simulated: the ObjectMeta checks beyond the store's (name, labels) — annotation
sizes, finalizer names, owner references — and the metadata of embedded resources;
the CEL cost budget; a warning for unknown fields a JSON patch adds (they are pruned
silently); defaults applied on read to objects restored from a state file written
before them.

Cost, measured with ``python -m tests.bench.crd_validation`` (2-core machine, median per
object): a JobSet as submit_job renders it 0.5 ms on create, 0.3 ms on a spec or status
update; the Workload the Kueue stand-in makes for it 1 ms on create, 2 ms on the status
update that admits it (its root CEL rules read the whole object, old and new); a
ClusterQueue 0.55 ms; loading the seven CRDs once 0.3 s.
"""

from __future__ import annotations

from sandbox.kubeapi import crd_schema
from sandbox.kubeapi import field_errors as fe
from sandbox.kubeapi.crd_decode import decode
from sandbox.kubeapi.crd_lists import validate_embedded, validate_list_types
from sandbox.kubeapi.crd_openapi import UNCORRELATED, validate_value
from sandbox.kubeapi.crd_rules import validate_rules
from sandbox.kubeapi.crd_schema import Crd, CrdVersion
from sandbox.kubeapi.errors import JsonObject
from sandbox.kubeapi.field_errors import FieldError

__all__ = [
    "admit",
    "decode_custom_resource",
    "decode_resource",
    "served_version",
    "validate_custom_resource",
]

_BLOCKING = frozenset({"FieldValueNotSupported", "FieldValueRequired", "FieldValueTooLong",
                       "FieldValueTooMany", "FieldValueTypeInvalid"})


def served_version(crd: Crd, obj: JsonObject) -> CrdVersion | None:
    """The version of ``crd`` an object is written in: its ``apiVersion``'s, else (an
    in-process write that names none) the storage version."""
    api_version = obj.get("apiVersion")
    if isinstance(api_version, str) and api_version.startswith(f"{crd.group}/"):
        return crd.versions.get(api_version.rpartition("/")[2])
    return next((v for v in crd.versions.values() if v.storage), None)


def decode_custom_resource(group: str, version: str, kind: str, obj: JsonObject) -> list[str]:
    """Prune, prune nulls and default ``obj`` in place as the decoder does; the paths of
    the fields pruned (what ``fieldValidation`` reports). No-op without a schema."""
    served = crd_schema.version_schema(group, version, kind)
    return decode(obj, served.schema) if served is not None else []


def validate_custom_resource(
    group: str,
    version: str,
    kind: str,
    obj: JsonObject,
    old: JsonObject | None = None,
    *,
    subresource: str = "",
) -> list[FieldError]:
    """The field errors kube-apiserver finds in a (decoded) custom resource: on create
    (``old`` None), on update of the main resource, or on update of ``status``."""
    served = crd_schema.version_schema(group, version, kind)
    if served is None:
        return []
    errors = _type_meta(obj, group, version, kind)
    if errors:
        return errors
    schema = served.schema
    if subresource == "status":
        status_schema = (schema.properties or {}).get("status")
        if status_schema is not None and "status" in obj:
            errors += validate_value(status_schema, obj["status"], "status")
        lists = validate_list_types(schema, obj)
        if lists and (old is None or not validate_list_types(schema, old)):
            errors += lists
        ratchet = False
    elif old is None:
        errors += validate_value(schema, obj)
        errors += validate_embedded(schema, obj)
        errors += validate_list_types(schema, obj)
        ratchet = False
    else:
        errors += validate_value(schema, obj, old=old)
        errors += validate_embedded(schema, obj)
        if not validate_list_types(schema, old):
            errors += validate_list_types(schema, obj)
        ratchet = True
    if any(error.type in _BLOCKING for error in errors):
        errors.append(fe.invalid("<nil>", None, "some validation rules were not checked "
                                 "because the object was invalid; correct the existing "
                                 "errors to complete validation"))
        return errors
    errors += validate_rules(schema, obj, old if old is not None else UNCORRELATED,
                             ratchet=ratchet)
    return errors


def decode_resource(group: str, resource: str, obj: JsonObject) -> None:
    """Decode (prune, default) a write of a custom resource in place, as the request's
    decoder does before mutating admission webhooks see it; others are left alone."""
    crd = crd_schema.crd_for_resource(group, resource)
    served = served_version(crd, obj) if crd is not None else None
    if served is not None:
        decode(obj, served.schema)


def admit(group: str, resource: str, obj: JsonObject, old: JsonObject | None,
          subresource: str = "") -> JsonObject:
    """Decode and validate a write of a custom resource the sandbox has a CRD for (others
    pass through unchanged); the object to store, or a 422 ApiError."""
    crd = crd_schema.crd_for_resource(group, resource)
    if crd is None:
        return obj
    served = served_version(crd, obj)
    if served is None:
        return obj
    decode(obj, served.schema)
    errors = validate_custom_resource(group, served.name, crd.kind, obj, old,
                                      subresource=subresource)
    if errors:
        name = str((obj.get("metadata") or {}).get("name") or "")
        raise fe.invalid_error(group, crd.kind, name, errors)
    return obj


def _type_meta(obj: JsonObject, group: str, version: str, kind: str) -> list[FieldError]:
    errors = []
    got_kind = obj.get("kind")
    if got_kind is not None and got_kind != kind:
        errors.append(fe.invalid("kind", got_kind, f"must be {kind}"))
    got_version = obj.get("apiVersion")
    if got_version is not None and got_version != f"{group}/{version}":
        errors.append(fe.invalid("apiVersion", got_version, f"must be {group}/{version}"))
    return errors
