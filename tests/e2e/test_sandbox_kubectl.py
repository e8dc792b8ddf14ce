"""The real kubectl against the sandbox Kubernetes API, with tokens and RBAC enforced.

The sandbox provisions itself with ``kubectl apply --server-side -k``; these
tests hold the stand-in to what kubectl needs: aggregated discovery, OpenAPI v3
(so validation happens server-side), server-side apply, access reviews,
impersonation and the API's own error messages.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sandbox.common.httpserver import free_port
from sandbox.kubeapi import TokenEntry, write_token_file
from tests.e2e import kubeapi_auth_fixtures as fx
from tests.e2e.kubeapi_auth_fixtures import ALICE, NOBODY, SecureApi, needs_kubectl
from tests.processes import serving

# Fixtures are registered by binding them in this module's namespace.
secure_api = fx.secure_api
admin_client = fx.admin_client
research = fx.research

pytestmark = [pytest.mark.e2e, needs_kubectl]

MANIFESTS: list[dict[str, object]] = [
    {"apiVersion": "v1", "kind": "Namespace",
     "metadata": {"name": "research",
                  "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
    {"apiVersion": "v1", "kind": "ServiceAccount",
     "metadata": {"name": "submitter", "namespace": "research"}},
    {"apiVersion": "v1", "kind": "ConfigMap",
     "metadata": {"name": "settings", "namespace": "research"}, "data": {"steps": "1000"}},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
     "metadata": {"name": "jobset-editor", "namespace": "research"},
     "rules": [{"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"],
                "verbs": ["get", "list", "create"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
     "metadata": {"name": "team-edits-jobsets", "namespace": "research"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                 "name": "jobset-editor"},
     "subjects": [{"kind": "Group", "name": "research-team",
                   "apiGroup": "rbac.authorization.k8s.io"}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
     "metadata": {"name": "queue-reader"},
     "rules": [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"],
                "verbs": ["get", "list"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
     "metadata": {"name": "team-reads-queues"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                 "name": "queue-reader"},
     "subjects": [{"kind": "Group", "name": "research-team",
                   "apiGroup": "rbac.authorization.k8s.io"}]},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
     "metadata": {"name": "tpu-v5e"},
     "spec": {"nodeLabels": {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice"}}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
     "metadata": {"name": "research-cluster-queue"},
     "spec": {"namespaceSelector": {}, "resourceGroups": [{
         "coveredResources": ["google.com/tpu"],
         "flavors": [{"name": "tpu-v5e",
                      "resources": [{"name": "google.com/tpu", "nominalQuota": 64}]}]}]}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
     "metadata": {"name": "research-queue", "namespace": "research"},
     "spec": {"clusterQueue": "research-cluster-queue"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass",
     "metadata": {"name": "medium"}, "value": 100, "description": "default"},
    {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
     "metadata": {"name": "reconcile-slices", "namespace": "research"},
     "spec": {"holderIdentity": "nobody", "leaseDurationSeconds": 30}},
]


def write_kustomization(directory: Path, manifests: list[dict[str, object]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "resources.yaml").write_text(yaml.safe_dump_all(manifests, sort_keys=False))
    (directory / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": ["resources.yaml"]}))
    return directory


def apply(api: SecureApi, *args: str) -> str:
    return api.kubectl("apply", "--server-side", "--field-manager=accelops", *args).stdout


def test_server_side_apply_of_a_kustomization_twice_changes_nothing_the_second_time(
    secure_api: SecureApi, tmp_path: Path
) -> None:
    base = write_kustomization(tmp_path / "base", MANIFESTS)
    first = apply(secure_api, "-k", str(base))
    version_after_first = secure_api.server.store.resource_version

    second = apply(secure_api, "-k", str(base))

    assert first.count("serverside-applied") == len(MANIFESTS)
    assert second.count("serverside-applied") == len(MANIFESTS)
    assert secure_api.server.store.resource_version == version_after_first


def test_applying_a_changed_manifest_updates_only_that_object(
    secure_api: SecureApi, tmp_path: Path
) -> None:
    apply(secure_api, "-k", str(write_kustomization(tmp_path / "v1", MANIFESTS)))
    before = json.loads(secure_api.kubectl("get", "configmap", "settings", "-n", "research",
                                           "-o", "json").stdout)
    changed = [dict(m) for m in MANIFESTS]
    changed[2] = {**changed[2], "data": {"steps": "2000"}}
    version_before = secure_api.server.store.resource_version

    apply(secure_api, "-k", str(write_kustomization(tmp_path / "v2", changed)))

    after = json.loads(secure_api.kubectl("get", "configmap", "settings", "-n", "research",
                                          "-o", "json").stdout)
    assert after["data"] == {"steps": "2000"}
    assert int(after["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
    assert int(secure_api.server.store.resource_version) == int(version_before) + 1


def test_get_as_json_shows_kinds_scopes_and_namespace_labels(
    secure_api: SecureApi, tmp_path: Path
) -> None:
    manifest = tmp_path / "all.yaml"
    manifest.write_text(yaml.safe_dump_all(MANIFESTS))
    apply(secure_api, "-f", str(manifest))

    namespace = json.loads(secure_api.kubectl("get", "namespace", "research", "-o", "json").stdout)
    queues = json.loads(secure_api.kubectl("get", "clusterqueues", "-o", "json").stdout)
    bindings = yaml.safe_load(secure_api.kubectl("get", "rolebindings", "-n", "research",
                                                 "-o", "yaml").stdout)

    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert [(q["kind"], "namespace" in q["metadata"]) for q in queues["items"]] == [
        ("ClusterQueue", False)]
    assert [b["metadata"]["name"] for b in bindings["items"]] == ["team-edits-jobsets"]


def test_api_resources_lists_the_served_kinds_with_their_scope(secure_api: SecureApi) -> None:
    listed = secure_api.kubectl("api-resources", "--no-headers").stdout
    scopes = {}
    for line in listed.splitlines():
        cols = line.split()  # NAME [SHORTNAMES] APIVERSION NAMESPACED KIND
        scopes[cols[0]] = cols[-2]
    assert {name: scopes[name] for name in (
        "roles", "rolebindings", "clusterroles", "clusterrolebindings", "subjectaccessreviews",
        "selfsubjectaccessreviews", "resourceflavors", "clusterqueues", "localqueues",
        "workloadpriorityclasses", "workloads", "jobsets", "leases", "namespaces",
        "serviceaccounts", "configmaps", "events", "pods", "nodes")} == {
        "roles": "true", "rolebindings": "true", "clusterroles": "false",
        "clusterrolebindings": "false", "subjectaccessreviews": "false",
        "selfsubjectaccessreviews": "false", "resourceflavors": "false",
        "clusterqueues": "false", "localqueues": "true", "workloadpriorityclasses": "false",
        "workloads": "true", "jobsets": "true", "leases": "true", "namespaces": "false",
        "serviceaccounts": "true", "configmaps": "true", "events": "true", "pods": "true",
        "nodes": "false"}


def test_strict_validation_refuses_unknown_fields_like_the_real_api(
    secure_api: SecureApi, tmp_path: Path
) -> None:
    apply(secure_api, "-f", write_manifest(tmp_path / "ns.yaml", MANIFESTS[0]))
    bad = write_manifest(tmp_path / "bad.yaml", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "bad", "namespace": "research"}, "data": {}, "bogus": 1})

    applied = secure_api.kubectl("apply", "--server-side", "--field-manager=accelops",
                                 "-f", str(bad), check=False)
    created = secure_api.kubectl("create", "-f", str(bad), check=False)

    assert applied.returncode != 0
    assert ("failed to create typed patch object (research/bad; /v1, Kind=ConfigMap): "
            ".bogus: field not declared in schema") in applied.stderr
    assert created.returncode != 0
    assert ('ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding '
            'error: unknown field "bogus"') in created.stderr
    assert secure_api.server.store.try_get("", "configmaps", "bad", "research") is None


def test_delete_by_file_removes_the_objects(secure_api: SecureApi, tmp_path: Path) -> None:
    apply(secure_api, "-f", write_manifest(tmp_path / "ns.yaml", MANIFESTS[0]))
    objects = tmp_path / "objects.yaml"
    objects.write_text(yaml.safe_dump_all(MANIFESTS[1:]))
    apply(secure_api, "-f", str(objects))

    deleted = secure_api.kubectl("delete", "-f", str(objects)).stdout

    assert deleted.count("deleted") == len(MANIFESTS) - 1
    assert secure_api.kubectl("get", "configmaps,roles,leases", "-n", "research",
                              "-o", "name").stdout == ""


def test_auth_can_i_answers_for_impersonated_users(
    secure_api: SecureApi, research: str
) -> None:
    def can_i(*args: str) -> str:
        return secure_api.kubectl("auth", "can-i", *args, check=False).stdout.strip()

    assert can_i("delete", "nodes") == "yes"  # the admin is in system:masters
    assert can_i("create", "jobsets.jobset.x-k8s.io", "-n", research,
                 "--as", "alice", "--as-group", "research-team") == "yes"
    assert can_i("get", "jobsets.jobset.x-k8s.io", "--subresource=status", "-n", research,
                 "--as", "alice", "--as-group", "research-team") == "yes"
    assert can_i("delete", "jobsets.jobset.x-k8s.io", "-n", research,
                 "--as", "alice", "--as-group", "research-team") == "no"
    assert can_i("create", "jobsets.jobset.x-k8s.io", "-n", "default",
                 "--as", "alice", "--as-group", "research-team") == "no"
    assert can_i("list", "jobsets.jobset.x-k8s.io", "-n", research,
                 "--as", f"system:serviceaccount:{research}:submitter") == "yes"


def test_auth_can_i_list_shows_the_rules_granted_in_a_namespace(
    secure_api: SecureApi, research: str
) -> None:
    listed = secure_api.kubectl("auth", "can-i", "--list", "-n", research, entry=ALICE).stdout
    # Columns: Resources, Non-Resource URLs, Resource Names, Verbs (space-padded).
    rows = {line.split()[0]: "[" + line.rsplit("[", 1)[1] for line in listed.splitlines()[1:]
            if not line.startswith(" ")}

    assert rows["jobsets.jobset.x-k8s.io"] == "[get list create patch]"
    assert rows["jobsets.jobset.x-k8s.io/status"] == "[get]"
    assert "pods" not in rows


def test_a_user_without_a_binding_gets_the_real_forbidden_message(
    secure_api: SecureApi, research: str
) -> None:
    done = secure_api.kubectl("get", "jobsets.jobset.x-k8s.io", "-n", research,
                              entry=NOBODY, check=False)

    assert done.returncode != 0
    assert ('Error from server (Forbidden): jobsets.jobset.x-k8s.io is forbidden: User "nobody" '
            'cannot list resource "jobsets" in API group "jobset.x-k8s.io" in the namespace '
            '"research"') in done.stderr


def test_only_privileged_users_may_impersonate(secure_api: SecureApi, research: str) -> None:
    # --raw: with impersonation refused, kubectl's discovery would fail first and say less.
    done = secure_api.kubectl("get", "--raw", f"/api/v1/namespaces/{research}/pods",
                              "--as", "bob", entry=ALICE, check=False)

    assert done.returncode != 0
    assert ('users "bob" is forbidden: User "alice" cannot impersonate resource "users" in '
            'API group "" at the cluster scope') in done.stderr


def test_an_unknown_token_is_unauthorized(secure_api: SecureApi) -> None:
    stranger = TokenEntry("not-in-the-file", "mallory")

    done = secure_api.kubectl("get", "namespaces", entry=stranger, check=False)

    assert done.returncode != 0
    assert "error: You must be logged in to the server" in done.stderr


def write_manifest(path: Path, manifest: dict[str, object]) -> str:
    path.write_text(yaml.safe_dump(manifest))
    return str(path)


def test_the_module_entry_point_serves_tokens_rbac_and_the_access_log(tmp_path: Path) -> None:
    tokens = write_token_file(tmp_path / "tokens.csv", [fx.ADMIN, NOBODY])
    kubeconfig, access_log, port = tmp_path / "kubeconfig", tmp_path / "access.jsonl", free_port()
    argv = [sys.executable, "-m", "sandbox.kubeapi", "--port", str(port),
            "--token-auth-file", str(tokens), "--access-log", str(access_log),
            "--kubeconfig", str(kubeconfig)]

    with serving(argv, port, tmp_path / "kubeapi.log", ready_seconds=30):
        assert fx.KUBECTL is not None
        done = subprocess.run(
            [fx.KUBECTL, f"--kubeconfig={kubeconfig}", f"--cache-dir={tmp_path / 'cache'}",
             "create", "namespace", "research"],
            capture_output=True, text=True, timeout=fx.KUBECTL_TIMEOUT, check=False)

    assert done.returncode == 0, done.stderr
    logged = [json.loads(line) for line in access_log.read_text().splitlines()]
    assert {(line["user"], line["verb"], line["resource"], line["code"]) for line in logged
            if line["resourceRequest"]} == {("sandbox-admin", "create", "namespaces", 201)}
