"""RBAC evaluation, pure: request attributes + roles and bindings -> allowed, and why.

The rules are those of kube-apiserver's RBAC authorizer (``plugin/pkg/auth/
authorizer/rbac``), so a grant that works here works on GKE and the reverse:

* ClusterRoleBindings apply everywhere; RoleBindings only to requests in their
  namespace, and may reference a ClusterRole (its rules then apply in that
  namespace only); cluster-scoped and non-resource requests see ClusterRoleBindings only;
* a rule matches when verb, API group, resource (``res``, ``res/sub``, ``*``,
  ``*/sub``) and, if listed, the resource name all match; ``nonResourceURLs``
  match exactly or by a trailing ``*`` prefix;
* subjects: User by name, Group by membership, ServiceAccount as
  ``system:serviceaccount:NS:NAME`` (NS defaults to the binding's namespace);
* ``system:masters`` is allowed everything before RBAC is consulted, as the
  privileged-group authorizer does; RBAC never denies, it only fails to allow;
* the default discovery roles (``system:discovery``, ``system:basic-user``,
  ``system:public-info-viewer``) and their bindings are always present, as a
  real cluster's bootstrap policy is.

Not implemented: aggregated ClusterRoles (``aggregationRule``) and the
escalation check on writing roles and bindings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sandbox.kubeapi.attributes import RequestAttributes
from sandbox.kubeapi.authn import AUTHENTICATED, MASTERS, UNAUTHENTICATED, UserInfo

RBAC_GROUP = "rbac.authorization.k8s.io"


@dataclass(frozen=True)
class PolicyRule:
    """One rule of a Role or ClusterRole."""

    verbs: tuple[str, ...]
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()


@dataclass(frozen=True)
class Subject:
    """Who a binding grants to: kind User, Group or ServiceAccount."""

    kind: str
    name: str
    namespace: str = ""

    def describe(self, binding_namespace: str) -> str:
        if self.kind == "ServiceAccount":
            return f'{self.kind} "{self.name}/{self.namespace or binding_namespace}"'
        return f'{self.kind} "{self.name}"'


@dataclass(frozen=True)
class Binding:
    """A RoleBinding (``namespace`` set) or ClusterRoleBinding (``namespace`` empty)."""

    name: str
    role_kind: str
    role_name: str
    subjects: tuple[Subject, ...]
    namespace: str = ""

    def describe(self, subject: Subject) -> str:
        if self.namespace:
            return (
                f'RoleBinding "{self.name}/{self.namespace}" of {self.role_kind} '
                f'"{self.role_name}" to {subject.describe(self.namespace)}'
            )
        return (
            f'ClusterRoleBinding "{self.name}" of {self.role_kind} "{self.role_name}" '
            f"to {subject.describe('')}"
        )


@dataclass(frozen=True)
class Policy:
    """All roles and bindings the authorizer consults."""

    cluster_roles: Mapping[str, tuple[PolicyRule, ...]]
    roles: Mapping[tuple[str, str], tuple[PolicyRule, ...]]  # (namespace, name)
    cluster_role_bindings: Sequence[Binding]
    role_bindings: Sequence[Binding]


@dataclass(frozen=True)
class Decision:
    """The authorizer's answer; ``reason`` names the granting binding, or what went wrong."""

    allowed: bool
    reason: str = ""


# ---------------------------------------------------------------------- matching


def _verb_matches(rule: PolicyRule, verb: str) -> bool:
    return "*" in rule.verbs or verb in rule.verbs


def _group_matches(rule: PolicyRule, group: str) -> bool:
    return "*" in rule.api_groups or group in rule.api_groups


def _resource_matches(rule: PolicyRule, combined: str, subresource: str) -> bool:
    for resource in rule.resources:
        if resource in ("*", combined):
            return True
        if subresource and resource == f"*/{subresource}":
            return True
    return False


def _name_matches(rule: PolicyRule, name: str) -> bool:
    return not rule.resource_names or (bool(name) and name in rule.resource_names)


def _url_matches(rule: PolicyRule, path: str) -> bool:
    for url in rule.non_resource_urls:
        if url in ("*", path):
            return True
        if url.endswith("*") and path.startswith(url[:-1]):
            return True
    return False


def rule_allows(attributes: RequestAttributes, rule: PolicyRule) -> bool:
    """Whether one rule grants the request (``RuleAllows`` in kube-apiserver)."""
    if not _verb_matches(rule, attributes.verb):
        return False
    if not attributes.is_resource_request:
        return _url_matches(rule, attributes.path)
    combined = attributes.resource
    if attributes.subresource:
        combined += "/" + attributes.subresource
    return (
        _group_matches(rule, attributes.api_group)
        and _resource_matches(rule, combined, attributes.subresource)
        and _name_matches(rule, attributes.name)
    )


def applies_to(user: UserInfo, subject: Subject, namespace: str) -> bool:
    """Whether a binding subject is this user (``appliesToUser`` in kube-apiserver)."""
    if subject.kind == "User":
        return user.name == subject.name
    if subject.kind == "Group":
        return subject.name in user.groups
    if subject.kind == "ServiceAccount":
        account_namespace = subject.namespace or namespace
        return bool(account_namespace) and (
            user.name == f"system:serviceaccount:{account_namespace}:{subject.name}"
        )
    return False


# ---------------------------------------------------------------------- evaluation


def authorize(policy: Policy, user: UserInfo, attributes: RequestAttributes) -> Decision:
    """Allowed by system:masters, a ClusterRoleBinding, or a RoleBinding of the request's
    namespace; otherwise not allowed, with missing roles named in the reason."""
    if MASTERS in user.groups:
        return Decision(True)
    errors: list[str] = []
    candidates: list[Binding] = [*BOOTSTRAP_BINDINGS, *policy.cluster_role_bindings]
    if attributes.namespace:
        candidates += [b for b in policy.role_bindings if b.namespace == attributes.namespace]
    for binding in candidates:
        subject = next(
            (s for s in binding.subjects if applies_to(user, s, binding.namespace)), None
        )
        if subject is None:
            continue
        rules = _rules_of(policy, binding)
        if rules is None:
            errors.append(
                f'{binding.role_kind.lower()}.{RBAC_GROUP} "{binding.role_name}" not found'
            )
            continue
        if any(rule_allows(attributes, rule) for rule in rules):
            return Decision(True, f"RBAC: allowed by {binding.describe(subject)}")
    return Decision(False, f"RBAC: [{', '.join(errors)}]" if errors else "")


def rules_for(policy: Policy, user: UserInfo, namespace: str) -> tuple[PolicyRule, ...]:
    """Every rule granted to ``user`` in ``namespace`` (what SelfSubjectRulesReview lists)."""
    if MASTERS in user.groups:
        return (PolicyRule(("*",), ("*",), ("*",)), PolicyRule(("*",), non_resource_urls=("*",)))
    candidates: list[Binding] = [*BOOTSTRAP_BINDINGS, *policy.cluster_role_bindings]
    candidates += [b for b in policy.role_bindings if namespace and b.namespace == namespace]
    granted: list[PolicyRule] = []
    for binding in candidates:
        if any(applies_to(user, s, binding.namespace) for s in binding.subjects):
            granted += _rules_of(policy, binding) or ()
    return tuple(granted)


def _rules_of(policy: Policy, binding: Binding) -> tuple[PolicyRule, ...] | None:
    if binding.role_kind == "ClusterRole":
        found = policy.cluster_roles.get(binding.role_name)
        return found if found is not None else BOOTSTRAP_ROLES.get(binding.role_name)
    if binding.role_kind == "Role" and binding.namespace:
        return policy.roles.get((binding.namespace, binding.role_name))
    return None


# ---------------------------------------------------------------------- parsing objects


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def rules_of_role(role: Mapping[str, Any]) -> tuple[PolicyRule, ...]:
    """The rules of a Role or ClusterRole object (JSON as stored)."""
    return tuple(
        PolicyRule(
            verbs=_strings(rule.get("verbs")),
            api_groups=_strings(rule.get("apiGroups")),
            resources=_strings(rule.get("resources")),
            resource_names=_strings(rule.get("resourceNames")),
            non_resource_urls=_strings(rule.get("nonResourceURLs")),
        )
        for rule in role.get("rules") or []
        if isinstance(rule, dict)
    )


def binding_of(obj: Mapping[str, Any]) -> Binding:
    """A RoleBinding or ClusterRoleBinding object (JSON as stored) as a :class:`Binding`."""
    meta = obj.get("metadata") or {}
    ref = obj.get("roleRef") or {}
    return Binding(
        name=str(meta.get("name", "")),
        namespace=str(meta.get("namespace") or ""),
        role_kind=str(ref.get("kind", "")),
        role_name=str(ref.get("name", "")),
        subjects=tuple(
            Subject(str(s.get("kind", "")), str(s.get("name", "")), str(s.get("namespace") or ""))
            for s in obj.get("subjects") or []
            if isinstance(s, dict)
        ),
    )


def policy_of(
    cluster_roles: Iterable[Mapping[str, Any]],
    roles: Iterable[Mapping[str, Any]],
    cluster_role_bindings: Iterable[Mapping[str, Any]],
    role_bindings: Iterable[Mapping[str, Any]],
) -> Policy:
    """A :class:`Policy` from stored objects."""

    def key(obj: Mapping[str, Any]) -> tuple[str, str]:
        meta = obj.get("metadata") or {}
        return str(meta.get("namespace") or ""), str(meta.get("name", ""))

    return Policy(
        cluster_roles={key(r)[1]: rules_of_role(r) for r in cluster_roles},
        roles={key(r): rules_of_role(r) for r in roles},
        cluster_role_bindings=[binding_of(b) for b in cluster_role_bindings],
        role_bindings=[binding_of(b) for b in role_bindings],
    )


# ---------------------------------------------------------------------- bootstrap policy

BOOTSTRAP_ROLES: Mapping[str, tuple[PolicyRule, ...]] = {
    "system:discovery": (
        PolicyRule(
            verbs=("get",),
            non_resource_urls=(
                "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                "/openapi/*", "/readyz", "/version", "/version/",
            ),
        ),
    ),
    "system:basic-user": (
        PolicyRule(
            verbs=("create",),
            api_groups=("authorization.k8s.io",),
            resources=("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
        ),
        PolicyRule(
            verbs=("create",),
            api_groups=("authentication.k8s.io",),
            resources=("selfsubjectreviews",),
        ),
    ),
    "system:public-info-viewer": (
        PolicyRule(
            verbs=("get",),
            non_resource_urls=("/healthz", "/livez", "/readyz", "/version", "/version/"),
        ),
    ),
}

BOOTSTRAP_BINDINGS: tuple[Binding, ...] = (
    Binding("system:discovery", "ClusterRole", "system:discovery",
            (Subject("Group", AUTHENTICATED),)),
    Binding("system:basic-user", "ClusterRole", "system:basic-user",
            (Subject("Group", AUTHENTICATED),)),
    Binding("system:public-info-viewer", "ClusterRole", "system:public-info-viewer",
            (Subject("Group", AUTHENTICATED), Subject("Group", UNAUTHENTICATED))),
)
