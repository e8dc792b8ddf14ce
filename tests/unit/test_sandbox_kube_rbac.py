"""RBAC evaluation and request attributes of the sandbox Kubernetes API (pure, no server)."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.kubeapi.attributes import RequestAttributes, attributes_for
from sandbox.kubeapi.authn import UserInfo
from sandbox.kubeapi.rbac import Decision, Policy, authorize, policy_of

ALICE = UserInfo("alice", groups=("research-team", "system:authenticated"))
BOB = UserInfo("bob", groups=("system:authenticated",))
SUBMITTER = UserInfo("system:serviceaccount:research:submitter",
                     groups=("system:serviceaccounts", "system:serviceaccounts:research",
                             "system:authenticated"))


def role(name: str, *rules: dict[str, Any], namespace: str = "") -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"metadata": meta, "rules": list(rules)}


def binding(name: str, role_kind: str, role_name: str, *subjects: dict[str, str],
            namespace: str = "") -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"metadata": meta, "roleRef": {"kind": role_kind, "name": role_name},
            "subjects": list(subjects)}


def user(name: str) -> dict[str, str]:
    return {"kind": "User", "name": name}


def group(name: str) -> dict[str, str]:
    return {"kind": "Group", "name": name}


def rule(verbs: list[str], resources: list[str], groups: list[str] | None = None,
         names: list[str] | None = None) -> dict[str, Any]:
    return {"verbs": verbs, "apiGroups": groups if groups is not None else [""],
            "resources": resources, **({"resourceNames": names} if names else {})}


def ask(verb: str, resource: str, namespace: str = "", name: str = "", group: str = "",
        subresource: str = "") -> RequestAttributes:
    return RequestAttributes(verb=verb, api_group=group, resource=resource,
                             subresource=subresource, namespace=namespace, name=name,
                             is_resource_request=True)


def decide(policy: Policy, who: UserInfo, attributes: RequestAttributes) -> bool:
    return authorize(policy, who, attributes).allowed


POD_READER = role("pod-reader", rule(["get", "list"], ["pods"]))


def test_a_cluster_role_binding_grants_in_every_namespace_and_at_cluster_scope() -> None:
    policy = policy_of([POD_READER], [], [binding("all", "ClusterRole", "pod-reader",
                                                  user("alice"))], [])

    assert decide(policy, ALICE, ask("list", "pods", "research"))
    assert decide(policy, ALICE, ask("list", "pods", "other"))
    assert decide(policy, ALICE, ask("list", "pods"))
    assert not decide(policy, BOB, ask("list", "pods", "research"))


def test_a_role_binding_to_a_cluster_role_grants_only_in_its_namespace() -> None:
    policy = policy_of([POD_READER], [], [], [
        binding("read", "ClusterRole", "pod-reader", user("alice"), namespace="research")])

    assert decide(policy, ALICE, ask("get", "pods", "research", "p"))
    assert not decide(policy, ALICE, ask("get", "pods", "other", "p"))
    assert not decide(policy, ALICE, ask("list", "pods"))


def test_a_role_binding_uses_the_role_of_its_own_namespace() -> None:
    policy = policy_of([], [role("edit", rule(["create"], ["configmaps"]), namespace="other")],
                       [], [binding("b", "Role", "edit", user("alice"), namespace="research")])

    decision = authorize(policy, ALICE, ask("create", "configmaps", "research"))

    assert decision == Decision(
        False, 'RBAC: [role.rbac.authorization.k8s.io "edit" not found]')


def test_resource_names_restrict_a_rule_to_named_objects() -> None:
    policy = policy_of([role("one-lease", rule(["get", "update"], ["leases"],
                                               ["coordination.k8s.io"], ["reconcile"]))],
                       [], [binding("b", "ClusterRole", "one-lease", user("alice"))], [])

    assert decide(policy, ALICE, ask("update", "leases", "ops", "reconcile",
                                     "coordination.k8s.io"))
    assert not decide(policy, ALICE, ask("update", "leases", "ops", "other",
                                         "coordination.k8s.io"))
    assert not decide(policy, ALICE, ask("list", "leases", "ops", group="coordination.k8s.io"))


def test_a_subresource_is_granted_only_by_naming_it() -> None:
    jobsets = role("jobsets", rule(["get", "patch"], ["jobsets"], ["jobset.x-k8s.io"]))
    status = role("status", rule(["patch"], ["*/status"], ["jobset.x-k8s.io"]))
    only_main = policy_of([jobsets], [], [binding("b", "ClusterRole", "jobsets",
                                                  user("alice"))], [])
    any_status = policy_of([status], [], [binding("b", "ClusterRole", "status",
                                                  user("alice"))], [])
    patch_status = ask("patch", "jobsets", "research", "train", "jobset.x-k8s.io", "status")

    assert not decide(only_main, ALICE, patch_status)
    assert decide(any_status, ALICE, patch_status)
    assert not decide(any_status, ALICE, ask("patch", "jobsets", "research", "train",
                                             "jobset.x-k8s.io"))


def test_wildcards_match_any_verb_group_and_resource() -> None:
    policy = policy_of([role("all", {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})],
                       [], [binding("b", "ClusterRole", "all", group("research-team"))], [])

    assert decide(policy, ALICE, ask("deletecollection", "workloads", "x",
                                     group="kueue.x-k8s.io"))
    assert decide(policy, ALICE, ask("patch", "nodes", subresource="status"))
    assert not decide(policy, BOB, ask("get", "nodes", name="n"))


def test_the_api_group_must_match() -> None:
    policy = policy_of([POD_READER], [], [binding("b", "ClusterRole", "pod-reader",
                                                  user("alice"))], [])

    assert not decide(policy, ALICE, ask("list", "pods", "research", group="metrics.k8s.io"))


def test_service_account_subjects_default_to_the_binding_namespace() -> None:
    policy = policy_of([POD_READER], [], [], [
        binding("b", "ClusterRole", "pod-reader", {"kind": "ServiceAccount", "name": "submitter"},
                namespace="research")])

    decision = authorize(policy, SUBMITTER, ask("list", "pods", "research"))

    assert decision.allowed
    assert decision.reason == (
        'RBAC: allowed by RoleBinding "b/research" of ClusterRole "pod-reader" to '
        'ServiceAccount "submitter/research"')


def test_a_service_account_group_binding_covers_every_account_of_the_namespace() -> None:
    policy = policy_of([POD_READER], [], [binding(
        "b", "ClusterRole", "pod-reader", group("system:serviceaccounts:research"))], [])

    assert decide(policy, SUBMITTER, ask("get", "pods", "x", "p"))
    assert not decide(policy, ALICE, ask("get", "pods", "x", "p"))


def test_non_resource_urls_match_exactly_or_by_prefix() -> None:
    policy = policy_of([role("metrics", {"verbs": ["get"],
                                         "nonResourceURLs": ["/metrics", "/logs/*"]})],
                       [], [binding("b", "ClusterRole", "metrics", user("alice"))], [])

    def get(path: str) -> RequestAttributes:
        return RequestAttributes(verb="get", path=path)

    assert decide(policy, ALICE, get("/metrics"))
    assert decide(policy, ALICE, get("/logs/kubelet"))
    assert not decide(policy, ALICE, get("/metrics/extra"))
    assert not decide(policy, ALICE, RequestAttributes(verb="post", path="/metrics"))


def test_discovery_is_open_to_authenticated_users_only() -> None:
    empty = policy_of([], [], [], [])
    anonymous = UserInfo("system:anonymous", groups=("system:unauthenticated",))

    assert decide(empty, BOB, attributes_for("GET", "/apis/kueue.x-k8s.io/v1beta1"))
    assert decide(empty, BOB, ask("create", "selfsubjectaccessreviews",
                                  group="authorization.k8s.io"))
    assert not decide(empty, anonymous, attributes_for("GET", "/apis"))
    assert decide(empty, anonymous, attributes_for("GET", "/version"))


def test_system_masters_is_allowed_everything_without_a_binding() -> None:
    admin = UserInfo("admin", groups=("system:masters",))

    assert authorize(policy_of([], [], [], []), admin, ask("delete", "nodes", name="n")) == (
        Decision(True))


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/namespaces/research/pods", {},
         ask("list", "pods", "research")),
        ("GET", "/api/v1/pods", {"watch": ["true"]}, ask("watch", "pods")),
        ("GET", "/api/v1/namespaces/research/pods", {"fieldSelector": ["metadata.name=p"]},
         ask("list", "pods", "research", "p")),
        ("DELETE", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/r/jobsets", {},
         ask("deletecollection", "jobsets", "r", group="jobset.x-k8s.io")),
        ("PATCH", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/r/jobsets/t/status", {},
         ask("patch", "jobsets", "r", "t", "jobset.x-k8s.io", "status")),
        ("PUT", "/api/v1/namespaces/research", {}, ask("update", "namespaces", "research",
                                                       "research")),
        ("PUT", "/api/v1/namespaces/research/finalize", {},
         ask("update", "namespaces", "research", "research", subresource="finalize")),
        ("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {},
         ask("create", "subjectaccessreviews", group="authorization.k8s.io")),
        ("GET", "/api/v1/nodes/n", {}, ask("get", "nodes", name="n")),
    ],
)
def test_request_attributes_follow_kube_apiserver(
    method: str, path: str, query: dict[str, list[str]], expected: RequestAttributes
) -> None:
    got = attributes_for(method, path, query)

    assert (got.verb, got.api_group, got.resource, got.subresource, got.namespace,
            got.name, got.is_resource_request) == (
        expected.verb, expected.api_group, expected.resource, expected.subresource,
        expected.namespace, expected.name, True)


@pytest.mark.parametrize("path", ["/api", "/api/v1", "/apis", "/apis/kueue.x-k8s.io",
                                  "/apis/kueue.x-k8s.io/v1beta1", "/version", "/openapi/v3"])
def test_discovery_paths_are_non_resource_requests(path: str) -> None:
    assert attributes_for("GET", path) == RequestAttributes(verb="get", path=path)
