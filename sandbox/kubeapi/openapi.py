"""OpenAPI v3 documents, just enough for kubectl's field validation to go server-side.

``kubectl apply`` (default ``--validate=strict``) first reads ``/openapi/v3`` and
the group version's document to see whether the server's PATCH operation for
the kind takes the ``fieldValidation`` query parameter. If it does, kubectl
sends ``fieldValidation=Strict`` and leaves unknown-field checks to the server
(:mod:`sandbox.kubeapi.fields`); if not, it validates client-side against
OpenAPI v2 in protobuf. So the documents list each resource's paths and operations
with ``x-kubernetes-group-version-kind`` and the query parameters, but no schemas:
``kubectl explain`` is not supported.

``/openapi/v2`` is a document without definitions (protobuf, or JSON when asked
for): kubectl falls back to it for a kind no group-version document has — a custom
resource whose CRD is not installed — finds no schema for it, skips client-side
validation as it does for any unknown kind, and then reports what a real cluster
makes it report: ``no matches for kind "ClusterQueue" in version
"kueue.x-k8s.io/v1beta1"`` / ``ensure CRDs are installed first``.
"""

from __future__ import annotations

import hashlib
import json

from sandbox.kubeapi.discovery import ApiResource, Discovery
from sandbox.kubeapi.errors import ApiError, JsonObject

_QUERY_PARAMETERS = ("dryRun", "fieldManager", "fieldValidation", "force", "pretty")


def _prefix(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _parameter(name: str) -> JsonObject:
    return {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}


def _operation(group: str, version: str, row: ApiResource, verb: str) -> JsonObject:
    return {
        "operationId": f"{verb}{row.kind}",
        "x-kubernetes-action": verb,
        "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": row.kind},
        "parameters": [_parameter(name) for name in _QUERY_PARAMETERS],
        "responses": {"200": {"description": "OK"}},
    }


def group_version_document(discovery: Discovery, group: str, version: str) -> JsonObject:
    """The OpenAPI v3 document of one group version: paths and operations, no schemas."""
    paths: dict[str, JsonObject] = {}
    for row in discovery.resources_of(group, version):
        base = "/" + _prefix(group, version)
        if row.namespaced:
            base += "/namespaces/{namespace}"
        collection = f"{base}/{row.name}"
        paths[collection] = {"post": _operation(group, version, row, "post")}
        if "get" in row.verbs:
            paths[collection]["get"] = _operation(group, version, row, "list")
            paths[f"{collection}/{{name}}"] = {
                "get": _operation(group, version, row, "get"),
                "put": _operation(group, version, row, "put"),
                "patch": _operation(group, version, row, "patch"),
                "delete": _operation(group, version, row, "delete"),
            }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": discovery.git_version},
        "paths": paths,
        "components": {"schemas": {}},
    }


def _served(discovery: Discovery) -> list[tuple[str, str]]:
    served = [("", "v1")]
    for group, versions in sorted(discovery.group_versions().items()):
        served += [(group, version) for version in sorted(versions)]
    return served


def index_document(discovery: Discovery) -> JsonObject:
    """``/openapi/v3``: where each group version's document is, with a content hash."""
    paths: dict[str, JsonObject] = {}
    for group, version in _served(discovery):
        document = group_version_document(discovery, group, version)
        digest = hashlib.sha512(json.dumps(document, sort_keys=True).encode()).hexdigest()
        prefix = _prefix(group, version)
        paths[prefix] = {"serverRelativeURL": f"/openapi/v3/{prefix}?hash={digest.upper()}"}
    return {"paths": paths}


V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (the lengths here stay below 128)."""
    return bytes([number << 3 | 2, len(payload)]) + payload


def v2_document(git_version: str, accept: str | None) -> tuple[JsonObject | bytes, str]:
    """``/openapi/v2``: swagger 2.0 with no paths or definitions, as protobuf
    (``openapi_v2.Document``: swagger = 1, info = 2 {title = 1, version = 3}) unless
    only JSON is acceptable. Returns (body, content type)."""
    if "protobuf" in (accept or ""):
        info = _field(1, b"Kubernetes") + _field(3, git_version.encode())
        return _field(1, b"2.0") + _field(2, info), V2_PROTOBUF
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": git_version},
            "paths": {}, "definitions": {}}, "application/json"


def document_for(discovery: Discovery, segments: list[str]) -> JsonObject:
    """The document at ``/openapi/v3/<segments>``; 404 for an unknown group version."""
    if segments == []:
        return index_document(discovery)
    if segments[0] == "api" and segments[1:] == ["v1"]:
        return group_version_document(discovery, "", "v1")
    if segments[0] == "apis" and len(segments) == 3:
        group, version = segments[1], segments[2]
        if version in discovery.group_versions().get(group, set()):
            return group_version_document(discovery, group, version)
    raise ApiError.path_not_found()
