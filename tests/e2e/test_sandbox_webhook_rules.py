"""The rules of the pinned webhooks, through the sandbox Kubernetes API and the real client.

JobSet v0.7.2 (``pkg/webhooks/jobset_webhook.go``) and Kueue v0.10.1 (``pkg/webhooks``,
``pkg/controller/jobs/jobset/jobset_webhook.go``): what each adds to an object, and
each refusal with the webhook's own wording behind kube-apiserver's ``admission
webhook "NAME" denied the request: `` (403 Forbidden).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.admission_fixtures import KUEUE, ControllersCluster, cluster_queue, jobset

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllersCluster]:
    ready = ControllersCluster(tmp_path_factory.mktemp("webhooks"))
    ready.start_controllers()
    try:
        yield ready
    finally:
        ready.stop()


_names = iter(range(1_000_000))


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


def denial(write: Callable[[], Any]) -> tuple[int, str, str]:
    """(code, reason, message) of a refused write."""
    with pytest.raises(client.ApiException) as caught:
        write()
    body = json.loads(caught.value.body)
    return caught.value.status, body["reason"], body["message"]


def denied_by(webhook: str, *problems: str) -> tuple[int, str, str]:
    return 403, "Forbidden", f'admission webhook "{webhook}" denied the request: ' + \
        "\n".join(problems)


def denied_by_aggregate(webhook: str, *problems: str) -> tuple[int, str, str]:
    text = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
    return 403, "Forbidden", f'admission webhook "{webhook}" denied the request: {text}'


# ---------------------------------------------------------------- JobSet: defaults

def test_a_created_jobset_gets_jobsets_defaults(cluster: ControllersCluster) -> None:
    body = jobset(unique("train"))
    del body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "restartPolicy"]

    created = cluster.create_jobset(body)

    spec = created["spec"]
    job = spec["replicatedJobs"][0]["template"]["spec"]
    assert spec["successPolicy"] == {"operator": "All"}
    assert spec["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    assert spec["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    assert job["completionMode"] == "Indexed"
    assert job["template"]["spec"]["restartPolicy"] == "OnFailure"


def test_failure_policy_rules_without_names_are_named_by_their_index(
        cluster: ControllersCluster) -> None:
    body = jobset(unique("train"), failurePolicy={"maxRestarts": 1, "rules": [
        {"action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]},
        {"action": "RestartJobSet"}]})

    created = cluster.create_jobset(body)

    assert [r["name"] for r in created["spec"]["failurePolicy"]["rules"]] == [
        "failurePolicyRule0", "failurePolicyRule1"]


def test_a_jobset_naming_a_queue_is_created_suspended_by_kueue(
        cluster: ControllersCluster) -> None:
    created = cluster.create_jobset(jobset(unique("train"),
                                           labels={"kueue.x-k8s.io/queue-name": "research"}))

    assert created["spec"]["suspend"] is True


def test_a_jobset_without_a_queue_is_left_running(cluster: ControllersCluster) -> None:
    created = cluster.create_jobset(jobset(unique("train")))

    assert "suspend" not in created["spec"]


# ---------------------------------------------------------------- JobSet: create rules

def test_a_jobset_whose_job_names_would_exceed_63_characters_is_refused(
        cluster: ControllersCluster) -> None:
    name = "a" + "b" * 55  # its last job: a…b-slice-19 (65 characters)

    assert denial(lambda: cluster.create_jobset(jobset(name, replicas=20))) == denied_by(
        "vjobset.kb.io",
        "JobSet name is too long, job names generated for this JobSet will exceed 63 "
        "characters",
        "JobSet name is too long, pod names generated for this JobSet will exceed 63 "
        "characters")


def test_a_jobset_whose_pod_names_would_exceed_63_characters_is_refused(
        cluster: ControllersCluster) -> None:
    name = "p" + "q" * 49  # jobs fit: p…q-slice-1 (58); pods do not: …-1-3-abcde (66)

    assert denial(lambda: cluster.create_jobset(jobset(name))) == denied_by(
        "vjobset.kb.io",
        "JobSet name is too long, pod names generated for this JobSet will exceed 63 "
        "characters")


def test_an_invalid_network_subdomain_is_refused_with_both_dns_rules(
        cluster: ControllersCluster) -> None:
    body = jobset(unique("train"), network={"subdomain": "Bad_Domain"})

    code, reason, message = denial(lambda: cluster.create_jobset(body))

    assert (code, reason) == (403, "Forbidden")
    assert message.startswith('admission webhook "vjobset.kb.io" denied the request: a '
                              "lowercase RFC 1123 subdomain must consist of")
    assert "\na DNS-1035 label must consist of lower case alphanumeric characters" in message


def test_a_managed_by_that_is_not_a_domain_prefixed_path_is_refused(
        cluster: ControllersCluster) -> None:
    body = jobset(unique("train"), managedBy="kueue")

    assert denial(lambda: cluster.create_jobset(body)) == denied_by(
        "vjobset.kb.io",
        'spec.managedBy: Invalid value: "kueue": must be a domain-prefixed path (such as '
        '"acme.io/foo")')


def test_a_success_policy_naming_an_unknown_replicated_job_is_refused(
        cluster: ControllersCluster) -> None:
    body = jobset(unique("train"),
                  successPolicy={"operator": "All", "targetReplicatedJobs": ["driver"]})

    assert denial(lambda: cluster.create_jobset(body)) == denied_by(
        "vjobset.kb.io",
        "invalid replicatedJob name 'driver' does not appear in .spec.ReplicatedJobs")


def test_failure_policy_rules_are_checked_for_names_targets_and_reasons(
        cluster: ControllersCluster) -> None:
    body = jobset(unique("train"), failurePolicy={"rules": [
        {"name": "1st", "action": "FailJobSet", "targetReplicatedJobs": ["driver"]},
        {"name": "again", "action": "FailJobSet", "onJobFailureReasons": ["OOMKilled"]},
        {"name": "again", "action": "RestartJobSet"}]})

    assert denial(lambda: cluster.create_jobset(body)) == denied_by(
        "vjobset.kb.io",
        "invalid failure policy rule name '1st', a failure policy rule name must start with "
        "an alphabetic character, optionally followed by a string of alphanumeric characters "
        "or '_,:', and must end with an alphanumeric character or '_'",
        "invalid replicatedJob name 'driver' in failure policy does not appear in "
        ".spec.ReplicatedJobs",
        "invalid job failure reason 'OOMKilled' in failure policy is not a recognized job "
        "failure reason",
        "rule names are not unique, rules with indices [1 2] all have the same name 'again'")


def test_a_coordinator_outside_the_replicated_jobs_is_refused(
        cluster: ControllersCluster) -> None:
    body = jobset(unique("train"), coordinator={"replicatedJob": "slice", "jobIndex": 5})

    assert denial(lambda: cluster.create_jobset(body)) == denied_by(
        "vjobset.kb.io", "coordinator job index 5 is invalid for replicatedJob slice")


# ---------------------------------------------------------------- JobSet: update rules

def test_the_replicated_jobs_of_a_running_jobset_are_immutable(
        cluster: ControllersCluster) -> None:
    created = cluster.create_jobset(jobset(unique("train")))
    changed = copy.deepcopy(created)
    changed["spec"]["replicatedJobs"][0]["replicas"] = 3

    code, reason, message = denial(lambda: cluster.replace_jobset(changed))

    assert (code, reason) == (403, "Forbidden")
    assert message.startswith('admission webhook "vjobset.kb.io" denied the request: '
                              "spec.replicatedJobs: Invalid value: ")
    assert message.endswith(": field is immutable")


def test_a_suspended_jobsets_pod_template_labels_and_node_selector_may_change(
        cluster: ControllersCluster) -> None:
    created = cluster.create_jobset(jobset(unique("train"),
                                           labels={"kueue.x-k8s.io/queue-name": "research"}))
    changed = copy.deepcopy(created)
    pod = changed["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod["metadata"]["labels"]["kueue.x-k8s.io/podset"] = "slice"
    pod["spec"]["nodeSelector"] = {"cloud.google.com/gke-nodepool": "slice-a"}

    updated = cluster.replace_jobset(changed)

    assert updated["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "nodeSelector"] == {"cloud.google.com/gke-nodepool": "slice-a"}


def test_the_queue_of_a_running_jobset_is_immutable(cluster: ControllersCluster) -> None:
    created = cluster.create_jobset(jobset(unique("train"),
                                           labels={"kueue.x-k8s.io/queue-name": "research"}))
    running = copy.deepcopy(created)
    running["spec"]["suspend"] = False
    running = cluster.replace_jobset(running)
    running["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "inference"

    assert denial(lambda: cluster.replace_jobset(running)) == denied_by_aggregate(
        "vjobset.kb.io",
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "inference": field is '
        "immutable")


def test_the_priority_class_label_of_a_jobset_is_immutable(
        cluster: ControllersCluster) -> None:
    created = cluster.create_jobset(jobset(unique("train"), labels={
        "kueue.x-k8s.io/queue-name": "research", "kueue.x-k8s.io/priority-class": "low"}))
    created["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"

    assert denial(lambda: cluster.replace_jobset(created)) == denied_by_aggregate(
        "vjobset.kb.io",
        'metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "high": field is '
        "immutable")


def test_a_queue_name_that_is_not_a_dns_subdomain_is_refused_by_kueue(
        cluster: ControllersCluster) -> None:
    body = jobset(unique("train"), labels={"kueue.x-k8s.io/queue-name": "Research_Queue"})

    assert denial(lambda: cluster.create_jobset(body)) == denied_by_aggregate(
        "vjobset.kb.io",
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "Research_Queue": a '
        "lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
        "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
        "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*"
        "[a-z0-9])?)*')")


def test_a_maximum_execution_time_that_is_not_a_positive_number_is_refused(
        cluster: ControllersCluster) -> None:
    words = jobset(unique("train"), labels={"kueue.x-k8s.io/max-exec-time-seconds": "ten"})
    zero = jobset(unique("train"), labels={"kueue.x-k8s.io/max-exec-time-seconds": "0"})

    assert denial(lambda: cluster.create_jobset(words)) == denied_by_aggregate(
        "vjobset.kb.io", 'metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid '
                         'value: "ten": strconv.Atoi: parsing "ten": invalid syntax')
    assert denial(lambda: cluster.create_jobset(zero)) == denied_by_aggregate(
        "vjobset.kb.io", "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid "
                         "value: 0: should be greater than 0")


# ---------------------------------------------------------------- Kueue: ClusterQueue

def test_a_cluster_queue_gets_kueues_resource_in_use_finalizer(
        cluster: ControllersCluster) -> None:
    created = cluster.create_cluster_object("clusterqueues", cluster_queue(unique("cq")))

    assert created["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]


def test_a_cluster_queue_with_inconsistent_resource_groups_is_refused(
        cluster: ControllersCluster) -> None:
    # What the CRD's schema lets through (it keys flavors and their resources by name,
    # within one resource group) for the webhook to refuse.
    body = cluster_queue(unique("cq"), resourceGroups=[
        {"coveredResources": ["google.com/tpu", "google.com/tpu"],
         "flavors": [{"name": "tpu", "resources": [
             {"name": "cpu", "nominalQuota": "-4"},
             {"name": "google.com/tpu", "nominalQuota": 8}]}]},
        {"coveredResources": ["memory"],
         "flavors": [{"name": "tpu", "resources": [{"name": "memory", "nominalQuota": 1}]}]}])

    assert denial(lambda: cluster.create_cluster_object("clusterqueues", body)) == \
        denied_by_aggregate(
            "vclusterqueue.kb.io",
            "spec.resourceGroups[0].coveredResources[1]: Duplicate value: google.com/tpu",
            "spec.resourceGroups[0].flavors[0].resources[0].name: Invalid value: cpu: must "
            "match the name in coveredResources",
            'spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: '
            '"-4": must be greater than or equal to 0',
            'spec.resourceGroups[1].flavors[0].name: Duplicate value: "tpu"')


def test_a_lending_limit_above_the_nominal_quota_is_refused(
        cluster: ControllersCluster) -> None:
    body = cluster_queue(unique("cq"), cohort="all", resourceGroups=[{
        "coveredResources": ["google.com/tpu"],
        "flavors": [{"name": "tpu", "resources": [
            {"name": "google.com/tpu", "nominalQuota": 8, "lendingLimit": 16}]}]}])

    assert denial(lambda: cluster.create_cluster_object("clusterqueues", body)) == \
        denied_by_aggregate(
            "vclusterqueue.kb.io",
            'spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: '
            '"16": must be less than or equal to the nominalQuota')


def test_a_namespace_selector_with_an_unknown_operator_is_refused(
        cluster: ControllersCluster) -> None:
    body = cluster_queue(unique("cq"), namespaceSelector={"matchExpressions": [
        {"key": "team", "operator": "Equals", "values": ["research"]}]})

    assert denial(lambda: cluster.create_cluster_object("clusterqueues", body)) == \
        denied_by_aggregate(
            "vclusterqueue.kb.io",
            'spec.namespaceSelector.matchExpressions[0].operator: Invalid value: "Equals": '
            "not a valid selector operator")


# ---------------------------------------------------------------- Kueue: ResourceFlavor

def test_a_resource_flavor_gets_the_finalizer_and_its_taints_must_be_unique(
        cluster: ControllersCluster) -> None:
    good = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
            "metadata": {"name": unique("rf")},
            "spec": {"nodeLabels": {"cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice"}}}
    taint = {"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}
    bad = {**good, "metadata": {"name": unique("rf")},
           "spec": {"nodeTaints": [taint, taint]}}

    created = cluster.create_cluster_object("resourceflavors", good)

    assert created["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    assert denial(lambda: cluster.create_cluster_object("resourceflavors", bad)) == \
        denied_by_aggregate(
            "vresourceflavor.kb.io",
            'spec.nodeTaints[1]: Duplicate value: v1.Taint{Key:"google.com/tpu", '
            'Value:"present", Effect:"NoSchedule", TimeAdded:<nil>}: taints must be unique '
            "by key and effect pair")


def test_a_resource_flavor_with_an_invalid_node_label_is_refused(
        cluster: ControllersCluster) -> None:
    body = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
            "metadata": {"name": unique("rf")}, "spec": {"nodeLabels": {"pool": "a b"}}}

    code, reason, message = denial(lambda: cluster.create_cluster_object("resourceflavors",
                                                                         body))

    assert (code, reason) == (403, "Forbidden")
    assert message.startswith('admission webhook "vresourceflavor.kb.io" denied the request: '
                              'spec.nodeLabels: Invalid value: "a b": a valid label must be '
                              "an empty string or consist of alphanumeric characters")


# ---------------------------------------------------------------- Kueue: Workload

def test_a_workload_asking_for_the_pods_resource_is_refused(
        cluster: ControllersCluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    body = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": unique("wl")},
            "spec": {"queueName": "research", "podSets": [{"name": "main", "count": 1,
                     "template": {"spec": {"containers": [{
                         "name": "c", "image": "busybox",
                         "resources": {"requests": {"pods": "1"}}}]}}}]}}

    assert denial(lambda: cluster.custom.create_namespaced_custom_object(
        *KUEUE, namespace, "workloads", body)) == denied_by_aggregate(
        "vworkload.kb.io",
        "spec.podSets[0].template.spec.containers[0].resources.requests[pods]: Invalid value: "
        "pods: the key is reserved for internal kueue use")
