"""Calling admission webhooks the way kube-apiserver does (``k8s.io/apiserver`` v0.31).

Sources: ``pkg/admission/plugin/webhook/{mutating,validating}/dispatcher.go``,
``predicates/rules/rules.go``, ``predicates/namespace/matcher.go``,
``predicates/object/matcher.go``, ``errors/statuserror.go``,
``pkg/admission/configuration/*_webhook_manager.go`` and
``pkg/util/webhook/error.go``.

* The webhooks are those of the Mutating/ValidatingWebhookConfigurations in the
  store, configurations in name order, webhooks in their order. One applies when a
  rule matches the operation, group, version, resource (``"workloads/status"`` form
  for subresources; ``*`` wildcards) and scope, its ``namespaceSelector`` selects the
  namespace's labels (a cluster-scoped object other than a Namespace is never
  exempted) and its ``objectSelector`` selects the new or the old object's labels.
* Mutating webhooks run one after the other, each seeing the previous one's result
  (no reinvocation: ``reinvocationPolicy: IfNeeded`` is not simulated); validating
  webhooks all run and the first refusal is returned.
* A webhook is called through its Service: ``https://SERVICE.NAMESPACE.svc:PORT/PATH
  ?timeout=Ns`` (port 443, timeout 10 s by default). A missing Service, or one whose
  Endpoints have no ready address, fails the call as kube-apiserver's service
  resolver does (``service "x" not found`` / ``no endpoints available for service
  "x"``); with ``failurePolicy: Fail`` (the default) the request then fails with 500
  ``Internal error occurred: failed calling webhook "NAME": failed to call webhook:
  Post "URL": ...``; with ``Ignore`` the webhook is skipped.
* A refusal is the webhook's status with ``admission webhook "NAME" denied the
  request: `` before its message (controller-runtime refuses with 403 Forbidden).
* In a dry run, a webhook whose ``sideEffects`` is not ``None``/``NoneOnDryRun`` fails
  the request with 400 ``admission webhook "NAME" does not support dry run``.

What answers behind a Service is :mod:`~sandbox.kubeapi.admission.servers`. Webhooks
with a ``url`` instead of a Service are not called: the sandbox makes no outbound
calls, so such a call fails like an unreachable one.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sandbox.kubeapi.admission.review import Denied, Review, selector_matches
from sandbox.kubeapi.admission.servers import handler_for
from sandbox.kubeapi.errors import ApiError, JsonObject
from sandbox.kubeapi.store import ObjectStore

__all__ = ["RequestAdmission", "WebhookDispatcher"]

GROUP = "admissionregistration.k8s.io"
MUTATING = "mutatingwebhookconfigurations"
VALIDATING = "validatingwebhookconfigurations"
DEFAULT_TIMEOUT_SECONDS = 10


class _CallFailed(Exception):
    """The webhook could not be called (``ErrCallingWebhook``); the text is the reason."""


@dataclass(frozen=True)
class Target:
    """What a write addresses, as admission attributes name it."""

    group: str
    version: str
    resource: str
    subresource: str
    namespace: str
    namespaced: bool


def _rule_matches(rule: Mapping[str, Any], operation: str, target: Target) -> bool:
    def has(values: Any, wanted: str) -> bool:
        return isinstance(values, list) and ("*" in values or wanted in values)

    if not (has(rule.get("operations"), operation) and has(rule.get("apiGroups"), target.group)
            and has(rule.get("apiVersions"), target.version)):
        return False
    scope = rule.get("scope") or "*"
    if scope != "*" and (scope == "Namespaced") != target.namespaced:
        return False
    for entry in rule.get("resources") or []:
        resource, _, subresource = str(entry).partition("/")
        if resource in ("*", target.resource) and subresource in ("*", target.subresource):
            return True
    return False


def _labels(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


class WebhookDispatcher:
    """Finds and calls the webhooks that apply to a write, reading the store."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    def for_request(self, target: Target, *, dry_run: bool) -> RequestAdmission:
        """The admission of one write, for the store to call (see ObjectStore)."""
        return RequestAdmission(self, target, dry_run)

    # ------------------------------------------------------------------ selection

    def _webhooks(self, kind: str) -> list[dict[str, Any]]:
        configurations = sorted(self.store.list(GROUP, kind),
                                key=lambda c: str(c["metadata"].get("name", "")))
        return [hook for c in configurations for hook in c.get("webhooks") or []
                if isinstance(hook, dict)]

    def _namespace_labels(self, target: Target, obj: JsonObject) -> dict[str, str] | None:
        if target.group == "" and target.resource == "namespaces" and not target.subresource:
            return _labels(obj)
        if not target.namespace:
            return None
        found = self.store.try_get("", "namespaces", target.namespace)
        return _labels(found) if found is not None else {}

    def _applies(self, hook: Mapping[str, Any], operation: str, target: Target,
                 obj: JsonObject, old: JsonObject | None) -> bool:
        if not any(_rule_matches(rule, operation, target) for rule in hook.get("rules") or []):
            return False
        namespace_labels = self._namespace_labels(target, obj)
        if namespace_labels is not None and not selector_matches(
                hook.get("namespaceSelector"), namespace_labels):
            return False
        selector = hook.get("objectSelector")
        return selector_matches(selector, _labels(obj)) or (
            old is not None and selector_matches(selector, _labels(old)))

    # ------------------------------------------------------------------ calls

    def _call(self, hook: Mapping[str, Any], review: Review) -> JsonObject | None:
        client = hook.get("clientConfig") or {}
        service = client.get("service")
        timeout = int(hook.get("timeoutSeconds") or DEFAULT_TIMEOUT_SECONDS)
        if not isinstance(service, Mapping):
            url = client.get("url") or ""
            raise _CallFailed(f'failed to call webhook: Post "{url}?timeout={timeout}s": the '
                              "sandbox calls no webhook outside the cluster")
        namespace, name = str(service.get("namespace", "")), str(service.get("name", ""))
        path = str(service.get("path") or "/")
        url = (f"https://{name}.{namespace}.svc:{int(service.get('port') or 443)}{path}"
               f"?timeout={timeout}s")
        if self.store.try_get("", "services", name, namespace) is None:
            raise _CallFailed(f'failed to call webhook: Post "{url}": service "{name}" not found')
        endpoints = self.store.try_get("", "endpoints", name, namespace) or {}
        if not any(subset.get("addresses") for subset in endpoints.get("subsets") or []):
            raise _CallFailed(f'failed to call webhook: Post "{url}": no endpoints available '
                              f'for service "{name}"')
        handler = handler_for(namespace, name, path)
        if handler is None:
            raise _CallFailed("failed to call webhook: the server could not find the requested "
                              "resource")
        return handler(review)

    def run(self, kind: str, operation: str, target: Target, obj: JsonObject,
            old: JsonObject | None, dry_run: bool) -> JsonObject:
        """Every applicable webhook of one kind of configuration; the object as the mutating
        ones leave it. Raises the ApiError kube-apiserver would answer."""
        meta = obj.get("metadata") or {}
        for hook in self._webhooks(kind):
            if not self._applies(hook, operation, target, obj, old):
                continue
            name = str(hook.get("name", ""))
            if dry_run and hook.get("sideEffects") not in ("None", "NoneOnDryRun"):
                raise ApiError.bad_request(f'admission webhook "{name}" does not support dry run')
            review = Review(operation, target.group, target.version, target.resource,
                            target.subresource, target.namespace, str(meta.get("name") or ""),
                            copy.deepcopy(obj), copy.deepcopy(old), dry_run)
            try:
                answer = self._call(hook, review)
            except _CallFailed as exc:
                if hook.get("failurePolicy") == "Ignore":
                    continue
                reason = f'failed calling webhook "{name}": {exc}'
                raise ApiError(500, "InternalError", f"Internal error occurred: {reason}",
                               details={"causes": [{"message": reason}]}) from exc
            except Denied as exc:
                message = f'admission webhook "{name}" denied the request'
                message = f"{message}: {exc.message}" if exc.message else \
                    f"{message} without explanation"
                raise ApiError(max(exc.code, 400), exc.reason, message) from exc
            if kind == MUTATING and answer is not None:
                obj = answer
                meta = obj.get("metadata") or {}
        return obj


class RequestAdmission:
    """The admission of one write: what :class:`~sandbox.kubeapi.store.ObjectStore` calls."""

    def __init__(self, dispatcher: WebhookDispatcher, target: Target, dry_run: bool) -> None:
        self.dispatcher = dispatcher
        self.target = target
        self.dry_run = dry_run

    def mutate(self, operation: str, old: JsonObject | None, new: JsonObject) -> JsonObject:
        return self.dispatcher.run(MUTATING, operation, self.target, new, old, self.dry_run)

    def validate(self, operation: str, old: JsonObject | None, new: JsonObject) -> None:
        self.dispatcher.run(VALIDATING, operation, self.target, new, old, self.dry_run)
