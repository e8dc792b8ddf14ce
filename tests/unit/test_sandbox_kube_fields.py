"""Unknown-field detection of the sandbox Kubernetes API (the schemas behind fieldValidation):
built-in kinds by the client's models, custom resources by their CRDs' structural schemas."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sandbox.kubeapi.errors import ApiError
from sandbox.kubeapi.fields import check, check_applied, root_type


@pytest.mark.parametrize(
    ("group", "version", "kind", "schema"),
    [
        ("", "v1", "Pod", "V1Pod"),
        ("", "v1", "Event", "CoreV1Event"),
        ("events.k8s.io", "v1", "Event", "EventsV1Event"),
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "V1ClusterRoleBinding"),
        ("coordination.k8s.io", "v1", "Lease", "V1Lease"),
        ("kueue.x-k8s.io", "v1beta1", "LocalQueue", "crd"),
        ("jobset.x-k8s.io", "v1alpha2", "JobSet", "crd"),
        ("monitoring.googleapis.com", "v1", "PodMonitoring", "crd"),
        ("kueue.x-k8s.io", "v1alpha1", "LocalQueue", None),
        ("example.com", "v1", "Widget", None),
    ],
)
def test_each_kind_finds_its_schema(group: str, version: str, kind: str,
                                    schema: str | None) -> None:
    assert root_type(group, version, kind) == schema


def test_unknown_fields_of_a_built_in_kind_are_reported_by_path_and_dropped() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "colour": "red"},
           "spec": {"containers": [{"name": "main", "image": "busybox", "cpus": 2,
                                    "resources": {"limits": {"google.com/tpu": "4"}}}]}}

    report = check("V1Pod", pod)

    assert report.unknown == ["metadata.colour", "spec.containers[0].cpus"]
    assert report.pruned == {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "main", "image": "busybox",
                                 "resources": {"limits": {"google.com/tpu": "4"}}}]}}
    assert "colour" in pod["metadata"]  # the input is left alone


JOBSET = ("jobset.x-k8s.io", "v1alpha2", "JobSet")


def test_a_jobset_pod_template_is_checked_against_the_pod_spec_of_the_jobset_crd() -> None:
    body = {"spec": {"suspend": True, "failurePolicy": {"maxRestarts": 1},
                     "replicatedJobs": [{"name": "w", "replicas": 2, "template": {"spec": {
                         "parallelism": 4, "template": {"spec": {
                             "nodeSelector": {"cloud.google.com/gke-tpu-topology": "4x4"},
                             "containers": [{"name": "c", "privileged": True}]}}}}}]}}

    assert check("crd", body, JOBSET).unknown == [
        "spec.replicatedJobs[0].template.spec.template.spec.containers[0].privileged"]


def test_fields_of_newer_jobset_and_kueue_releases_are_unknown_at_the_pinned_versions() -> None:
    jobset = {"spec": {"replicatedJobs": [{"name": "w", "groupName": "g",
                                           "dependsOn": [{"name": "x", "status": "Ready"}]}]}}
    local_queue = {"spec": {"clusterQueue": "q", "fairSharing": {"weight": 1}}}
    cluster_queue = {"spec": {"admissionScope": {"admissionMode": "UsageBasedFairSharing"}}}

    assert check("crd", jobset, JOBSET).unknown == ["spec.replicatedJobs[0].dependsOn",
                                                    "spec.replicatedJobs[0].groupName"]
    assert check("crd", local_queue, ("kueue.x-k8s.io", "v1beta1", "LocalQueue")).unknown == [
        "spec.fairSharing"]
    assert check("crd", cluster_queue,
                 ("kueue.x-k8s.io", "v1beta1", "ClusterQueue")).unknown == [
        "spec.admissionScope"]


def test_unknown_metadata_of_a_custom_resource_is_found_as_for_built_in_kinds() -> None:
    body = {"metadata": {"name": "j", "colour": "red"}, "spec": {"suspend": True}}

    report = check("crd", body, JOBSET)

    assert report.unknown == ["metadata.colour"]
    assert report.pruned == {"metadata": {"name": "j"}, "spec": {"suspend": True}}


def test_a_workload_priority_class_keeps_its_top_level_value() -> None:
    body = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high"}, "value": 1000, "spec": {}}

    assert check("crd", body, ("kueue.x-k8s.io", "v1beta1", "WorkloadPriorityClass")
                 ).unknown == ["spec"]


def test_strategic_merge_directives_and_map_keys_are_not_fields() -> None:
    patch = {"metadata": {"labels": {"any/key": "v"}},
             "spec": {"containers": [{"name": "c", "$patch": "delete"}]}}

    assert check("V1Pod", patch).unknown == []


def test_null_values_of_a_merge_patch_are_kept() -> None:
    assert check("V1ConfigMap", {"data": None}).pruned == {"data": None}


def test_a_started_server_has_the_models_before_its_first_request() -> None:
    # Request threads must not be the first to import them: a concurrent import of
    # google-cloud-pubsub on the main thread then fails on a half-imported `requests`.
    code = ("import sys\n"
            "from sandbox.kubeapi import start_kube_api\n"
            "before = 'kubernetes.client.models' in sys.modules\n"
            "server = start_kube_api()\n"
            "print(before, 'kubernetes.client.models' in sys.modules)\n"
            "server.stop()\n")

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout

    assert out.split() == ["False", "True"]


def test_server_side_apply_names_an_unknown_field_of_a_map_list_item_by_its_key() -> None:
    body = {"metadata": {"name": "j"},
            "spec": {"replicatedJobs": [{"name": "workers", "groupName": "g"}]}}

    with pytest.raises(ApiError) as caught:
        check_applied(*JOBSET, body, "team-a/j")

    assert caught.value.code == 500
    assert caught.value.message == (
        "failed to create typed patch object (team-a/j; jobset.x-k8s.io/v1alpha2, "
        'Kind=JobSet): .spec.replicatedJobs[name="workers"].groupName: field not declared '
        "in schema")
