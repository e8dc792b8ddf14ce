"""Kubernetes REST paths and verbs mapped onto the object store.

This is the part of kube-apiserver the official client relies on: URL layout
(``/api/v1/...`` for the core group, ``/apis/{group}/{version}/...`` for any
other group, cluster-scoped and ``/namespaces/{ns}/...`` paths, the
``/status`` subresource), verbs and their status codes (201 on create and on
apply-create, 200 otherwise), list bodies, delete replies, discovery
(:mod:`~sandbox.kubeapi.discovery`), OpenAPI v3 stubs (:mod:`~sandbox.kubeapi.openapi`),
unknown-field handling per ``fieldValidation`` (:mod:`~sandbox.kubeapi.fields`), a
custom resource's create dropping its ``status`` when its CRD has the status subresource
(the object store then decodes and validates it: :mod:`~sandbox.kubeapi.custom_resources`)
and access reviews (:mod:`~sandbox.kubeapi.reviews`). It is free of sockets so it can be
reasoned about (and tested) on its own; :mod:`sandbox.kubeapi.server` does the HTTP
plumbing and the access checks (:mod:`~sandbox.kubeapi.access`) around it.

Not supported, answered with a clear 400 rather than silently misbehaving:
``watch=true`` and ``dryRun``. Subresources other than ``status`` and pods' ``log``
(:mod:`~sandbox.kubeapi.podlogs`, plain text) — ``scale``, ``binding``, ``eviction``,
namespace ``finalize`` — are 404.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote

import yaml

from sandbox.kubeapi import crd_schema, fields, openapi, resources, reviews
from sandbox.kubeapi.authn import ANONYMOUS, UserInfo
from sandbox.kubeapi.discovery import AGGREGATED_MEDIA_TYPE, Discovery, wants_aggregated
from sandbox.kubeapi.errors import ApiError, JsonObject, success_status
from sandbox.kubeapi.patch import PatchType, decode_patch_body, patch_type_for
from sandbox.kubeapi.podlogs import read_pod_log
from sandbox.kubeapi.rbac import Decision
from sandbox.kubeapi.selectors import SelectorError, parse_field_selector
from sandbox.kubeapi.store import ObjectStore, Subresource

DEFAULT_GIT_VERSION = "v1.31.0"


@dataclass
class Request:
    """One HTTP request, already read off the socket."""

    method: str
    path: str
    query: Mapping[str, list[str]]
    content_type: str | None = None
    body: bytes = b""
    headers: Mapping[str, list[str]] = field(default_factory=dict)  # lower-case names
    user: UserInfo = ANONYMOUS  # set by the server once the caller is authenticated

    def header(self, name: str) -> str | None:
        values = self.headers.get(name.lower())
        return values[-1] if values else None

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else None

    def flag(self, name: str) -> bool:
        return (self.param(name) or "").lower() in ("true", "1")


@dataclass
class Response:
    """What to send back: status code, JSON (or text) body, extra headers."""

    code: int
    body: JsonObject | str
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str | None = None  # default: JSON for objects, text for strings


@dataclass(frozen=True)
class Target:
    """The resource a request addresses."""

    group: str
    version: str
    resource: str
    namespace: str | None
    name: str | None
    subresource: Subresource

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def store_namespace(self) -> str:
        return self.namespace or ""


class ApiRouter:
    """Turns a :class:`Request` into a :class:`Response` using an :class:`ObjectStore`."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        git_version: str = DEFAULT_GIT_VERSION,
        server_address: Callable[[], str] = lambda: "127.0.0.1",
        authorize: reviews.Authorize = lambda user, attributes: Decision(True),
        list_rules: reviews.ListRules = lambda user, namespace: (),
    ) -> None:
        self.store = store
        self.git_version = git_version
        self.discovery = Discovery(store, git_version=git_version, server_address=server_address)
        self._authorize = authorize
        self._list_rules = list_rules

    # ------------------------------------------------------------------ entry

    def handle(self, request: Request) -> Response:
        """Serve one request; ApiError is raised for the caller to render as a Status."""
        segments = [unquote(s) for s in request.path.strip("/").split("/") if s]
        if request.path in ("/healthz", "/livez", "/readyz"):
            return Response(200, "ok")
        if segments == ["version"]:
            self._only(request, "GET")
            return Response(200, self.discovery.version())
        if segments[:2] == ["openapi", "v3"]:
            self._only(request, "GET")
            return Response(200, openapi.document_for(self.discovery, segments[2:]))
        if not segments or segments[0] not in ("api", "apis"):
            raise ApiError.path_not_found()
        if len(segments) == 1:
            self._only(request, "GET")
            core = segments[0] == "api"
            if wants_aggregated(request.header("Accept")):
                body = self.discovery.aggregated(core=core)
                return Response(200, body, content_type=AGGREGATED_MEDIA_TYPE)
            return Response(
                200, self.discovery.api_versions() if core else self.discovery.group_list()
            )
        if segments[0] == "api":
            return self._resource_request(request, "", segments[1], segments[2:])
        if len(segments) == 2:
            self._only(request, "GET")
            return Response(200, self.discovery.group(segments[1]))
        return self._resource_request(request, segments[1], segments[2], segments[3:])

    # ------------------------------------------------------------------ routing

    @staticmethod
    def _only(request: Request, *methods: str) -> None:
        if request.method not in methods:
            raise ApiError(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            )

    def _resource_request(
        self, request: Request, group: str, version: str, rest: list[str]
    ) -> Response:
        if group == "" and version != "v1":
            raise ApiError.path_not_found()
        if not rest:
            self._only(request, "GET")
            return Response(200, self.discovery.resource_list(group, version))
        if group == "" and len(rest) == 5 and rest[0] == "namespaces" and rest[2] == "pods" \
                and rest[4] == "log":
            self._only(request, "GET")
            return self._pod_log(request, rest[1], rest[3])
        target = self._target(group, version, rest)
        info = resources.known(group, target.resource)
        if info is not None and not info.stored:
            return self._review(request, target)
        if request.param("dryRun"):
            raise ApiError.bad_request("dryRun is not supported by the sandbox Kubernetes API")
        handlers: dict[str, Callable[[Request, Target], Response]]
        if target.name is None:
            handlers = {"GET": self._list, "POST": self._create, "DELETE": self._delete_collection}
        else:
            handlers = {"GET": self._read, "PUT": self._replace, "PATCH": self._patch}
            if not target.subresource:
                handlers["DELETE"] = self._delete
        handler = handlers.get(request.method)
        if handler is None:
            self._only(request, *handlers)
            raise AssertionError("unreachable")
        return handler(request, target)

    def _target(self, group: str, version: str, rest: list[str]) -> Target:
        namespace: str | None = None
        if (
            rest[0] == "namespaces"
            and group == ""
            and (len(rest) <= 2 or (len(rest) == 3 and rest[2] in ("status", "finalize")))
        ):
            resource, tail = "namespaces", rest[1:]
        elif rest[0] == "namespaces" and len(rest) >= 3:
            namespace, resource, tail = rest[1], rest[2], rest[3:]
        else:
            resource, tail = rest[0], rest[1:]
        if len(tail) > 2 or (resource == "namespaces" and group != ""):
            raise ApiError.path_not_found()
        name = tail[0] if tail else None
        subresource = tail[1] if len(tail) == 2 else ""
        if subresource not in ("", "status"):
            raise ApiError.path_not_found()
        scope = resources.is_namespaced(group, resource)
        if scope is False and namespace is not None:
            raise ApiError.path_not_found()
        if scope is True and namespace is None and name is not None:
            raise ApiError.path_not_found()
        return Target(group, version, resource, namespace, name, "status" if subresource else "")

    # ------------------------------------------------------------------ helpers

    def _present(self, obj: JsonObject, target: Target) -> JsonObject:
        if not obj.get("apiVersion"):
            obj["apiVersion"] = target.api_version
        if not obj.get("kind"):
            obj["kind"] = self.store.kind_of(target.group, target.resource)
        return obj

    def _read(self, request: Request, target: Target) -> Response:
        assert target.name is not None
        obj = self.store.get(target.group, target.resource, target.name, target.store_namespace)
        return Response(200, self._present(obj, target))

    def _pod_log(self, request: Request, namespace: str, name: str) -> Response:
        pod = self.store.get("", "pods", name, namespace)
        params = {key: request.param(key) for key in
                  ("container", "tailLines", "previous", "timestamps", "limitBytes")}
        return Response(200, read_pod_log(self.store.pod_logs, pod, params),
                        content_type="text/plain")

    def _body_object(self, request: Request, target: Target) -> JsonObject:
        text = request.body.decode("utf-8", errors="replace")
        if not text.strip():
            raise ApiError.bad_request("the request body is empty")
        try:
            if "yaml" in (request.content_type or ""):
                body = yaml.safe_load(text)
            else:
                body = json.loads(text)
        except (json.JSONDecodeError, yaml.YAMLError) as exc:
            raise ApiError.bad_request(f"error decoding request body: {exc}") from exc
        if not isinstance(body, dict):
            raise ApiError.bad_request("the request body must be an object")
        meta = body.get("metadata")
        if meta is None:
            body["metadata"] = meta = {}
        if not isinstance(meta, dict):
            raise ApiError.bad_request("metadata must be an object")
        if (
            target.namespace is None
            and resources.is_namespaced(target.group, target.resource) is not True
        ):
            meta.pop("namespace", None)  # cluster-scoped: a namespace in the body is ignored
        if target.namespace is not None and meta.get("namespace") not in (
            None,
            "",
            target.namespace,
        ):
            raise ApiError.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        return self._present(body, target)

    def _check_body_name(self, body: JsonObject, target: Target) -> None:
        meta = body["metadata"]
        if not meta.get("name"):
            meta["name"] = target.name
        elif meta["name"] != target.name:
            raise ApiError.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({target.name})"
            )

    # ------------------------------------------------------------------ verbs

    def _list(self, request: Request, target: Target) -> Response:
        if request.flag("watch"):
            raise ApiError.bad_request(
                "watch is not supported by the sandbox Kubernetes API; poll with list instead"
            )
        try:
            fields = parse_field_selector(request.param("fieldSelector"))
            fields.require_supported(
                resources.supported_field_labels(target.group, target.resource)
            )
        except SelectorError as exc:
            raise ApiError.bad_request(str(exc)) from exc
        items, rv = self.store.list_with_version(
            target.group,
            target.resource,
            target.namespace,
            label_selector=request.param("labelSelector"),
            field_selector=fields,
        )
        metadata: JsonObject = {"resourceVersion": rv}
        items = self._paginate(request, items, metadata)
        return Response(
            200,
            {
                "kind": f"{self.store.kind_of(target.group, target.resource)}List",
                "apiVersion": target.api_version,
                "metadata": metadata,
                "items": [self._present(item, target) for item in items],
            },
        )

    @staticmethod
    def _paginate(
        request: Request, items: list[JsonObject], metadata: JsonObject
    ) -> list[JsonObject]:
        def key(obj: JsonObject) -> list[str]:
            meta = obj.get("metadata", {})
            return [meta.get("namespace", ""), meta.get("name", "")]

        token = request.param("continue")
        if token:
            try:
                after = json.loads(base64.urlsafe_b64decode(token.encode()))
            except (ValueError, binascii.Error) as exc:
                raise ApiError.bad_request(f"invalid continue token {token!r}") from exc
            items = [obj for obj in items if key(obj) > after]
        limit_text = request.param("limit")
        limit = int(limit_text) if limit_text and limit_text.isdigit() else 0
        if limit and len(items) > limit:
            remaining = len(items) - limit
            items = items[:limit]
            metadata["continue"] = base64.urlsafe_b64encode(
                json.dumps(key(items[-1])).encode()
            ).decode()
            metadata["remainingItemCount"] = remaining
        return items

    def _create(self, request: Request, target: Target) -> Response:
        if target.namespace is None and resources.is_namespaced(target.group, target.resource):
            raise ApiError.path_not_found()
        body, warnings = self._checked(request, target, self._body_object(request, target))
        crd = crd_schema.crd_for_resource(target.group, target.resource)
        served = crd.versions.get(target.version) if crd is not None else None
        if served is not None and served.status_subresource:
            body.pop("status", None)  # a custom resource's create cannot set its status
        created = self.store.create(target.group, target.resource, body, namespace=target.namespace)
        return Response(201, self._present(created, target), warnings)

    def _replace(self, request: Request, target: Target) -> Response:
        body, warnings = self._checked(request, target, self._body_object(request, target))
        self._check_body_name(body, target)
        if target.subresource == "status":
            obj = self.store.update_status(
                target.group, target.resource, body, namespace=target.store_namespace
            )
        else:
            obj = self.store.replace(
                target.group, target.resource, body, namespace=target.store_namespace
            )
        return Response(200, self._present(obj, target), warnings)

    def _patch(self, request: Request, target: Target) -> Response:
        assert target.name is not None
        patch_type = patch_type_for(request.content_type)
        if not request.body.strip():
            raise ApiError.bad_request("the patch body is empty")
        body = decode_patch_body(patch_type, request.body)
        if patch_type is PatchType.APPLY:
            manager = request.param("fieldManager")
            if not manager:
                raise ApiError.bad_request(
                    "PATCH, application/apply-patch+yaml requests must specify a fieldManager"
                )
            if isinstance(body, dict):
                meta = body.get("metadata")
                if (
                    isinstance(meta, dict)
                    and target.namespace is not None
                    and meta.get("namespace") not in (None, "", target.namespace)
                ):
                    raise ApiError.bad_request(
                        "the namespace of the provided object does not match the namespace "
                        "sent on the request"
                    )
            self._check_applied(request, target, body)
            obj, created = self.store.apply(
                target.group,
                target.resource,
                target.name,
                body,
                namespace=target.store_namespace,
                field_manager=manager,
                subresource=target.subresource,
            )
            return Response(201 if created else 200, self._present(obj, target))
        warnings: dict[str, str] = {}
        if patch_type is not PatchType.JSON and isinstance(body, dict):
            # A merge or strategic patch is a partial object: its fields are checked as one.
            body, warnings = self._checked(request, target, body)
        obj = self.store.patch(
            target.group,
            target.resource,
            target.name,
            body,
            namespace=target.store_namespace,
            patch_type=patch_type,
            subresource=target.subresource,
        )
        return Response(200, self._present(obj, target), warnings)

    @staticmethod
    def _delete_options(request: Request) -> JsonObject:
        if not request.body.strip():
            return {}
        try:
            options = json.loads(request.body)
        except json.JSONDecodeError as exc:
            raise ApiError.bad_request(f"error decoding DeleteOptions: {exc}") from exc
        if not isinstance(options, dict):
            raise ApiError.bad_request("DeleteOptions must be an object")
        policy = options.get("propagationPolicy") or request.param("propagationPolicy")
        if policy not in (None, "Orphan", "Background", "Foreground"):
            raise ApiError.bad_request(f"unknown propagationPolicy {policy!r}")
        return options

    def _delete(self, request: Request, target: Target) -> Response:
        assert target.name is not None
        options = self._delete_options(request)
        result = self.store.delete(
            target.group,
            target.resource,
            target.name,
            target.store_namespace,
            preconditions=options.get("preconditions"),
        )
        if result.finalizing or resources.returns_deleted_object(target.group, target.resource):
            return Response(200, self._present(result.object, target))
        return Response(
            200,
            success_status(
                target.group,
                target.resource,
                target.name,
                str(result.object.get("metadata", {}).get("uid", "")),
            ),
        )

    def _delete_collection(self, request: Request, target: Target) -> Response:
        self._delete_options(request)
        listed = self._list(request, target)
        assert isinstance(listed.body, dict)
        deleted: list[JsonObject] = []
        for item in listed.body["items"]:
            meta = item["metadata"]
            try:
                result = self.store.delete(
                    target.group, target.resource, meta["name"], meta.get("namespace", "")
                )
            except ApiError as exc:
                if exc.code == 404:
                    continue
                raise
            deleted.append(self._present(result.object, target))
        listed.body["items"] = deleted
        listed.body["metadata"] = {"resourceVersion": self.store.resource_version}
        return listed

    # ------------------------------------------------------------------ reviews

    def _review(self, request: Request, target: Target) -> Response:
        self._only(request, "POST")
        if target.name is not None:
            raise ApiError.path_not_found()
        body = self._body_object(request, target)
        reply = reviews.answer(
            target.resource,
            body,
            requester=request.user,
            namespace=target.namespace,
            authorize=self._authorize,
            list_rules=self._list_rules,
        )
        return Response(201, reply)

    # ------------------------------------------------------------------ unknown fields

    def _checked(
        self, request: Request, target: Target, body: JsonObject
    ) -> tuple[JsonObject, dict[str, str]]:
        """``body`` without unknown fields and the Warning header naming them (400 under
        ``fieldValidation=Strict``)."""
        version, kind = self._version_kind(body, target)
        return fields.checked_write(
            target.group, version, kind, body, request.param("fieldValidation")
        )

    def _check_applied(self, request: Request, target: Target, body: Any) -> None:
        fields.directive(request.param("fieldValidation"))
        if isinstance(body, dict):
            version, kind = self._version_kind(body, target)
            fields.check_applied(
                target.group, version, kind, body, f"{target.store_namespace}/{target.name}"
            )

    def _version_kind(self, body: JsonObject, target: Target) -> tuple[str, str]:
        api_version = str(body.get("apiVersion") or target.api_version)
        kind = str(body.get("kind") or self.store.kind_of(target.group, target.resource))
        return api_version.rsplit("/", 1)[-1], kind


def parse_query(raw: str) -> dict[str, list[str]]:
    """Query string to multi-dict, keeping blank values (``?watch=``)."""
    return parse_qs(raw, keep_blank_values=True)
