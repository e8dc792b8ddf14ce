"""Authentication, RBAC, access reviews and the access log, through the official client.

The server runs with a token file (as kube-apiserver's ``--token-auth-file``);
each client authenticates with its own kubeconfig token.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from sandbox.kubeapi import TokenEntry, install_crds, start_kube_api
from tests.e2e import kubeapi_auth_fixtures as fx
from tests.e2e.kubeapi_auth_fixtures import ALICE, NOBODY, SUBMITTER, SecureApi
from tests.e2e.kubeapi_fixtures import JOB_TEMPLATE

# Fixtures are registered by binding them in this module's namespace.
secure_api = fx.secure_api
admin_client = fx.admin_client
research = fx.research

pytestmark = pytest.mark.e2e

JOBSETS = ("jobset.x-k8s.io", "v1alpha2")


def jobset(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name},
            "spec": {"replicatedJobs": [{"name": "workers", "replicas": 1,
                                         "template": JOB_TEMPLATE}], **spec}}


def message_of(exc: client.ApiException, status: int) -> str:
    """The message of the Status body of a failure answered with ``status``."""
    body = json.loads(exc.body)
    assert (exc.status, body["kind"], body["code"]) == (status, "Status", status)
    return str(body["message"])


def review(api: client.ApiClient, spec: dict[str, Any]) -> Any:
    return client.AuthorizationV1Api(api).create_subject_access_review(
        {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})


def test_a_user_without_a_binding_gets_403_with_the_real_message(
    secure_api: SecureApi, research: str
) -> None:
    with secure_api.client(NOBODY) as api, pytest.raises(client.ApiException) as caught:
        client.CoreV1Api(api).list_namespaced_pod(research)

    assert message_of(caught.value, 403) == (
        'pods is forbidden: User "nobody" cannot list resource "pods" in API group "" in the '
        'namespace "research"')


def test_a_role_binding_grants_only_in_its_own_namespace(
    secure_api: SecureApi, research: str, admin_client: client.ApiClient
) -> None:
    client.CoreV1Api(admin_client).create_namespace({"metadata": {"name": "other"}})
    with secure_api.client(ALICE) as api:
        custom = client.CustomObjectsApi(api)
        custom.create_namespaced_custom_object(*JOBSETS, research, "jobsets", jobset("train"))
        with pytest.raises(client.ApiException) as caught:
            custom.create_namespaced_custom_object(*JOBSETS, "other", "jobsets", jobset("train"))

    assert message_of(caught.value, 403) == (
        'jobsets.jobset.x-k8s.io is forbidden: User "alice" cannot create resource "jobsets" in '
        'API group "jobset.x-k8s.io" in the namespace "other"')


def test_a_subresource_needs_its_own_grant(
    secure_api: SecureApi, research: str, admin_client: client.ApiClient
) -> None:
    client.CustomObjectsApi(admin_client).create_namespaced_custom_object(
        *JOBSETS, research, "jobsets", jobset("train"))
    with secure_api.client(ALICE) as api:
        custom = client.CustomObjectsApi(api)
        custom.get_namespaced_custom_object_status(*JOBSETS, research, "jobsets", "train")
        with pytest.raises(client.ApiException) as caught:
            custom.patch_namespaced_custom_object_status(
                *JOBSETS, research, "jobsets", "train", {"status": {"restarts": 1}})

    assert message_of(caught.value, 403) == (
        'jobsets.jobset.x-k8s.io "train" is forbidden: User "alice" cannot patch resource '
        '"jobsets/status" in API group "jobset.x-k8s.io" in the namespace "research"')


def test_subject_access_review_names_the_binding_that_allows(
    admin_client: client.ApiClient, research: str
) -> None:
    allowed = review(admin_client, {
        "user": "alice", "groups": ["research-team"],
        "resourceAttributes": {"namespace": research, "verb": "create",
                               "group": "jobset.x-k8s.io", "resource": "jobsets"}})
    denied = review(admin_client, {
        "user": "alice", "groups": ["research-team"],
        "resourceAttributes": {"namespace": research, "verb": "delete",
                               "group": "jobset.x-k8s.io", "resource": "jobsets"}})

    assert allowed.status.allowed is True
    assert allowed.status.reason == (
        'RBAC: allowed by RoleBinding "team-edits-jobsets/research" of Role "jobset-editor" '
        'to Group "research-team"')
    assert denied.status.allowed is False


def test_subject_access_review_matches_service_account_subjects(
    admin_client: client.ApiClient, research: str
) -> None:
    answer = review(admin_client, {
        "user": SUBMITTER.user, "groups": list(SUBMITTER.groups),
        "resourceAttributes": {"namespace": research, "verb": "list",
                               "group": "jobset.x-k8s.io", "resource": "jobsets"}})

    assert answer.status.allowed is True
    assert answer.status.reason.endswith('to ServiceAccount "submitter/research"')


def test_subject_access_review_of_a_discovery_url_follows_the_default_roles(
    admin_client: client.ApiClient,
) -> None:
    def may_get(path: str, *groups: str) -> bool:
        answer = review(admin_client, {"user": "someone", "groups": list(groups),
                                       "nonResourceAttributes": {"path": path, "verb": "get"}})
        return bool(answer.status.allowed)

    assert may_get("/apis/kueue.x-k8s.io/v1beta1", "system:authenticated")
    assert not may_get("/apis/kueue.x-k8s.io/v1beta1", "system:unauthenticated")
    assert may_get("/version", "system:unauthenticated")


def test_subject_access_review_without_user_or_groups_is_invalid(
    admin_client: client.ApiClient,
) -> None:
    with pytest.raises(client.ApiException) as caught:
        review(admin_client, {"resourceAttributes": {"verb": "get", "resource": "pods"}})

    assert message_of(caught.value, 422) == (
        'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": '
        "at least one of user or group must be specified")


def test_self_subject_access_review_answers_for_the_caller(
    secure_api: SecureApi, research: str
) -> None:
    with secure_api.client(ALICE) as api:
        answer = client.AuthorizationV1Api(api).create_self_subject_access_review({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"namespace": research, "verb": "get",
                                            "group": "jobset.x-k8s.io",
                                            "resource": "jobsets", "subresource": "status"}}})

    assert answer.status.allowed is True


def test_an_unknown_token_answers_401(secure_api: SecureApi) -> None:
    with secure_api.client(TokenEntry("forged", "mallory")) as api, \
            pytest.raises(client.ApiException) as caught:
        client.CoreV1Api(api).list_namespace()

    assert message_of(caught.value, 401) == "Unauthorized"


def test_a_request_without_a_token_is_anonymous(secure_api: SecureApi) -> None:
    with secure_api.client(TokenEntry("", "anonymous")) as api:
        version = client.VersionApi(api).get_code()
        with pytest.raises(client.ApiException) as caught:
            client.CoreV1Api(api).list_namespace()

    assert version.git_version
    assert message_of(caught.value, 403).endswith(
        'User "system:anonymous" cannot list resource "namespaces" in API group "" at the '
        "cluster scope")


def test_the_access_log_records_each_decision_with_the_authorizer_attributes(
    secure_api: SecureApi, research: str
) -> None:
    with secure_api.client(ALICE) as api:
        custom = client.CustomObjectsApi(api)
        custom.create_namespaced_custom_object(*JOBSETS, research, "jobsets", jobset("train"))
        with pytest.raises(client.ApiException):
            custom.delete_namespaced_custom_object(*JOBSETS, research, "jobsets", "train")

    alice = [line for line in secure_api.log_lines() if line["user"] == "alice"]
    assert [{k: line[k] for k in ("verb", "apiGroup", "resource", "subresource", "namespace",
                                  "name", "allowed", "code")} for line in alice] == [
        {"verb": "create", "apiGroup": "jobset.x-k8s.io", "resource": "jobsets",
         "subresource": "", "namespace": research, "name": "", "allowed": True, "code": 201},
        {"verb": "delete", "apiGroup": "jobset.x-k8s.io", "resource": "jobsets",
         "subresource": "", "namespace": research, "name": "train", "allowed": False,
         "code": 403},
    ]
    assert alice[0]["groups"] == ["research-team", "system:authenticated"]


def test_server_side_apply_refuses_an_unknown_field_whatever_the_validation(
    admin_client: client.ApiClient, research: str
) -> None:
    with pytest.raises(client.ApiException) as caught:
        client.CustomObjectsApi(admin_client).patch_namespaced_custom_object(
            *JOBSETS, research, "jobsets", "train", jobset("train", replicas=2),
            field_manager="accelops", _content_type="application/apply-patch+yaml")

    assert message_of(caught.value, 500) == (
        "failed to create typed patch object (research/train; jobset.x-k8s.io/v1alpha2, "
        "Kind=JobSet): .spec.replicas: field not declared in schema")


def test_a_create_drops_unknown_fields_with_a_warning_by_default(
    admin_client: client.ApiClient, research: str
) -> None:
    path = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{research}/jobsets"
    response = admin_client.call_api(
        "POST", admin_client.configuration.host + path,
        {"Content-Type": "application/json", "Authorization": f"Bearer {fx.ADMIN.token}"},
        jobset("train", replicas=2))
    response.read()
    created = json.loads(response.data)

    assert response.status == 201
    assert "replicas" not in created["spec"]
    assert response.getheader("Warning") == '299 - "unknown field \\"spec.replicas\\""'


def test_without_a_token_file_everything_is_allowed_and_still_logged(tmp_path: Path) -> None:
    log = tmp_path / "access.jsonl"
    server = start_kube_api(access_log=log)
    install_crds(server.store)
    try:
        with fx.config.new_client_from_config(
                config_file=str(server.write_kubeconfig(tmp_path / "kubeconfig"))) as api:
            client.CoreV1Api(api).create_namespace({"metadata": {"name": "open"}})
    finally:
        server.stop()

    assert server.url.startswith("http://")
    [line] = [json.loads(text) for text in log.read_text().splitlines()]
    assert (line["user"], line["verb"], line["resource"], line["allowed"], line["code"]) == (
        "system:anonymous", "create", "namespaces", True, 201)
