"""The sandbox Kubernetes API, driven over real sockets by the official client."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client, config

from sandbox.kubeapi import ApiError, KubeApiServer, ObjectStore, start_kube_api
from tests.e2e import kubeapi_fixtures as fx

FIXED_NOW = fx.FIXED_NOW
JOBSET_GROUP = fx.JOBSET_GROUP
JOBSET_VERSION = fx.JOBSET_VERSION
FakeClock = fx.FakeClock
JobSets = fx.JobSets
api_client_for = fx.api_client_for
jobset = fx.jobset

# Fixtures are registered by binding them in this module's namespace.
clock = fx.clock
kube_api = fx.kube_api
kube_client = fx.kube_client
core = fx.core
custom = fx.custom
namespace = fx.namespace
jobsets = fx.jobsets

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]


def status_of(exc: client.ApiException) -> dict[str, Any]:
    body = json.loads(exc.body)
    assert body["kind"] == "Status"
    assert body["status"] == "Failure"
    assert body["code"] == exc.status
    return body


def pod(name: str, labels: dict[str, str] | None = None) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1PodSpec(containers=[client.V1Container(name="main", image="busybox")]),
    )


def raw_request(
    server: KubeApiServer, method: str, path: str, body: bytes | None = None, content_type: str = ""
) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(server.url + path, data=body, method=method)
    if content_type:
        request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


# ---------------------------------------------------------------- client setup


def test_kubeconfig_points_the_official_client_at_the_sandbox(
    kube_api: KubeApiServer, tmp_path: Path
) -> None:
    configuration = client.Configuration()
    config.load_kube_config(
        config_file=str(kube_api.write_kubeconfig(tmp_path / "kubeconfig")),
        client_configuration=configuration,
    )
    assert configuration.host == kube_api.url
    assert configuration.host.startswith("http://127.0.0.1:")
    assert configuration.api_key["BearerToken"].startswith("Bearer ")


def test_version_endpoint_reports_a_git_version(kube_client: client.ApiClient) -> None:
    info = client.VersionApi(kube_client).get_code()
    assert info.git_version == "v1.31.0"
    assert (info.major, info.minor) == ("1", "31")


def test_discovery_lists_the_core_version_and_known_groups(kube_client: client.ApiClient) -> None:
    assert client.CoreApi(kube_client).get_api_versions().versions == ["v1"]
    groups = {g.name: g for g in client.ApisApi(kube_client).get_api_versions().groups}
    assert groups["jobset.x-k8s.io"].preferred_version.version == "v1alpha2"
    resources = client.CoreV1Api(kube_client).get_api_resources().resources
    pods = next(r for r in resources if r.name == "pods")
    assert (pods.kind, pods.namespaced) == ("Pod", True)


# ---------------------------------------------------------------- core objects


def test_created_namespace_is_active_and_listed(core: client.CoreV1Api, namespace: str) -> None:
    read = core.read_namespace(namespace)
    assert read.status.phase == "Active"
    assert read.kind == "Namespace"
    assert namespace in [ns.metadata.name for ns in core.list_namespace().items]


def test_create_answers_201_with_server_maintained_metadata(
    core: client.CoreV1Api, namespace: str
) -> None:
    _, code, _ = core.create_namespaced_config_map_with_http_info(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cfg"), data={"a": "1"})
    )
    read = core.read_namespaced_config_map("cfg", namespace)
    assert code == 201
    assert len(read.metadata.uid) == 36
    assert int(read.metadata.resource_version) > 0
    assert read.metadata.generation == 1
    assert read.metadata.creation_timestamp == FIXED_NOW
    assert read.metadata.namespace == namespace


def test_creation_timestamp_follows_the_injected_clock(
    core: client.CoreV1Api, namespace: str, clock: FakeClock
) -> None:
    clock.now = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
    created = core.create_namespaced_pod(namespace, pod("late"))
    assert created.metadata.creation_timestamp == clock.now


def test_nodes_are_cluster_scoped(core: client.CoreV1Api, kube_api: KubeApiServer) -> None:
    node = client.V1Node(
        metadata=client.V1ObjectMeta(name="tpu-node-1", labels={"pool": "v5e"}),
        status=client.V1NodeStatus(capacity={"google.com/tpu": "4"}),
    )
    core.create_node(node)
    read = core.read_node("tpu-node-1")
    code, body = raw_request(kube_api, "GET", "/api/v1/namespaces/default/nodes/tpu-node-1")
    assert read.metadata.namespace is None
    assert read.status.capacity == {"google.com/tpu": "4"}
    assert [n.metadata.name for n in core.list_node(label_selector="pool=v5e").items] == [
        "tpu-node-1"
    ]
    assert (code, body["reason"]) == (404, "NotFound")


def test_pod_in_a_missing_namespace_answers_404_namespace_not_found(
    core: client.CoreV1Api,
) -> None:
    with pytest.raises(client.ApiException) as caught:
        core.create_namespaced_pod("ghost", pod("p"))
    body = status_of(caught.value)
    assert caught.value.status == 404
    assert body["message"] == 'namespaces "ghost" not found'
    assert body["details"] == {"name": "ghost", "kind": "namespaces"}


def test_listing_pods_without_a_namespace_spans_all_namespaces(core: client.CoreV1Api) -> None:
    for ns in ("ns-1", "ns-2"):
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
        core.create_namespaced_pod(ns, pod("worker"))
    listed = core.list_pod_for_all_namespaces()
    assert [(p.metadata.namespace, p.metadata.name) for p in listed.items] == [
        ("ns-1", "worker"),
        ("ns-2", "worker"),
    ]
    assert listed.kind == "PodList"
    assert int(listed.metadata.resource_version) >= 4


def test_deleting_a_pod_returns_the_pod(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod("doomed"))
    deleted = core.delete_namespaced_pod("doomed", namespace)
    assert deleted.metadata.name == "doomed"
    with pytest.raises(client.ApiException) as caught:
        core.read_namespaced_pod("doomed", namespace)
    assert caught.value.status == 404


def test_deleting_a_configmap_returns_a_success_status(
    core: client.CoreV1Api, namespace: str
) -> None:
    created = core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cfg"))
    )
    deleted = core.delete_namespaced_config_map(
        "cfg", namespace, body=client.V1DeleteOptions(propagation_policy="Foreground")
    )
    assert deleted["status"] == "Success"
    assert deleted["details"] == {"name": "cfg", "kind": "configmaps", "uid": created.metadata.uid}


def test_configmap_replace_changes_data(core: client.CoreV1Api, namespace: str) -> None:
    created = core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cfg"), data={"a": "1"})
    )
    created.data = {"b": "2"}
    replaced = core.replace_namespaced_config_map("cfg", namespace, created)
    assert replaced.data == {"b": "2"}
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)


def test_strategic_merge_patch_on_a_pod_merges_labels(
    core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, pod("p", {"a": "1"}))
    patched = core.patch_namespaced_pod("p", namespace, {"metadata": {"labels": {"b": "2"}}})
    assert patched.metadata.labels == {"a": "1", "b": "2"}


def test_deleting_a_namespace_deletes_its_contents(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod("p"))
    core.delete_namespace(namespace)
    assert core.list_pod_for_all_namespaces().items == []
    assert namespace not in [ns.metadata.name for ns in core.list_namespace().items]


# ---------------------------------------------------------------- JobSets: create/get/list


def test_jobset_create_answers_201_and_get_returns_it(
    jobsets: JobSets, custom: client.CustomObjectsApi, namespace: str
) -> None:
    _, code, _ = custom.create_namespaced_custom_object_with_http_info(
        JOBSET_GROUP, JOBSET_VERSION, namespace, "jobsets", jobset("train")
    )
    read = jobsets.get("train")
    assert code == 201
    assert read["kind"] == "JobSet"
    assert read["metadata"]["namespace"] == namespace
    assert read["spec"]["replicatedJobs"][0]["name"] == "workers"


def test_duplicate_create_answers_409_already_exists(jobsets: JobSets) -> None:
    jobsets.create(jobset("train"))
    with pytest.raises(client.exceptions.ConflictException) as caught:
        jobsets.create(jobset("train"))
    body = status_of(caught.value)
    assert caught.value.status == 409
    assert body["reason"] == "AlreadyExists"
    assert body["message"] == 'jobsets.jobset.x-k8s.io "train" already exists'
    assert body["details"] == {"name": "train", "group": JOBSET_GROUP, "kind": "jobsets"}


def test_missing_jobset_answers_404_not_found(jobsets: JobSets) -> None:
    with pytest.raises(client.exceptions.NotFoundException) as caught:
        jobsets.get("nope")
    assert status_of(caught.value)["reason"] == "NotFound"


def test_generate_name_creates_distinct_names(jobsets: JobSets) -> None:
    body = jobset("")
    body["metadata"] = {"generateName": "train-"}
    names = {jobsets.create(body)["metadata"]["name"] for _ in range(3)}
    assert len(names) == 3
    assert all(name.startswith("train-") and len(name) == len("train-") + 5 for name in names)


@pytest.mark.parametrize("bad_name", ["Train", "train_1", "-train", ""])
def test_invalid_or_missing_name_answers_422_invalid(jobsets: JobSets, bad_name: str) -> None:
    with pytest.raises(client.exceptions.UnprocessableEntityException) as caught:
        jobsets.create(jobset(bad_name))
    body = status_of(caught.value)
    assert body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "metadata.name"


def test_a_bad_name_and_a_bad_label_key_are_refused_in_kube_apiservers_words(
        core: client.CoreV1Api, namespace: str) -> None:
    with pytest.raises(client.exceptions.UnprocessableEntityException) as bad_name:
        core.create_namespaced_pod(namespace, pod("Train"))
    with pytest.raises(client.exceptions.UnprocessableEntityException) as bad_label:
        core.create_namespaced_pod(namespace, pod("train", labels={"team/": "ml"}))

    assert status_of(bad_name.value)["message"] == (
        'Pod "Train" is invalid: metadata.name: Invalid value: "Train": a lowercase RFC 1123 '
        "subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
        "start and end with an alphanumeric character (e.g. 'example.com', regex used for "
        "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
    body = status_of(bad_label.value)
    assert body["message"].startswith(
        'Pod "train" is invalid: [metadata.labels: Invalid value: "team/": name part must be '
        'non-empty, metadata.labels: Invalid value: "team/": name part must consist of')
    assert body["details"]["causes"][0] == {
        "reason": "FieldValueInvalid", "field": "metadata.labels",
        "message": 'Invalid value: "team/": name part must be non-empty'}


def test_body_namespace_differing_from_the_url_answers_400(jobsets: JobSets) -> None:
    body = jobset("train")
    body["metadata"]["namespace"] = "elsewhere"
    with pytest.raises(client.exceptions.BadRequestException) as caught:
        jobsets.create(body)
    assert "does not match the namespace" in status_of(caught.value)["message"]


@pytest.fixture
def labelled_jobsets(jobsets: JobSets) -> JobSets:
    for name, labels in (
        ("a", {"env": "prod", "tier": "1"}),
        ("b", {"env": "dev", "tier": "2"}),
        ("c", {"team": "ml"}),
    ):
        body = jobset(name)
        body["metadata"]["labels"] = labels
        jobsets.create(body)
    return jobsets


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("env=prod", ["a"]),
        ("env==dev", ["b"]),
        ("env!=prod", ["b", "c"]),
        ("env in (prod,dev)", ["a", "b"]),
        ("env notin (prod)", ["b", "c"]),
        ("env", ["a", "b"]),
        ("!env", ["c"]),
        ("env=prod,tier=1", ["a"]),
        ("tier>1", ["b"]),
        ("", ["a", "b", "c"]),
    ],
)
def test_list_filters_by_each_label_selector_form(
    labelled_jobsets: JobSets, selector: str, expected: list[str]
) -> None:
    assert labelled_jobsets.list(label_selector=selector) == expected


def test_malformed_label_selector_answers_400(labelled_jobsets: JobSets) -> None:
    with pytest.raises(client.exceptions.BadRequestException) as caught:
        labelled_jobsets.list(label_selector="env in (prod")
    assert status_of(caught.value)["reason"] == "BadRequest"


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("metadata.name=b", ["b"]),
        ("metadata.name==c", ["c"]),
        ("metadata.name!=a", ["b", "c"]),
        ("metadata.namespace=team-a,metadata.name!=c", ["a", "b"]),
        ("metadata.namespace=other", []),
    ],
)
def test_list_filters_by_field_selector(
    labelled_jobsets: JobSets, selector: str, expected: list[str]
) -> None:
    assert labelled_jobsets.list(field_selector=selector) == expected


def test_unsupported_field_label_answers_400(labelled_jobsets: JobSets) -> None:
    with pytest.raises(client.exceptions.BadRequestException) as caught:
        labelled_jobsets.list(field_selector="spec.suspend=true")
    assert "field label not supported" in status_of(caught.value)["message"]


def test_list_pages_with_limit_and_continue(labelled_jobsets: JobSets) -> None:
    first = labelled_jobsets.api.list_namespaced_custom_object(*labelled_jobsets.args, limit=2)
    rest = labelled_jobsets.api.list_namespaced_custom_object(
        *labelled_jobsets.args, limit=2, _continue=first["metadata"]["continue"]
    )
    assert [i["metadata"]["name"] for i in first["items"]] == ["a", "b"]
    assert [i["metadata"]["name"] for i in rest["items"]] == ["c"]
    assert "continue" not in rest["metadata"]


def test_list_body_has_list_kind_and_resource_version(labelled_jobsets: JobSets) -> None:
    listed = labelled_jobsets.api.list_namespaced_custom_object(*labelled_jobsets.args)
    assert listed["kind"] == "JobSetList"
    assert listed["apiVersion"] == f"{JOBSET_GROUP}/{JOBSET_VERSION}"
    assert int(listed["metadata"]["resourceVersion"]) >= 4


# ---------------------------------------------------------------- JobSets: updates


def test_replace_with_a_stale_resource_version_answers_409_conflict(jobsets: JobSets) -> None:
    stale = jobsets.create(jobset("train"))
    fresh = dict(stale, spec={"replicatedJobs": []})
    jobsets.replace("train", fresh)
    with pytest.raises(client.exceptions.ConflictException) as caught:
        jobsets.replace("train", dict(stale, spec={"suspend": True}))
    body = status_of(caught.value)
    assert body["reason"] == "Conflict"
    assert "the object has been modified" in body["message"]
    assert jobsets.get("train")["spec"] == {"replicatedJobs": []}


def test_replace_with_the_current_resource_version_succeeds(jobsets: JobSets) -> None:
    created = jobsets.create(jobset("train"))
    created["spec"]["suspend"] = True
    replaced = jobsets.replace("train", created)
    assert replaced["spec"]["suspend"] is True
    assert replaced["metadata"]["uid"] == created["metadata"]["uid"]


def test_replacing_a_custom_object_without_resource_version_answers_422(
    jobsets: JobSets,
) -> None:
    jobsets.create(jobset("train"))
    with pytest.raises(client.exceptions.UnprocessableEntityException) as caught:
        jobsets.replace("train", jobset("train"))
    assert "metadata.resourceVersion" in status_of(caught.value)["message"]


def test_replacing_a_configmap_without_resource_version_is_unconditional(
    core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cfg"))
    )
    replaced = core.replace_namespaced_config_map(
        "cfg", namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cfg"), data={})
    )
    assert replaced.metadata.name == "cfg"


def test_merge_patch_merges_maps_and_null_deletes(jobsets: JobSets) -> None:
    body = jobset("train")
    body["metadata"]["labels"] = {"keep": "1", "drop": "1"}
    created = jobsets.create(body)
    patched = jobsets.patch(
        "train", {"metadata": {"labels": {"drop": None, "new": "1"}}, "spec": {"suspend": True}}
    )
    assert patched["metadata"]["labels"] == {"keep": "1", "new": "1"}
    assert patched["spec"]["suspend"] is True
    assert patched["spec"]["replicatedJobs"] == created["spec"]["replicatedJobs"]


def test_json_patch_applies_operations_in_order(jobsets: JobSets) -> None:
    jobsets.create(jobset("train"))
    patched = jobsets.patch(
        "train",
        [
            {"op": "test", "path": "/spec/replicatedJobs/0/replicas", "value": 1},
            {"op": "replace", "path": "/spec/replicatedJobs/0/replicas", "value": 4},
            {"op": "add", "path": "/metadata/labels", "value": {"a": "b"}},
        ],
        _content_type="application/json-patch+json",
    )
    assert patched["spec"]["replicatedJobs"][0]["replicas"] == 4
    assert patched["metadata"]["labels"] == {"a": "b"}


def test_json_patch_with_a_failing_test_answers_422_and_changes_nothing(
    jobsets: JobSets,
) -> None:
    created = jobsets.create(jobset("train"))
    with pytest.raises(client.exceptions.UnprocessableEntityException):
        jobsets.patch(
            "train",
            [
                {"op": "replace", "path": "/spec/replicatedJobs/0/replicas", "value": 9},
                {"op": "test", "path": "/spec/replicatedJobs/0/replicas", "value": 1},
            ],
            _content_type="application/json-patch+json",
        )
    assert jobsets.get("train") == created


def test_patch_with_an_unknown_content_type_answers_415(jobsets: JobSets) -> None:
    jobsets.create(jobset("train"))
    with pytest.raises(client.ApiException) as caught:
        jobsets.patch("train", {"spec": {}}, _content_type="application/vnd.example+json")
    assert caught.value.status == 415
    assert status_of(caught.value)["reason"] == "UnsupportedMediaType"


def test_server_side_apply_creates_with_201_then_updates_with_200(
    jobsets: JobSets, custom: client.CustomObjectsApi, namespace: str
) -> None:
    args = (JOBSET_GROUP, JOBSET_VERSION, namespace, "jobsets", "applied")
    applied = jobset("applied")
    data, create_code, _ = custom.patch_namespaced_custom_object_with_http_info(
        *args,
        applied,
        field_manager="accelops",
        force=True,
        _content_type="application/apply-patch+yaml",
    )
    applied["spec"]["suspend"] = True
    updated, update_code, _ = custom.patch_namespaced_custom_object_with_http_info(
        *args,
        applied,
        field_manager="accelops",
        force=True,
        _content_type="application/apply-patch+yaml",
    )
    # The v37 client maps only 200 for this call, so the 201 body is dropped.
    assert (create_code, data) == (201, None)
    assert update_code == 200
    assert updated["spec"]["suspend"] is True
    assert updated["metadata"]["generation"] == 2


def test_server_side_apply_accepts_a_yaml_body(
    kube_api: KubeApiServer, jobsets: JobSets, namespace: str
) -> None:
    text = (
        f"apiVersion: {JOBSET_GROUP}/{JOBSET_VERSION}\nkind: JobSet\n"
        "metadata:\n  name: from-yaml\nspec:\n  suspend: true\n"
    )
    code, body = raw_request(
        kube_api,
        "PATCH",
        f"/apis/{JOBSET_GROUP}/{JOBSET_VERSION}/namespaces/{namespace}/jobsets/from-yaml"
        "?fieldManager=kubectl",
        text.encode(),
        "application/apply-patch+yaml",
    )
    assert code == 201
    assert body["spec"] == {"suspend": True}
    assert jobsets.get("from-yaml")["spec"] == {"suspend": True}


def test_server_side_apply_without_field_manager_answers_400(jobsets: JobSets) -> None:
    with pytest.raises(client.exceptions.BadRequestException) as caught:
        jobsets.patch("x", jobset("x"), _content_type="application/apply-patch+yaml")
    assert "fieldManager" in status_of(caught.value)["message"]


def test_status_subresource_changes_only_status(jobsets: JobSets) -> None:
    created = jobsets.create(jobset("train"))
    running = {"type": "Running", "status": "True", "reason": "Started", "message": "started",
               "lastTransitionTime": "2026-01-01T00:00:00Z"}
    body = dict(created, spec={"suspend": True}, status={"conditions": [running]})
    via_put = jobsets.replace_status("train", body)
    via_patch = jobsets.patch_status("train", {"spec": {"hacked": True}, "status": {"restarts": 1}})
    assert via_put["spec"] == created["spec"]
    assert via_put["status"] == {"conditions": [running]}
    assert via_patch["spec"] == created["spec"]
    assert via_patch["status"] == {"conditions": [running], "restarts": 1}


def test_main_resource_writes_keep_the_stored_status(jobsets: JobSets) -> None:
    jobsets.create(jobset("train"))
    jobsets.patch_status("train", {"status": {"restarts": 2}})
    current = jobsets.get("train")
    replaced = jobsets.replace("train", dict(current, status={"restarts": 99}))
    patched = jobsets.patch("train", {"status": {"restarts": 42}})
    assert replaced["status"] == {"restarts": 2}
    assert patched["status"] == {"restarts": 2}


def test_generation_bumps_on_spec_changes_only(jobsets: JobSets) -> None:
    jobsets.create(jobset("train"))
    after_labels = jobsets.patch("train", {"metadata": {"labels": {"a": "b"}}})
    after_status = jobsets.patch_status("train", {"status": {"restarts": 1}})
    after_spec = jobsets.patch("train", {"spec": {"suspend": True}})
    assert after_labels["metadata"]["generation"] == 1
    assert after_status["metadata"]["generation"] == 1
    assert after_spec["metadata"]["generation"] == 2


def test_a_write_that_changes_nothing_keeps_the_resource_version(jobsets: JobSets) -> None:
    created = jobsets.create(jobset("train"))
    same_spec = {"spec": {"replicatedJobs": created["spec"]["replicatedJobs"]}}
    patched = jobsets.patch("train", same_spec)
    assert patched["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_delete_with_a_finalizer_keeps_the_object_until_the_finalizer_is_removed(
    jobsets: JobSets, clock: FakeClock
) -> None:
    body = jobset("train")
    body["metadata"]["finalizers"] = ["accelops.dev/cleanup"]
    jobsets.create(body)
    deleting = jobsets.delete("train")
    still_there = jobsets.get("train")
    jobsets.patch("train", {"metadata": {"finalizers": None}})
    assert deleting["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:00Z"
    assert still_there["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:00Z"
    with pytest.raises(client.exceptions.NotFoundException):
        jobsets.get("train")


def test_delete_without_finalizers_returns_the_deleted_custom_object(jobsets: JobSets) -> None:
    jobsets.create(jobset("train"))
    deleted = jobsets.delete("train")
    assert deleted["metadata"]["name"] == "train"
    assert jobsets.list() == []


# ---------------------------------------------------------------- faults and restarts


def test_injected_503_fails_the_next_requests_then_the_api_recovers(
    kube_api: KubeApiServer, jobsets: JobSets
) -> None:
    kube_api.faults.fail_next(2, code=503)
    failures = []
    for _ in range(2):
        with pytest.raises(client.exceptions.ServiceException) as caught:
            jobsets.create(jobset("train"))
        failures.append(status_of(caught.value)["reason"])
    created = jobsets.create(jobset("train"))
    assert failures == ["ServiceUnavailable", "ServiceUnavailable"]
    assert created["metadata"]["name"] == "train"
    assert kube_api.faults.pending == 0


def test_injected_429_carries_retry_after(kube_api: KubeApiServer, jobsets: JobSets) -> None:
    kube_api.faults.fail_next(1, code=429, retry_after_seconds=3, method="POST")
    with pytest.raises(client.ApiException) as caught:
        jobsets.create(jobset("train"))
    body = status_of(caught.value)
    assert caught.value.status == 429
    assert body["reason"] == "TooManyRequests"
    assert body["details"]["retryAfterSeconds"] == 3
    assert caught.value.headers["Retry-After"] == "3"


def test_reads_answered_429_with_retry_after_are_retried_by_urllib3(
    kube_api: KubeApiServer, jobsets: JobSets
) -> None:
    # urllib3's default Retry honours Retry-After on 413/429/503 for
    # idempotent methods, so the client never sees these faults.
    kube_api.faults.fail_next(2, code=429, retry_after_seconds=0, method="GET")
    assert jobsets.list() == []
    assert kube_api.faults.injected == 2


def test_restart_on_the_same_port_serves_the_same_store_again(
    kube_api: KubeApiServer, jobsets: JobSets
) -> None:
    jobsets.create(jobset("train"))
    port, store = kube_api.port, kube_api.store
    kube_api.stop()
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        jobsets.get("train")
    restarted = start_kube_api(port=port, store=store)
    try:
        assert jobsets.get("train")["metadata"]["name"] == "train"
    finally:
        restarted.stop()


def test_state_file_keeps_objects_across_servers(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    first = start_kube_api(state_file=state)
    api_client = api_client_for(first, tmp_path)
    try:
        client.CoreV1Api(api_client).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name="kept"))
        )
    finally:
        first.stop()
        api_client.close()
    second = start_kube_api(state_file=state)
    api_client = api_client_for(second, tmp_path)
    try:
        read = client.CoreV1Api(api_client).read_namespace("kept")
        created = client.CoreV1Api(api_client).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name="next"))
        )
    finally:
        second.stop()
        api_client.close()
    assert read.metadata.name == "kept"
    assert int(created.metadata.resource_version) > int(read.metadata.resource_version)


def test_module_main_serves_until_sigterm_and_saves_state(tmp_path: Path) -> None:
    state, kubeconfig = tmp_path / "state.json", tmp_path / "kubeconfig"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sandbox.kubeapi",
            "--state-file",
            str(state),
            "--kubeconfig",
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        api_client = config.new_client_from_config(config_file=str(kubeconfig))
        client.CoreV1Api(api_client).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name="saved"))
        )
        api_client.close()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=5)
    saved = json.loads(state.read_text())
    assert url.startswith("http://127.0.0.1:")
    assert [o["object"]["metadata"]["name"] for o in saved["objects"]] == ["saved"]


def test_concurrent_clients_get_distinct_resource_versions(
    kube_api: KubeApiServer, namespace: str, tmp_path: Path
) -> None:
    versions: list[str] = []
    errors: list[BaseException] = []

    clients = [api_client_for(kube_api, tmp_path) for _ in range(4)]

    def create_many(worker: int) -> None:
        try:
            api = client.CoreV1Api(clients[worker])
            for i in range(10):
                created = api.create_namespaced_config_map(
                    namespace,
                    client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"w{worker}-{i}")),
                )
                versions.append(created.metadata.resource_version)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)
        finally:
            clients[worker].close()

    threads = [threading.Thread(target=create_many, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert errors == []
    assert len(set(versions)) == 40
    assert len(kube_api.store.list("", "configmaps", namespace)) == 40


# ---------------------------------------------------------------- in-process store


def test_store_subscribers_see_api_writes_in_order(
    kube_api: KubeApiServer, jobsets: JobSets
) -> None:
    seen: list[tuple[str, str]] = []
    kube_api.store.subscribe(lambda event, obj: seen.append((event, obj["metadata"]["name"])))
    jobsets.create(jobset("train"))
    jobsets.patch("train", {"spec": {"suspend": True}})
    jobsets.delete("train")
    assert seen == [("ADDED", "train"), ("MODIFIED", "train"), ("DELETED", "train")]


def test_store_subscribers_may_write_back_into_the_store() -> None:
    store = ObjectStore(clock=FakeClock())
    store.create("", "namespaces", {"metadata": {"name": "ns"}})

    def mark_running(event: str, obj: dict[str, Any]) -> None:
        if event == "ADDED" and obj.get("kind") == "Pod":
            obj["status"] = {"phase": "Running"}
            store.update_status("", "pods", obj)

    store.subscribe(mark_running)
    store.create("", "pods", {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}})
    assert store.get("", "pods", "p", "ns")["status"] == {"phase": "Running"}


def test_store_objects_are_copies_not_shared_state() -> None:
    store = ObjectStore(clock=FakeClock())
    created = store.create("", "nodes", {"metadata": {"name": "n"}})
    created["metadata"]["labels"] = {"mutated": "yes"}
    assert "labels" not in store.get("", "nodes", "n")["metadata"]


def test_a_namespace_stays_terminating_while_finalizers_hold_its_contents() -> None:
    store = ObjectStore(clock=FakeClock())
    store.create("", "namespaces", {"metadata": {"name": "ns"}})
    store.create(
        "", "pods", {"metadata": {"name": "held", "namespace": "ns", "finalizers": ["x/y"]}}
    )
    result = store.delete("", "namespaces", "ns")
    with pytest.raises(ApiError) as refused:
        store.create("", "configmaps", {"metadata": {"name": "late", "namespace": "ns"}})
    store.patch("", "pods", "held", {"metadata": {"finalizers": []}}, namespace="ns")
    assert result.finalizing
    assert result.object["status"]["phase"] == "Terminating"
    assert refused.value.code == 403
    assert store.try_get("", "namespaces", "ns") is None


# ---------------------------------------------------------------- custom resources vs CRDs

KUEUE = ("kueue.x-k8s.io", "v1beta1")


def test_a_jobset_the_crd_refuses_answers_422_with_each_cause(jobsets: JobSets) -> None:
    body = jobset("train")
    del body["spec"]["replicatedJobs"][0]["template"]
    body["spec"]["failurePolicy"] = {"maxRestarts": "three"}

    with pytest.raises(client.exceptions.ApiException) as caught:
        jobsets.create(body)

    status = status_of(caught.value)
    assert caught.value.status == 422
    assert status["reason"] == "Invalid"
    assert status["message"] == (
        'JobSet.jobset.x-k8s.io "train" is invalid: [spec.failurePolicy.maxRestarts: Invalid '
        'value: "string": spec.failurePolicy.maxRestarts in body must be of type integer: '
        '"string", spec.replicatedJobs[0].template: Required value, <nil>: Invalid value: '
        '"null": some validation rules were not checked because the object was invalid; '
        'correct the existing errors to complete validation]')
    assert status["details"]["causes"][:2] == [
        {"reason": "FieldValueTypeInvalid", "field": "spec.failurePolicy.maxRestarts",
         "message": 'Invalid value: "string": spec.failurePolicy.maxRestarts in body must be '
                    'of type integer: "string"'},
        {"reason": "FieldValueRequired", "field": "spec.replicatedJobs[0].template",
         "message": "Required value"}]
    with pytest.raises(client.exceptions.NotFoundException):
        jobsets.get("train")


def test_a_created_jobset_reads_back_with_the_crds_defaults(jobsets: JobSets) -> None:
    body = jobset("train")
    body["spec"]["failurePolicy"] = {"maxRestarts": 2}
    del body["spec"]["replicatedJobs"][0]["replicas"]

    created = jobsets.create(body)

    assert created["spec"]["failurePolicy"] == {"maxRestarts": 2, "restartStrategy": "Recreate"}
    assert created["spec"]["replicatedJobs"][0]["replicas"] == 1
    assert jobsets.get("train")["spec"] == created["spec"]


def test_fields_the_pinned_jobset_lacks_are_refused_under_strict_and_dropped_with_a_warning(
    jobsets: JobSets, custom: client.CustomObjectsApi
) -> None:
    body = jobset("train")
    body["spec"]["replicatedJobs"][0]["groupName"] = "workers"

    with pytest.raises(client.exceptions.ApiException) as caught:
        custom.create_namespaced_custom_object(*jobsets.args, body, field_validation="Strict")
    created, code, headers = custom.create_namespaced_custom_object_with_http_info(
        *jobsets.args, body)

    assert caught.value.status == 400
    assert status_of(caught.value)["message"] == (
        'strict decoding error: unknown field "spec.replicatedJobs[0].groupName"')
    assert code == 201
    assert headers["Warning"] == (
        '299 - "unknown field \\"spec.replicatedJobs[0].groupName\\""')
    assert "groupName" not in created["spec"]["replicatedJobs"][0]


def test_a_local_queues_cluster_queue_is_immutable_over_the_wire(
    custom: client.CustomObjectsApi, namespace: str
) -> None:
    args = (*KUEUE, namespace, "localqueues")
    created = custom.create_namespaced_custom_object(*args, {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
        "metadata": {"name": "team-queue"}, "spec": {"clusterQueue": "team-cq"}})

    with pytest.raises(client.exceptions.ApiException) as caught:
        custom.patch_namespaced_custom_object(*args, "team-queue",
                                              {"spec": {"clusterQueue": "other"}})

    assert created["spec"] == {"clusterQueue": "team-cq", "stopPolicy": "None"}
    assert caught.value.status == 422
    assert status_of(caught.value)["message"] == (
        'LocalQueue.kueue.x-k8s.io "team-queue" is invalid: spec.clusterQueue: Invalid value: '
        '"string": field is immutable')


def test_a_cluster_queue_whose_flavors_miss_a_covered_resource_fails_its_cel_rule(
    custom: client.CustomObjectsApi,
) -> None:
    body = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
            "metadata": {"name": "team-cq"},
            "spec": {"resourceGroups": [{"coveredResources": ["google.com/tpu", "cpu"],
                                         "flavors": [{"name": "v5e", "resources": [
                                             {"name": "google.com/tpu",
                                              "nominalQuota": 16}]}]}]}}

    with pytest.raises(client.exceptions.ApiException) as caught:
        custom.create_cluster_custom_object(*KUEUE, "clusterqueues", body)

    assert caught.value.status == 422
    assert status_of(caught.value)["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "field": "spec.resourceGroups[0]",
         "message": 'Invalid value: "object": flavors must have the same number of resources '
                    "as the coveredResources"}]


def test_a_status_update_is_checked_against_the_status_schema(jobsets: JobSets) -> None:
    jobsets.create(jobset("train"))

    with pytest.raises(client.exceptions.ApiException) as caught:
        jobsets.patch_status("train", {"status": {"conditions": [{"type": "Completed"}]}})

    assert caught.value.status == 422
    assert [c["field"] for c in status_of(caught.value)["details"]["causes"]][:4] == [
        "status.conditions[0].lastTransitionTime", "status.conditions[0].message",
        "status.conditions[0].reason", "status.conditions[0].status"]


def test_creating_a_custom_resource_with_a_status_subresource_drops_the_status_it_sends(
    jobsets: JobSets,
) -> None:
    body = jobset("train", status={"restarts": 3})

    created = jobsets.create(body)

    assert "status" not in created
    assert "status" not in jobsets.get("train")
