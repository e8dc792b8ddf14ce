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
* the custom resources this project uses (Kueue ``v1beta1``, JobSet ``v1alpha2``):
  the tables below, transcribed from their CRDs. Where this project never
  writes (``status``, some nested policy blocks) the schema is ``object``: any
  content is accepted there.

Only unknown *fields* are detected: value types, enums, required fields and
CEL rules are not validated. Resources of other groups are not checked at all.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from sandbox.kubeapi import resources
from sandbox.kubeapi.errors import ApiError, JsonObject

_PRIMITIVES = frozenset({"str", "int", "float", "bool", "datetime", "date", "bytes", "object"})
_LIST = re.compile(r"^List\[(.+)\]$")
_DICT = re.compile(r"^Dict\[str, (.+)\]$")

_META = {"apiVersion": "str", "kind": "str", "metadata": "V1ObjectMeta"}

# Custom resource schemas, by type name; "object" is any content.
_CRD_TYPES: dict[str, dict[str, str]] = {
    "JobSet": {**_META, "spec": "JobSetSpec", "status": "object"},
    "JobSetSpec": {
        "replicatedJobs": "List[ReplicatedJob]",
        "network": "JobSetNetwork",
        "successPolicy": "JobSetSuccessPolicy",
        "failurePolicy": "JobSetFailurePolicy",
        "startupPolicy": "JobSetStartupPolicy",
        "suspend": "bool",
        "coordinator": "JobSetCoordinator",
        "managedBy": "str",
        "ttlSecondsAfterFinished": "int",
    },
    "ReplicatedJob": {
        "name": "str",
        "groupName": "str",
        "template": "V1JobTemplateSpec",
        "replicas": "int",
        "dependsOn": "List[JobSetDependsOn]",
    },
    "JobSetDependsOn": {"name": "str", "status": "str"},
    "JobSetNetwork": {
        "enableDNSHostnames": "bool",
        "subdomain": "str",
        "publishNotReadyAddresses": "bool",
    },
    "JobSetSuccessPolicy": {"operator": "str", "targetReplicatedJobs": "List[str]"},
    "JobSetFailurePolicy": {
        "maxRestarts": "int",
        "restartStrategy": "str",
        "rules": "List[object]",
    },
    "JobSetStartupPolicy": {"startupPolicyOrder": "str"},
    "JobSetCoordinator": {"replicatedJob": "str", "jobIndex": "int", "podIndex": "int"},
    "ResourceFlavor": {**_META, "spec": "ResourceFlavorSpec"},
    "ResourceFlavorSpec": {
        "nodeLabels": "Dict[str, str]",
        "nodeTaints": "List[V1Taint]",
        "tolerations": "List[V1Toleration]",
        "topologyName": "str",
    },
    "ClusterQueue": {**_META, "spec": "ClusterQueueSpec", "status": "object"},
    "ClusterQueueSpec": {
        "resourceGroups": "List[ResourceGroup]",
        "cohort": "str",
        "queueingStrategy": "str",
        "namespaceSelector": "V1LabelSelector",
        "flavorFungibility": "object",
        "preemption": "object",
        "admissionChecks": "List[str]",
        "admissionChecksStrategy": "object",
        "stopPolicy": "str",
        "fairSharing": "FairSharing",
        "admissionScope": "object",
    },
    "ResourceGroup": {"coveredResources": "List[str]", "flavors": "List[FlavorQuotas]"},
    "FlavorQuotas": {"name": "str", "resources": "List[ResourceQuota]"},
    "ResourceQuota": {
        "name": "str",
        "nominalQuota": "object",
        "borrowingLimit": "object",
        "lendingLimit": "object",
    },
    "FairSharing": {"weight": "object"},
    "LocalQueue": {**_META, "spec": "LocalQueueSpec", "status": "object"},
    "LocalQueueSpec": {"clusterQueue": "str", "stopPolicy": "str", "fairSharing": "FairSharing"},
    # WorkloadPriorityClass has no spec: value and description sit at the top level.
    "WorkloadPriorityClass": {**_META, "value": "int", "description": "str"},
    "Workload": {**_META, "spec": "WorkloadSpec", "status": "object"},
    "WorkloadSpec": {
        "podSets": "List[PodSet]",
        "queueName": "str",
        "priorityClassName": "str",
        "priority": "int",
        "priorityClassSource": "str",
        "active": "bool",
        "maximumExecutionTimeSeconds": "int",
    },
    "PodSet": {
        "name": "str",
        "template": "V1PodTemplateSpec",
        "count": "int",
        "minCount": "int",
        "topologyRequest": "object",
    },
}

# Group versions whose kinds are tabled above under their own names.
_CRD_GROUP_VERSIONS = frozenset({("jobset.x-k8s.io", "v1alpha2"), ("kueue.x-k8s.io", "v1beta1")})


@dataclass
class FieldReport:
    """A body with unknown fields removed, and the paths of what was removed."""

    pruned: Any
    unknown: list[str] = field(default_factory=list)


def root_type(group: str, version: str, kind: str) -> str | None:
    """The schema name for objects of this kind, or None when the sandbox has none."""
    if (group, version) in _CRD_GROUP_VERSIONS:
        return kind if kind in _CRD_TYPES else None
    if not resources.is_builtin(group):
        return None
    version_word = version[:1].upper() + version[1:]
    group_word = "Core" if not group else group.split(".", 1)[0].capitalize()
    for candidate in (f"{group_word}{version_word}{kind}", f"{version_word}{kind}"):
        if _fields(candidate) is not None:
            return candidate
    return None


def load_models() -> None:
    """Import the generated models now, on the calling thread (~0.4 s, once).

    A server calls this before it accepts requests. Left to the first request
    thread that checks a body, the import can race another thread of the process
    importing a library with the same dependencies (the cluster process imports
    google-cloud-pubsub as it starts; both pull in ``requests``), and one of the two
    then fails on a partially initialised module: the cluster crashed that way.
    """
    import kubernetes.client.models  # noqa: F401


@functools.cache
def _fields(type_name: str) -> dict[str, str] | None:
    """JSON field name -> type expression of a schema type, None when unknown."""
    if type_name in _CRD_TYPES:
        return _CRD_TYPES[type_name]
    # Imported by load_models before the server starts; here it is a lookup.
    from kubernetes.client import models

    model = getattr(models, type_name, None)
    types = getattr(model, "openapi_types", None)
    names = getattr(model, "attribute_map", None)
    if not isinstance(types, dict) or not isinstance(names, dict):
        return None
    return {str(names[attr]): str(expr) for attr, expr in types.items()}


def check(type_name: str, body: Any) -> FieldReport:
    """Walk ``body`` against the schema ``type_name``; never modifies ``body``."""
    report = FieldReport(pruned=None)
    report.pruned = _walk(type_name, body, "", report.unknown)
    return report


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
    schema = root_type(group, version, kind)
    report = check(schema, body) if schema else FieldReport(body)
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
    schema = root_type(group, version, kind)
    unknown = check(schema, body).unknown if schema else []
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
