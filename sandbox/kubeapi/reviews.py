"""Access reviews (Subject, SelfSubject, LocalSubject; SelfSubjectRules): answered, never kept.

The same authorizer that guards every request answers them, so "may X do Y?"
asked through the API and X actually doing Y cannot disagree. As in the real API
the reply is the request with ``status`` filled in (``allowed``, ``reason``
naming the granting binding; for a rules review, the granted rules) and answers 201.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from sandbox.kubeapi import field_errors as fe
from sandbox.kubeapi.attributes import RequestAttributes
from sandbox.kubeapi.authn import UserInfo
from sandbox.kubeapi.errors import ApiError, JsonObject
from sandbox.kubeapi.rbac import Decision, PolicyRule

GROUP = "authorization.k8s.io"
Authorize = Callable[[UserInfo, RequestAttributes], Decision]
ListRules = Callable[[UserInfo, str], tuple[PolicyRule, ...]]
_KINDS = {
    "selfsubjectrulesreviews": "SelfSubjectRulesReview",
    "subjectaccessreviews": "SubjectAccessReview",
    "selfsubjectaccessreviews": "SelfSubjectAccessReview",
    "localsubjectaccessreviews": "LocalSubjectAccessReview",
}


def _invalid(kind: str, field: str, value: Any, why: str) -> ApiError:
    return fe.invalid_error(GROUP, kind, "", [fe.invalid(field, value, why)])


def _attributes(kind: str, spec: Mapping[str, Any]) -> RequestAttributes:
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if resource is not None and non_resource is not None:
        raise _invalid(
            kind, "spec.nonResourceAttributes", "",
            "cannot be specified in combination with resourceAttributes",
        )
    if isinstance(resource, dict):
        return RequestAttributes(
            verb=str(resource.get("verb") or ""),
            api_group=str(resource.get("group") or ""),
            api_version=str(resource.get("version") or ""),
            resource=str(resource.get("resource") or ""),
            subresource=str(resource.get("subresource") or ""),
            namespace=str(resource.get("namespace") or ""),
            name=str(resource.get("name") or ""),
            is_resource_request=True,
        )
    if isinstance(non_resource, dict):
        return RequestAttributes(
            verb=str(non_resource.get("verb") or ""), path=str(non_resource.get("path") or "")
        )
    raise _invalid(
        kind, "spec.resourceAttributes", "",
        "exactly one of nonResourceAttributes or resourceAttributes must be specified",
    )


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def answer(
    resource: str,
    body: JsonObject,
    *,
    requester: UserInfo,
    namespace: str | None,
    authorize: Authorize,
    list_rules: ListRules,
) -> JsonObject:
    """The review ``body`` with its ``status``; 422 ApiError for an invalid spec."""
    kind = _KINDS[resource]
    spec = body.get("spec")
    if not isinstance(spec, dict):
        raise _invalid(kind, "spec", "", "must be an object")
    if resource == "selfsubjectrulesreviews":
        rules = list_rules(requester, str(spec.get("namespace") or ""))
        return _with_status(body, kind, _rules_status(rules))
    attributes = _attributes(kind, spec)
    if resource == "selfsubjectaccessreviews":
        subject = requester
    else:
        user, groups = str(spec.get("user") or ""), _strings(spec.get("groups"))
        if not user and not groups:
            raise _invalid(
                kind, "spec.user", user, "at least one of user or group must be specified"
            )
        subject = UserInfo(user, str(spec.get("uid") or ""), groups)
    if resource == "localsubjectaccessreviews" and attributes.namespace != namespace:
        raise _invalid(
            kind, "spec.resourceAttributes.namespace", attributes.namespace,
            "must match metadata.namespace",
        )
    decision = authorize(subject, attributes)
    status: JsonObject = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    return _with_status(body, kind, status)


def _with_status(body: JsonObject, kind: str, status: JsonObject) -> JsonObject:
    reply = copy.deepcopy(body)
    reply["apiVersion"] = f"{GROUP}/v1"
    reply["kind"] = kind
    reply["status"] = status
    return reply


def _rules_status(rules: tuple[PolicyRule, ...]) -> JsonObject:
    resource_rules: list[JsonObject] = []
    non_resource_rules: list[JsonObject] = []
    for rule in rules:
        if rule.non_resource_urls:
            non_resource_rules.append(
                {"verbs": list(rule.verbs), "nonResourceURLs": list(rule.non_resource_urls)}
            )
        if rule.resources:
            entry: JsonObject = {
                "verbs": list(rule.verbs),
                "apiGroups": list(rule.api_groups),
                "resources": list(rule.resources),
            }
            if rule.resource_names:
                entry["resourceNames"] = list(rule.resource_names)
            resource_rules.append(entry)
    return {
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": False,
    }
