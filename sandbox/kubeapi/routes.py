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

Custom resources are served only while a CRD defines them
(:mod:`~sandbox.kubeapi.registry`); any other path of a non-built-in group is the
not-found handler's plain-text ``404 page not found``. A CRD written through the API
is checked (its name) and given the status the apiextensions controllers would give
it; deleting one deletes its custom resources.

Writes pass admission (:mod:`~sandbox.kubeapi.admission`): the webhooks of the
stored webhook configurations, called by the store at kube-apiserver's points of a
write. ``dryRun=All`` on create, update, patch, apply and delete runs every step —
decoding, defaulting, admission, validation — and stores nothing; the answer is the
object as it would be.

Collections can be watched (:mod:`~sandbox.kubeapi.watch`). Subresources other than
``status``, pods' ``log`` (:mod:`~sandbox.kubeapi.podlogs`, plain text) and the
``scale`` of Deployments and ReplicaSets (:mod:`~sandbox.kubeapi.scale`) — ``binding``,
``eviction``, namespace ``finalize`` — are 404, a clear error rather than silent
misbehaviour. Services' ``proxy`` is relayed by the server
(:mod:`~sandbox.kubeapi.serviceproxy`): it needs sockets.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote

import yaml

from sandbox.kubeapi import field_errors as fe
from sandbox.kubeapi import fields, openapi, resources, reviews
from sandbox.kubeapi.admission import RequestAdmission, WebhookDispatcher
from sandbox.kubeapi.admission import Target as AdmissionTarget
from sandbox.kubeapi.authn import ANONYMOUS, UserInfo
from sandbox.kubeapi.discovery import AGGREGATED_MEDIA_TYPE, Discovery, wants_aggregated
from sandbox.kubeapi.errors import ApiError, JsonObject, success_status
from sandbox.kubeapi.patch import PatchType, decode_patch_body, patch_type_for
from sandbox.kubeapi.podlogs import read_pod_log
from sandbox.kubeapi.rbac import Decision
from sandbox.kubeapi.registry import CRD_GROUP, CRD_RESOURCE, accepted_status, check_definition
from sandbox.kubeapi.scale import SCALED, read_scale, write_scale
from sandbox.kubeapi.selectors import SelectorError, parse_field_selector, parse_label_selector
from sandbox.kubeapi.store import Admission, ObjectStore, Subresource
from sandbox.kubeapi.watch import WatchHub, WatchRequest, timeout_of

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
    body: JsonObject | str | bytes | Iterator[bytes]  # an iterator: a chunked stream
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
        self.webhooks = WebhookDispatcher(store)
        self.watches = WatchHub(store)
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
        if segments == ["openapi", "v2"]:
            self._only(request, "GET")
            body, content_type = openapi.v2_document(self.git_version, request.header("Accept"))
            return Response(200, body, content_type=content_type)
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
            if not resources.is_builtin(segments[1]) \
                    and segments[1] not in self.store.types.group_versions():
                raise ApiError.page_not_found()
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
            if not resources.is_builtin(group) \
                    and version not in self.store.types.group_versions().get(group, []):
                raise ApiError.page_not_found()
            self._only(request, "GET")
            return Response(200, self.discovery.resource_list(group, version))
        if group == "" and len(rest) == 5 and rest[0] == "namespaces" and rest[2] == "pods" \
                and rest[4] == "log":
            self._only(request, "GET")
            return self._pod_log(request, rest[1], rest[3])
        if len(rest) == 5 and rest[0] == "namespaces" and rest[4] == "scale" \
                and (group, rest[2]) in SCALED and version == "v1":
            self._only(request, "GET", "PUT", "PATCH")
            if request.method == "GET":
                return Response(200, read_scale(self.store, group, rest[2], rest[3], rest[1]))
            return Response(200, write_scale(self.store, group, rest[2], rest[3], rest[1],
                                             request.method, request.content_type,
                                             request.body))
        target = self._target(group, version, rest)
        info = self.store.types.info(group, target.resource)
        if info is not None and not info.stored:
            return self._review(request, target)
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
        """The addressed resource; 404 for paths no served type has (a custom resource
        without its CRD: the not-found handler's plain text)."""
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
        if not self.store.types.serves(group, version, resource):
            raise ApiError.page_not_found()
        name = tail[0] if tail else None
        subresource = tail[1] if len(tail) == 2 else ""
        if subresource not in ("", "status"):
            raise ApiError.path_not_found()
        custom = self.store.types.custom(group, resource)
        if subresource and custom is not None and version not in custom.status_versions:
            raise ApiError.page_not_found()
        scope = self._namespaced(group, resource)
        if scope is False and namespace is not None:
            raise ApiError.path_not_found()
        if scope is True and namespace is None and name is not None:
            raise ApiError.path_not_found()
        return Target(group, version, resource, namespace, name, "status" if subresource else "")

    # ------------------------------------------------------------------ helpers

    def _namespaced(self, group: str, resource: str) -> bool | None:
        """True/False for a known type (table or CRD), None when the URL must decide."""
        info = self.store.types.info(group, resource)
        return info.namespaced if info is not None else None

    @staticmethod
    def _dry_run(request: Request, options: JsonObject | None = None) -> bool:
        """Whether the write is a dry run: ``dryRun=All`` (in DeleteOptions for a delete);
        any other value is refused as the real API refuses it."""
        values = list(request.query.get("dryRun", []))
        if options and isinstance(options.get("dryRun"), list):
            values += [str(v) for v in options["dryRun"]]
        unknown = [v for v in values if v != "All"]
        if unknown:
            shown = fe.GoValue("[]string{" + ", ".join(fe.go_quote(v) for v in unknown) + "}")
            raise ApiError.unprocessable(str(fe.not_supported("dryRun", shown, ["All"])))
        return bool(values)

    def _admission(self, request: Request, target: Target, dry_run: bool) -> Admission:
        """Admission for one write: the webhooks, and for CRDs what apiextensions does."""
        admission = self.webhooks.for_request(
            AdmissionTarget(target.group, target.version, target.resource, target.subresource,
                            target.store_namespace, bool(target.namespace)),
            dry_run=dry_run)
        if (target.group, target.resource) == (CRD_GROUP, CRD_RESOURCE):
            return _CrdAdmission(admission, self.store)
        return admission

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
        if target.namespace is None and self._namespaced(target.group, target.resource) is not True:
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
        try:
            fields = parse_field_selector(request.param("fieldSelector"))
            fields.require_supported(
                resources.supported_field_labels(target.group, target.resource)
            )
            labels = parse_label_selector(request.param("labelSelector"))
        except SelectorError as exc:
            raise ApiError.bad_request(str(exc)) from exc
        if request.flag("watch"):
            return Response(200, self.watches.stream(WatchRequest(
                group=target.group,
                kind=self.store.kind_of(target.group, target.resource),
                resource=target.resource,
                namespace=target.namespace,
                labels=labels,
                fields=fields,
                resource_version=request.param("resourceVersion") or "",
                timeout_seconds=timeout_of(request.param("timeoutSeconds")),
                send_initial_events=request.flag("sendInitialEvents"),
                present=lambda obj: self._present(obj, target),
            )), content_type="application/json")
        items, rv = self.store.list_with_version(
            target.group,
            target.resource,
            target.namespace,
            label_selector=labels,
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
        if target.namespace is None and self._namespaced(target.group, target.resource):
            raise ApiError.path_not_found()
        dry_run = self._dry_run(request)
        body, warnings = self._checked(request, target, self._body_object(request, target))
        custom = self.store.types.custom(target.group, target.resource)
        if custom is not None and target.version in custom.status_versions:
            body.pop("status", None)  # a custom resource's create cannot set its status
        created = self.store.create(target.group, target.resource, body, namespace=target.namespace,
                                    admission=self._admission(request, target, dry_run),
                                    dry_run=dry_run)
        return Response(201, self._present(created, target), warnings)

    def _replace(self, request: Request, target: Target) -> Response:
        dry_run = self._dry_run(request)
        body, warnings = self._checked(request, target, self._body_object(request, target))
        self._check_body_name(body, target)
        write = self.store.update_status if target.subresource == "status" else self.store.replace
        obj = write(target.group, target.resource, body, namespace=target.store_namespace,
                    admission=self._admission(request, target, dry_run), dry_run=dry_run)
        return Response(200, self._present(obj, target), warnings)

    def _patch(self, request: Request, target: Target) -> Response:
        assert target.name is not None
        patch_type = patch_type_for(request.content_type)
        if not request.body.strip():
            raise ApiError.bad_request("the patch body is empty")
        body = decode_patch_body(patch_type, request.body)
        dry_run = self._dry_run(request)
        admission = self._admission(request, target, dry_run)
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
                admission=admission,
                dry_run=dry_run,
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
            admission=admission,
            dry_run=dry_run,
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
        dry_run = self._dry_run(request, options)
        result = self.store.delete(
            target.group,
            target.resource,
            target.name,
            target.store_namespace,
            preconditions=options.get("preconditions"),
            dry_run=dry_run,
        )
        if (target.group, target.resource) == (CRD_GROUP, CRD_RESOURCE) and not dry_run \
                and not result.finalizing:
            self._delete_custom_resources(result.object)
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

    def _delete_custom_resources(self, crd: JsonObject) -> None:
        """What the CRD finalizer's controller does: the custom resources go with their CRD."""
        spec = crd.get("spec") or {}
        group, plural = str(spec.get("group") or ""), str((spec.get("names") or {}).get("plural"))
        for obj in self.store.list(group, plural):
            meta = obj["metadata"]
            try:
                self.store.delete(group, plural, meta["name"], meta.get("namespace", ""))
            except ApiError as exc:
                if exc.code != 404:
                    raise

    def _delete_collection(self, request: Request, target: Target) -> Response:
        dry_run = self._dry_run(request, self._delete_options(request))
        listed = self._list(request, target)
        if dry_run:
            return listed
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


class _CrdAdmission:
    """Admission of a CustomResourceDefinition: its name is checked and, on create, it gets
    the status the apiextensions controllers give it a moment later (names accepted,
    Established), besides whatever webhooks apply."""

    def __init__(self, webhooks: RequestAdmission, store: ObjectStore) -> None:
        self.webhooks = webhooks
        self.store = store

    def mutate(self, operation: str, old: JsonObject | None, new: JsonObject) -> JsonObject:
        new = self.webhooks.mutate(operation, old, new)
        if operation == "CREATE":
            new["status"] = accepted_status(new, self.store.now())
        return new

    def validate(self, operation: str, old: JsonObject | None, new: JsonObject) -> None:
        check_definition(new)
        self.webhooks.validate(operation, old, new)


def parse_query(raw: str) -> dict[str, list[str]]:
    """Query string to multi-dict, keeping blank values (``?watch=``)."""
    return parse_qs(raw, keep_blank_values=True)
