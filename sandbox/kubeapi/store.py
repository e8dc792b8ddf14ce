"""Thread-safe in-memory object store with the real API's write semantics.

Both the HTTP server and in-process simulated controllers (JobSet, Pod, Node
simulators) use this one store, so the rules that make controllers correct on
GKE live here rather than in the HTTP layer:

* objects are keyed by ``(group, resource, namespace or "", name)``; the API
  *version* is not part of the key (no conversion: objects are returned as
  stored);
* the store maintains ``uid``, ``resourceVersion`` (one global counter),
  ``generation`` (+1 only when something outside ``metadata``/``status``
  changes), ``creationTimestamp`` and ``deletionTimestamp`` from an injectable
  clock, so a simulated clock can drive it;
* every resource behaves as if it had a ``status`` subresource: main-resource
  writes keep the stored ``.status``, status writes change only ``.status``
  (creation keeps the given status, which the real API drops for pods/CRs:
  that lets simulators seed objects in one call);
* optimistic concurrency: a write carrying a stale ``metadata.resourceVersion``
  fails with 409 Conflict; a PUT without one is accepted for built-in kinds
  but refused (422) for custom resources, as the real API does; a write that
  changes nothing is a no-op (no new resourceVersion, no event);
* deletion honours finalizers: the object gets ``deletionTimestamp`` and stays
  until an update removes its last finalizer. Deleting a Namespace deletes its
  contents; it stays ``Terminating`` while finalizers hold any of them;
* names and labels are checked as ``ValidateObjectMeta`` checks them (k8s.io/apimachinery
  v0.32.0 ``pkg/api/validation/objectmeta.go``): a Namespace's name is an RFC 1123 label,
  any other an RFC 1123 subdomain, label keys qualified names and label values valid ones,
  refused with 422 in apimachinery's words (:mod:`sandbox.kubeapi.validation`);
* namespaced objects need their Namespace (404 ``namespaces "x" not found``,
  403 while it is terminating); a Namespace always carries the label
  ``kubernetes.io/metadata.name`` with its name, as the real API sets it;
* custom resources of the kinds the sandbox has CRDs for are decoded (pruned,
  defaulted) and validated against them on every create and update, whoever writes
  (:mod:`sandbox.kubeapi.custom_resources`): 422 ``Invalid`` as the real API answers.

Which custom types the API *serves* is decided by the CRDs stored here
(:attr:`ObjectStore.types`, see :mod:`sandbox.kubeapi.registry`): the HTTP layer
refuses the others (simulated controllers writing directly are not checked).

Writes from the API pass an ``admission`` (:class:`Admission`), called in
kube-apiserver's order under the store lock, so the object admitted is the object
stored: namespace lifecycle; a custom resource decoded; ``admission.mutate``
(mutating webhooks); name generation, object checks and, for custom resources,
decoding again and schema validation; ``admission.validate`` (validating webhooks);
then the conflict and "already exists" checks of storage. With ``dry_run=True`` a
write runs every step but stores nothing and emits no event: the result is the object
as it would be (a created one without ``resourceVersion``).

Pods' container logs live beside the objects (``pod_logs``, written by the simulated
pod runtime, read through the ``log`` subresource).

``subscribe(callback)`` delivers ``("ADDED"|"MODIFIED"|"DELETED", object)``
after every change, in resourceVersion order, never while the store lock is
held, so callbacks may write to the store (their own events are delivered
after the current callback returns). If another thread is already delivering,
the event is delivered by that thread, shortly after the write returns.
"""

from __future__ import annotations

import logging
import random
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple, Protocol

from sandbox.kubeapi import custom_resources, resources
from sandbox.kubeapi import field_errors as fe
from sandbox.kubeapi.builtin_validation import check_builtin
from sandbox.kubeapi.copies import deep_copy
from sandbox.kubeapi.errors import ApiError, JsonObject
from sandbox.kubeapi.patch import PatchType, apply_patch, apply_patch_body
from sandbox.kubeapi.podlogs import PodLogs
from sandbox.kubeapi.registry import CRD_KIND, TypeRegistry
from sandbox.kubeapi.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)
from sandbox.kubeapi.validation import is_dns1123_label, is_dns1123_subdomain, validate_labels

log = logging.getLogger(__name__)

Clock = Callable[[], "datetime | float"]
EventType = Literal["ADDED", "MODIFIED", "DELETED"]
Listener = Callable[[str, JsonObject], None]
Subresource = Literal["", "status"]
# Aliases: inside ObjectStore the name `list` is the method, not the builtin.
ObjectList = list[JsonObject]
TypeKeys = list[tuple[str, str]]
_ContentKeys = list[tuple[str, str, str]]

_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # what the real API uses
_SYSTEM_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")
_NS = ("", "namespaces")
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


class Admission(Protocol):
    """Admission control for one write (see the module docstring for when each runs)."""

    def mutate(self, operation: str, old: JsonObject | None, new: JsonObject) -> JsonObject:
        """The object after the mutating stage (``operation``: CREATE or UPDATE)."""
        ...

    def validate(self, operation: str, old: JsonObject | None, new: JsonObject) -> None:
        """Raise ApiError to refuse the write."""
        ...


class DeleteResult(NamedTuple):
    """What a delete did: the object as last seen, and whether it is still there."""

    object: JsonObject
    finalizing: bool


def format_timestamp(moment: datetime | float) -> str:
    """RFC 3339 in the API's second-precision UTC form: ``2026-01-01T00:00:00Z``."""
    if not isinstance(moment, datetime):
        moment = datetime.fromtimestamp(float(moment), tz=UTC)
    elif moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _system_clock() -> datetime:
    return datetime.now(UTC)


def _metadata(obj: Any) -> JsonObject:
    if not isinstance(obj, dict):
        raise ApiError.bad_request("the request body must be a JSON object")
    meta = obj.setdefault("metadata", {})
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise ApiError.bad_request("metadata must be an object")
    return meta


def _label_namespace(meta: JsonObject) -> None:
    """What the Namespace strategy does on every write: the label naming the namespace,
    which webhooks' namespace selectors match (``kubernetes.io/metadata.name``)."""
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    assert isinstance(labels, dict)
    labels[NAMESPACE_NAME_LABEL] = str(meta.get("name") or "")
    meta["labels"] = labels


def _spec_part(obj: Mapping[str, Any]) -> JsonObject:
    """Everything whose change bumps ``generation``."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


class ObjectStore:
    """In-memory objects of any group/resource; see the module docstring for rules."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock: Clock = clock or _system_clock
        self._lock = threading.RLock()
        self._buckets: dict[tuple[str, str], dict[tuple[str, str], JsonObject]] = {}
        self._rv = 0
        self._listeners: list[Listener] = []
        self._pending: deque[tuple[str, JsonObject]] = deque()
        self._dispatching = False
        # Container output of simulated pods, served as the pods/log subresource.
        self.pod_logs = PodLogs()
        # Bumped whenever a CRD changes: the type registry re-reads them then.
        self._crd_serial = 0
        self.types = TypeRegistry(self._crd_snapshot)

    def _crd_snapshot(self) -> tuple[int, list[JsonObject]]:
        with self._lock:
            bucket = self._buckets.get(("apiextensions.k8s.io", "customresourcedefinitions"), {})
            return self._crd_serial, [obj for obj in bucket.values()
                                      if not obj["metadata"].get("deletionTimestamp")]

    # ------------------------------------------------------------------ clock

    @property
    def clock(self) -> Clock:
        return self._clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self._clock = clock

    def now(self) -> str:
        """The clock's current time, formatted like API timestamps."""
        return format_timestamp(self._clock())

    # ------------------------------------------------------------------ events

    def subscribe(self, callback: Listener) -> Callable[[], None]:
        """Call ``callback(event_type, object_copy)`` after every change; returns unsubscribe."""
        with self._lock:
            self._listeners.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._listeners:
                    self._listeners.remove(callback)

        return unsubscribe

    def _emit(self, event: EventType, obj: JsonObject) -> None:
        if obj.get("kind") == CRD_KIND:
            self._crd_serial += 1
        self._pending.append((event, deep_copy(obj)))

    def _drain(self) -> None:
        with self._lock:
            if self._dispatching:
                return
            self._dispatching = True
        try:
            while True:
                with self._lock:
                    if not self._pending:
                        self._dispatching = False
                        return
                    event, obj = self._pending.popleft()
                    listeners = list(self._listeners)
                for listener in listeners:
                    try:
                        listener(event, deep_copy(obj))
                    except Exception:
                        log.exception("store listener %r failed on %s", listener, event)
        except BaseException:
            with self._lock:
                self._dispatching = False
            raise

    # ------------------------------------------------------------------ reads

    @property
    def resource_version(self) -> str:
        """The newest resourceVersion handed out (what a List reports)."""
        with self._lock:
            return str(self._rv)

    def get(self, group: str, resource: str, name: str, namespace: str = "") -> JsonObject:
        """A copy of one object; 404 ApiError when absent."""
        with self._lock:
            return deep_copy(self._get_locked(group, resource, name, namespace))

    def try_get(
        self, group: str, resource: str, name: str, namespace: str = ""
    ) -> JsonObject | None:
        """A copy of one object, or None."""
        with self._lock:
            obj = self._buckets.get((group, resource), {}).get((namespace, name))
            return deep_copy(obj) if obj is not None else None

    def list(
        self,
        group: str,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str | LabelSelector | None = None,
        field_selector: str | FieldSelector | None = None,
    ) -> ObjectList:
        """Copies of matching objects sorted by (namespace, name); namespace None = all."""
        return self.list_with_version(
            group,
            resource,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
        )[0]

    def list_with_version(
        self,
        group: str,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str | LabelSelector | None = None,
        field_selector: str | FieldSelector | None = None,
    ) -> tuple[ObjectList, str]:
        """Like :meth:`list`, plus the resourceVersion the snapshot was taken at."""
        try:
            labels = (
                label_selector
                if isinstance(label_selector, LabelSelector)
                else parse_label_selector(label_selector)
            )
            fields = (
                field_selector
                if isinstance(field_selector, FieldSelector)
                else parse_field_selector(field_selector)
            )
        except SelectorError as exc:
            raise ApiError.bad_request(str(exc)) from exc
        with self._lock:
            bucket = self._buckets.get((group, resource), {})
            items = deep_copy([  # one copy of the whole list: less per call than each
                obj
                for (ns, _), obj in sorted(bucket.items())
                if (namespace is None or ns == namespace)
                and labels.matches(obj.get("metadata", {}).get("labels"))
                and fields.matches(obj)
            ])
            return items, str(self._rv)

    def kind_of(self, group: str, resource: str) -> str:
        """Kind for a resource: the table or its CRD, else a stored object's kind, else a
        guess."""
        info = self.types.info(group, resource)
        if info is not None:
            return info.kind
        with self._lock:
            for obj in self._buckets.get((group, resource), {}).values():
                kind = obj.get("kind")
                if isinstance(kind, str) and kind:
                    return kind
        return resources.guess_kind(resource)

    def resource_types(self) -> TypeKeys:
        """Every (group, resource) that has, or had, a stored object."""
        with self._lock:
            return sorted(self._buckets)

    # ------------------------------------------------------------------ writes

    def create(
        self,
        group: str,
        resource: str,
        obj: JsonObject,
        *,
        namespace: str | None = None,
        admission: Admission | None = None,
        dry_run: bool = False,
    ) -> JsonObject:
        """Store a new object (``generateName`` honoured); returns the stored copy."""
        try:
            with self._lock:
                return deep_copy(self._create_locked(
                    group, resource, obj, namespace, admission=admission, dry_run=dry_run))
        finally:
            self._drain()

    def replace(
        self,
        group: str,
        resource: str,
        obj: JsonObject,
        *,
        namespace: str | None = None,
        admission: Admission | None = None,
        dry_run: bool = False,
    ) -> JsonObject:
        """PUT semantics on the main resource: everything but ``.status`` is replaced."""
        return self._write(group, resource, obj, namespace, "", admission, dry_run)

    def update_status(
        self,
        group: str,
        resource: str,
        obj: JsonObject,
        *,
        namespace: str | None = None,
        admission: Admission | None = None,
        dry_run: bool = False,
    ) -> JsonObject:
        """PUT semantics on ``/status``: only ``.status`` is taken from ``obj``."""
        return self._write(group, resource, obj, namespace, "status", admission, dry_run)

    def patch(
        self,
        group: str,
        resource: str,
        name: str,
        body: Any,
        *,
        namespace: str = "",
        patch_type: PatchType = PatchType.MERGE,
        subresource: Subresource = "",
        admission: Admission | None = None,
        dry_run: bool = False,
    ) -> JsonObject:
        """Apply a decoded patch body atomically (404 when the object is absent)."""
        if patch_type is PatchType.APPLY:
            raise ValueError("use ObjectStore.apply for server-side apply")
        try:
            with self._lock:
                current = self._get_locked(group, resource, name, namespace)
                patched = apply_patch_body(patch_type, deep_copy(current), body)
                self._check_identity(group, resource, patched, name, namespace)
                return deep_copy(self._update_locked(
                    group, resource, patched, subresource, admission, dry_run))
        finally:
            self._drain()

    def apply(
        self,
        group: str,
        resource: str,
        name: str,
        body: Any,
        *,
        namespace: str = "",
        field_manager: str,
        subresource: Subresource = "",
        admission: Admission | None = None,
        dry_run: bool = False,
    ) -> tuple[JsonObject, bool]:
        """Simplified server-side apply; returns (object, created)."""
        if not field_manager:
            raise ApiError.bad_request(
                "PATCH, application/apply-patch+yaml requests must specify a fieldManager"
            )
        if not isinstance(body, dict):
            raise ApiError.bad_request("apply patch body must be an object")
        body = deep_copy(body)
        meta = _metadata(body)
        if meta.get("name") not in (None, name):
            raise ApiError.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on "
                f"the URL ({name})"
            )
        try:
            with self._lock:
                current = self._buckets.get((group, resource), {}).get((namespace, name))
                if current is None:
                    if subresource:
                        raise ApiError.not_found(group, resource, name)
                    fresh = apply_patch(None, body)
                    fresh_meta = _metadata(fresh)
                    fresh_meta["name"] = name
                    fresh_meta.pop("resourceVersion", None)
                    created = self._create_locked(group, resource, fresh, namespace or None,
                                                  admission=admission, dry_run=dry_run)
                    return deep_copy(created), True
                patched = apply_patch(deep_copy(current), body)
                self._check_identity(group, resource, patched, name, namespace)
                updated = self._update_locked(group, resource, patched, subresource,
                                              admission, dry_run)
                return deep_copy(updated), False
        finally:
            self._drain()

    def delete(
        self,
        group: str,
        resource: str,
        name: str,
        namespace: str = "",
        *,
        preconditions: Mapping[str, Any] | None = None,
        dry_run: bool = False,
    ) -> DeleteResult:
        """Delete, or mark for deletion when finalizers are present (``dry_run``: say
        what would happen, change nothing)."""
        try:
            with self._lock:
                current = self._get_locked(group, resource, name, namespace)
                meta = current["metadata"]
                for field in ("uid", "resourceVersion"):
                    wanted = (preconditions or {}).get(field)
                    if wanted and wanted != meta.get(field):
                        raise ApiError.conflict(
                            group,
                            resource,
                            name,
                            f"Precondition failed: {field} in precondition: {wanted}, "
                            f"{field} in object meta: {meta.get(field)}",
                        )
                if dry_run:
                    return self._delete_preview(current)
                if (group, resource) == _NS:
                    return self._delete_namespace_locked(name)
                return self._delete_locked(group, resource, namespace, name)
        finally:
            self._drain()

    # ------------------------------------------------------------------ persistence

    def snapshot(self) -> JsonObject:
        """A JSON-serialisable copy of the whole store."""
        with self._lock:
            return {
                "resourceVersion": self._rv,
                "objects": [
                    {"group": group, "resource": resource, "object": deep_copy(obj)}
                    for (group, resource), bucket in sorted(self._buckets.items())
                    for _, obj in sorted(bucket.items())
                ],
            }

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Replace the whole content with a :meth:`snapshot` (no events are sent)."""
        with self._lock:
            self._buckets = {}
            highest = int(snapshot.get("resourceVersion", 0))
            for entry in snapshot.get("objects", []):
                obj = deep_copy(entry["object"])
                meta = obj["metadata"]
                key = (meta.get("namespace", ""), meta["name"])
                self._buckets.setdefault((entry["group"], entry["resource"]), {})[key] = obj
                highest = max(highest, int(meta.get("resourceVersion", 0)))
            self._rv = highest
            self._crd_serial += 1

    def __iter__(self) -> Iterator[tuple[str, str, JsonObject]]:
        """(group, resource, object copy) for everything stored."""
        for entry in self.snapshot()["objects"]:
            yield entry["group"], entry["resource"], entry["object"]

    # ------------------------------------------------------------------ internals

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _get_locked(self, group: str, resource: str, name: str, namespace: str) -> JsonObject:
        obj = self._buckets.get((group, resource), {}).get((namespace, name))
        if obj is None:
            raise ApiError.not_found(group, resource, name)
        return obj

    def _resolve_namespace(
        self, group: str, resource: str, meta: JsonObject, namespace: str | None
    ) -> str:
        body_ns = meta.get("namespace") or ""
        if namespace is not None and body_ns and body_ns != namespace:
            raise ApiError.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        ns = namespace if namespace is not None else body_ns
        info = self.types.info(group, resource)
        scope = info.namespaced if info is not None else None
        if scope is False:
            ns = ""
        elif scope is True and not ns:
            raise ApiError.bad_request(f"{resource} is namespaced: a namespace is required")
        if ns:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        return ns

    def _validate_name(self, group: str, resource: str, name: Any) -> None:
        """``ValidateObjectMeta``'s name check: a Namespace's name is an RFC 1123 label,
        every other name an RFC 1123 subdomain (``NameIsDNSLabel``/``NameIsDNSSubdomain``)."""
        kind = self.kind_of(group, resource)
        if not isinstance(name, str) or not name:
            raise fe.invalid_error(
                group, kind, "", [fe.required("metadata.name", "name or generateName is required")]
            )
        check = is_dns1123_label if (group, resource) == _NS else is_dns1123_subdomain
        errors = [fe.invalid("metadata.name", name, message) for message in check(name)]
        if errors:
            raise fe.invalid_error(group, kind, name, errors)

    def _validate_labels(self, group: str, resource: str, meta: JsonObject) -> None:
        """``ValidateLabels`` on ``metadata.labels`` (values that are not strings cannot
        be decoded into one, so they are refused first)."""
        labels = meta.get("labels") or {}
        if not isinstance(labels, dict):
            raise ApiError.bad_request("metadata.labels must be an object")
        kind, name = self.kind_of(group, resource), str(meta.get("name", ""))
        for key, value in labels.items():
            if not isinstance(value, str):
                raise fe.invalid_error(group, kind, name, [fe.invalid(
                    "metadata.labels", str(value), f"label {key!r} must have a string value")])
        errors = validate_labels(labels, "metadata.labels")
        if errors:
            raise fe.invalid_error(group, kind, name, errors)

    def _check_namespace_usable(self, namespace: str, group: str, resource: str, name: str) -> None:
        ns_obj = self._buckets.get(_NS, {}).get(("", namespace))
        if ns_obj is None:
            raise ApiError.not_found("", "namespaces", namespace)
        if ns_obj["metadata"].get("deletionTimestamp"):
            raise ApiError.forbidden(
                group,
                resource,
                name,
                f"unable to create new content in namespace {namespace} because it is being "
                "terminated",
            )

    def _generate_name(self, group: str, resource: str, prefix: str, ns: str) -> str:
        bucket = self._buckets.get((group, resource), {})
        rng = random.SystemRandom()
        for _ in range(100):
            suffix = "".join(rng.choice(_GENERATE_ALPHABET) for _ in range(5))
            candidate = f"{prefix[:58]}{suffix}"
            if (ns, candidate) not in bucket:
                return candidate
        raise ApiError(
            409, "AlreadyExists", f"could not generate a unique name from prefix {prefix!r}"
        )

    def _create_locked(
        self,
        group: str,
        resource: str,
        obj: JsonObject,
        namespace: str | None,
        *,
        admission: Admission | None = None,
        dry_run: bool = False,
    ) -> JsonObject:
        new = deep_copy(obj)
        meta = _metadata(new)
        ns = self._resolve_namespace(group, resource, meta, namespace)
        if meta.get("resourceVersion"):
            raise ApiError.bad_request("resourceVersion should not be set on objects to be created")
        if ns and (group, resource) != _NS:
            self._check_namespace_usable(ns, group, resource, str(meta.get("name") or ""))
        if not new.get("kind"):
            new["kind"] = self.kind_of(group, resource)
        if admission is not None:
            # Decoded (pruned, defaulted) before the mutating webhooks see it.
            custom_resources.decode_resource(group, resource, new)
            new = admission.mutate("CREATE", None, new)
            meta = _metadata(new)
            self._resolve_namespace(group, resource, meta, ns or None)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self._generate_name(group, resource, str(meta["generateName"]), ns)
        name = meta.get("name")
        self._validate_name(group, resource, name)
        assert isinstance(name, str)
        self._validate_labels(group, resource, meta)
        new = custom_resources.admit(group, resource, new, None)
        check_builtin(group, resource, new)
        meta = _metadata(new)
        for field in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = self.now()
        meta["generation"] = 1
        if (group, resource) == _NS:
            status = new.get("status") if isinstance(new.get("status"), dict) else {}
            assert isinstance(status, dict)
            status.setdefault("phase", "Active")
            new["status"] = status
            _label_namespace(meta)
        if admission is not None:
            admission.validate("CREATE", None, new)
        if (ns, name) in self._buckets.get((group, resource), {}):
            raise ApiError.already_exists(group, resource, name)
        if dry_run:
            return new  # as it would be stored, without the resourceVersion storage gives
        meta["resourceVersion"] = self._next_rv()
        self._buckets.setdefault((group, resource), {})[(ns, name)] = new
        self._emit("ADDED", new)
        return new

    def _check_identity(
        self, group: str, resource: str, obj: Any, name: str, namespace: str
    ) -> None:
        meta = _metadata(obj)
        if meta.get("name", name) != name:
            raise ApiError.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the "
                f"URL ({name})"
            )
        if (meta.get("namespace") or "") not in ("", namespace):
            raise ApiError.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )

    def _write(
        self,
        group: str,
        resource: str,
        obj: JsonObject,
        namespace: str | None,
        subresource: Subresource,
        admission: Admission | None = None,
        dry_run: bool = False,
    ) -> JsonObject:
        new = deep_copy(obj)
        meta = _metadata(new)
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            self._validate_name(group, resource, name)
        assert isinstance(name, str)
        if not meta.get("resourceVersion") and not resources.allows_unconditional_update(
            group, resource
        ):
            raise fe.invalid_error(
                group,
                self.kind_of(group, resource),
                name,
                [fe.invalid("metadata.resourceVersion", 0, "must be specified for an update")],
            )
        try:
            with self._lock:
                ns = self._resolve_namespace(group, resource, meta, namespace)
                self._check_identity(group, resource, new, name, ns)
                return deep_copy(self._update_locked(
                    group, resource, new, subresource, admission, dry_run))
        finally:
            self._drain()

    def _update_locked(
        self,
        group: str,
        resource: str,
        new: JsonObject,
        subresource: Subresource,
        admission: Admission | None = None,
        dry_run: bool = False,
    ) -> JsonObject:
        meta = _metadata(new)
        name = str(meta.get("name"))
        ns = str(meta.get("namespace") or "")
        info = self.types.info(group, resource)
        if info is not None and not info.namespaced:
            ns = ""
        old = self._get_locked(group, resource, name, ns)
        old_meta = old["metadata"]
        wanted_rv = meta.get("resourceVersion")
        if wanted_rv and str(wanted_rv) != old_meta["resourceVersion"]:
            raise ApiError.stale(group, resource, name)
        if meta.get("uid") and meta["uid"] != old_meta["uid"]:
            raise ApiError.conflict(
                group,
                resource,
                name,
                f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: "
                f"{old_meta['uid']}",
            )
        if admission is not None:
            custom_resources.decode_resource(group, resource, new)
            new = admission.mutate("UPDATE", deep_copy(old), new)

        if subresource == "status":
            result = deep_copy(old)
            if new.get("status") is None:
                result.pop("status", None)
            else:
                result["status"] = deep_copy(new["status"])
        else:
            result = deep_copy(new)
            if "status" in old:
                result["status"] = deep_copy(old["status"])
            else:
                result.pop("status", None)
            result_meta = result["metadata"]
            for field in _SYSTEM_META:
                if field in old_meta:
                    result_meta[field] = old_meta[field]
                else:
                    result_meta.pop(field, None)
            if ns:
                result_meta["namespace"] = ns
            if (group, resource) == _NS:
                _label_namespace(result_meta)
            self._validate_labels(group, resource, result_meta)
            if old_meta.get("deletionTimestamp"):
                added = set(result_meta.get("finalizers") or []) - set(
                    old_meta.get("finalizers") or []
                )
                if added:
                    raise fe.invalid_error(
                        group,
                        self.kind_of(group, resource),
                        name,
                        [
                            fe.invalid(
                                "metadata.finalizers",
                                sorted(added)[0],
                                "no new finalizers can be added if the object is being deleted",
                            )
                        ],
                    )
            for field in ("apiVersion", "kind"):
                if not result.get(field) and old.get(field):
                    result[field] = old[field]
        result_meta = result["metadata"]
        result_meta["resourceVersion"] = old_meta["resourceVersion"]
        result = custom_resources.admit(group, resource, result, old, subresource)
        if not subresource:
            check_builtin(group, resource, result)
        generation = int(old_meta.get("generation", 1))
        if _spec_part(result) != _spec_part(old):
            generation += 1
        result_meta["generation"] = generation
        if admission is not None:
            admission.validate("UPDATE", deep_copy(old), result)
        if result == old:
            return old  # nothing changed: no new resourceVersion, no event
        if dry_run:
            return result  # as it would be stored; storage would give the resourceVersion
        result_meta["resourceVersion"] = self._next_rv()
        if (
            result_meta.get("deletionTimestamp")
            and not result_meta.get("finalizers")
            and not ((group, resource) == _NS and self._namespace_contents(name))
        ):
            self._buckets[(group, resource)].pop((ns, name))
            self._emit("DELETED", result)
            self._finish_namespace_if_empty(ns)
            return result
        self._buckets[(group, resource)][(ns, name)] = result
        self._emit("MODIFIED", result)
        return result

    def _delete_preview(self, current: JsonObject) -> DeleteResult:
        """What a delete would answer, without deleting (dry run)."""
        preview = deep_copy(current)
        meta = preview["metadata"]
        if meta.get("finalizers") or preview.get("kind") == "Namespace":
            meta.setdefault("deletionTimestamp", self.now())
            return DeleteResult(preview, True)
        return DeleteResult(preview, False)

    def _delete_locked(
        self, group: str, resource: str, ns: str, name: str, *, finish_namespace: bool = True
    ) -> DeleteResult:
        obj = self._buckets[(group, resource)][(ns, name)]
        meta = obj["metadata"]
        if meta.get("finalizers"):
            if not meta.get("deletionTimestamp"):
                marked = deep_copy(obj)
                marked["metadata"]["deletionTimestamp"] = self.now()
                marked["metadata"]["deletionGracePeriodSeconds"] = 0
                marked["metadata"]["resourceVersion"] = self._next_rv()
                self._buckets[(group, resource)][(ns, name)] = marked
                self._emit("MODIFIED", marked)
                obj = marked
            return DeleteResult(obj, True)
        del self._buckets[(group, resource)][(ns, name)]
        gone = deep_copy(obj)
        gone["metadata"]["resourceVersion"] = self._next_rv()
        self._emit("DELETED", gone)
        if finish_namespace:
            self._finish_namespace_if_empty(ns)
        return DeleteResult(gone, False)

    def _namespace_contents(self, namespace: str) -> _ContentKeys:
        return [
            (group, resource, name)
            for (group, resource), bucket in self._buckets.items()
            if (group, resource) != _NS
            for (ns, name) in bucket
            if ns == namespace
        ]

    def _delete_namespace_locked(self, name: str) -> DeleteResult:
        ns_obj = self._buckets[_NS][("", name)]
        if not ns_obj["metadata"].get("deletionTimestamp"):
            marked = deep_copy(ns_obj)
            marked["metadata"]["deletionTimestamp"] = self.now()
            status = marked.get("status") if isinstance(marked.get("status"), dict) else {}
            assert isinstance(status, dict)
            status["phase"] = "Terminating"
            marked["status"] = status
            marked["metadata"]["resourceVersion"] = self._next_rv()
            self._buckets[_NS][("", name)] = marked
            self._emit("MODIFIED", marked)
            for group, resource, obj_name in self._namespace_contents(name):
                self._delete_locked(group, resource, name, obj_name, finish_namespace=False)
        tombstone = self._finish_namespace_if_empty(name)
        if tombstone is not None:
            return DeleteResult(tombstone, False)
        return DeleteResult(self._buckets[_NS][("", name)], True)

    def _finish_namespace_if_empty(self, namespace: str) -> JsonObject | None:
        """Remove a terminating namespace once nothing is left in it; returns its tombstone."""
        if not namespace:
            return None
        ns_obj = self._buckets.get(_NS, {}).get(("", namespace))
        if (
            ns_obj is None
            or not ns_obj["metadata"].get("deletionTimestamp")
            or ns_obj["metadata"].get("finalizers")
            or self._namespace_contents(namespace)
        ):
            return None
        del self._buckets[_NS][("", namespace)]
        gone = deep_copy(ns_obj)
        gone["metadata"]["resourceVersion"] = self._next_rv()
        self._emit("DELETED", gone)
        return gone
