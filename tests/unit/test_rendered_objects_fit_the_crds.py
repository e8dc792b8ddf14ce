"""Every custom resource accelops renders is one the pinned CRDs accept, and objects the
real API server refuses are refused by the sandbox's copy of the same schemas."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from sandbox.cluster.flavors import Assignment, Flavor
from sandbox.cluster.workloads import Priority, pod_set_assignments, workload_body
from sandbox.kubeapi.custom_resources import decode_custom_resource, validate_custom_resource
from shared.config import ServingConfig, parse_config
from shared.deployment.manifests import base_files, overlay_files
from shared.serving.ledger import Rollout
from shared.serving.saxml_rollout import model_server_jobset
from shared.serving.triton import render_triton
from tests.job_objects import jobset as submitted_jobset

REPO = Path(__file__).resolve().parents[2]
CONFIG = parse_config("""
teams:
  research: {namespace: research, queue: research-queue, tpu_chips: 64}
  inference: {namespace: inference, queue: inference-queue, tpu_types: [v5litepod-4]}
serving:
  saxml_team: inference
""")


def errors_of(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    """The field errors the sandbox API finds in ``obj`` once decoded, as strings."""
    body = copy.deepcopy(obj)
    group, _, version = body["apiVersion"].rpartition("/")
    decode_custom_resource(group, version, body["kind"], body)
    return [str(e) for e in validate_custom_resource(group, version, body["kind"], body, old)]


def overlay_objects(tmp_path: Path) -> list[dict[str, Any]]:
    files = overlay_files(CONFIG, "acme-ml", tmp_path / "overlay", REPO)
    return [doc for name in ("teams.yaml", "serving.yaml")
            for doc in yaml.safe_load_all(files[name]) if doc]


def base_objects() -> list[dict[str, Any]]:
    return [doc for text in base_files().values() for doc in yaml.safe_load_all(text) if doc]


CRD_KINDS = {"JobSet", "ClusterQueue", "LocalQueue", "ResourceFlavor",
             "WorkloadPriorityClass", "PodMonitoring", "Workload"}


@pytest.mark.parametrize(("tpu", "slices", "max_restarts"),
                         [("v5litepod-16", 2, 0), ("v5litepod-4", 1, 3), ("v4-32", 4, 1),
                          ("v6e-256", 1, 0), ("v5p-8", 3, 2)])
def test_every_jobset_submit_job_renders_fits_the_jobset_crd(tpu, slices, max_restarts):
    body = submitted_jobset("r1", tpu=tpu, slices=slices, max_restarts=max_restarts)

    assert errors_of(body) == []


def test_the_saxml_model_server_jobset_fits_the_jobset_crd():
    rollout = Rollout(id="r-7", key="gs://m/lm#1", version="v1", state="rolling-out",
                      spec={"deployment": "lm2b", "accelerator": {"tpu": "v5litepod-4"}})

    body = model_server_jobset(CONFIG, rollout, "gs://sax/sax-root")

    assert errors_of(body) == []


def test_the_base_manifests_flavors_and_priority_classes_fit_their_crds():
    objects = [o for o in base_objects() if o["kind"] in CRD_KINDS]

    assert {o["kind"] for o in objects} == {"ResourceFlavor", "WorkloadPriorityClass"}
    assert {o["metadata"]["name"]: errors_of(o) for o in objects} == {
        o["metadata"]["name"]: [] for o in objects}


def test_each_teams_cluster_queue_and_local_queue_fit_their_crds(tmp_path):
    objects = [o for o in overlay_objects(tmp_path) if o["kind"] in CRD_KINDS]

    assert sorted(o["kind"] for o in objects) == ["ClusterQueue", "ClusterQueue",
                                                  "LocalQueue", "LocalQueue"]
    assert [errors_of(o) for o in objects] == [[] for _ in objects]


def test_the_pod_monitoring_of_a_triton_release_fits_the_pod_monitoring_crd():
    spec = {"server": "triton", "model": "toy-lm", "version": "v2", "deployment": "toy-lm",
            "accelerator": {"gpu": {"type": "nvidia-l4", "count": 1}, "tpu": None},
            "replicas": {"min": 2, "max": 4},
            "autoscaling": {"metric": "nv_inference_pending_request_count", "target": 10}}
    rendered = {body["kind"]: body for _, body in
                render_triton(spec, "gs://b/releases/toy-lm/r-1/", "r-1", ServingConfig(),
                              replicas=2)}

    assert errors_of(rendered["PodMonitoring"]) == []


def test_the_workload_the_sandboxs_kueue_makes_for_a_jobset_fits_the_workload_crd():
    js = submitted_jobset("r1", slices=2)
    body = workload_body(js, "research-queue",
                         Priority(500, "medium", "kueue.x-k8s.io/workloadpriorityclass"))
    admitted = copy.deepcopy(body)
    flavor = Flavor("tpu-v5-lite-podslice", 64)
    admitted["status"] = {
        "admission": {"clusterQueue": "research-cluster-queue", "podSetAssignments":
                      pod_set_assignments(js, Assignment({"slice": flavor}, {flavor.name: 32}))},
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                        "message": "Quota reserved in ClusterQueue research-cluster-queue",
                        "lastTransitionTime": "2026-11-23T10:00:00Z"}]}

    assert errors_of(body) == []
    assert errors_of(admitted) == []
    admitted["status"]["admission"]["podSetAssignments"].append(
        {"name": "extra", "count": 1})
    assert errors_of(admitted) == ['<nil>: Invalid value: "object": podSetAssignments must '
                                   "have the same number of podSets as the spec"]


# --- what the real server refuses --------------------------------------------------------


def a_jobset() -> dict[str, Any]:
    return submitted_jobset("r1")


def a_cluster_queue(tmp_path: Path) -> dict[str, Any]:
    return next(o for o in overlay_objects(tmp_path) if o["kind"] == "ClusterQueue")


def a_local_queue(tmp_path: Path) -> dict[str, Any]:
    return next(o for o in overlay_objects(tmp_path) if o["kind"] == "LocalQueue")


def test_a_replicated_job_group_name_is_not_a_field_of_jobset_v0_7_2():
    body = a_jobset()
    body["spec"]["replicatedJobs"][0]["groupName"] = "workers"

    pruned = decode_custom_resource("jobset.x-k8s.io", "v1alpha2", "JobSet", body)

    assert pruned == ["spec.replicatedJobs[0].groupName"]
    assert "groupName" not in body["spec"]["replicatedJobs"][0]


def test_a_local_queue_fair_sharing_is_not_a_field_of_kueue_v0_10_1(tmp_path):
    body = a_local_queue(tmp_path)
    body["spec"]["fairSharing"] = {"weight": 2}

    assert decode_custom_resource("kueue.x-k8s.io", "v1beta1", "LocalQueue", body) == [
        "spec.fairSharing"]


def test_an_unknown_queueing_strategy_is_an_unsupported_value(tmp_path):
    body = a_cluster_queue(tmp_path)
    body["spec"]["queueingStrategy"] = "Foo"

    assert errors_of(body)[0] == ('spec.queueingStrategy: Unsupported value: "Foo": supported '
                                  'values: "StrictFIFO", "BestEffortFIFO"')


def test_a_replicated_job_without_a_template_is_refused():
    body = a_jobset()
    del body["spec"]["replicatedJobs"][0]["template"]

    assert errors_of(body)[0] == "spec.replicatedJobs[0].template: Required value"


def test_flavors_whose_resources_do_not_match_the_covered_resources_fail_the_cel_rule(
        tmp_path):
    body = a_cluster_queue(tmp_path)
    body["spec"]["resourceGroups"][0]["coveredResources"] = ["google.com/tpu", "cpu"]

    assert errors_of(body) == [
        'spec.resourceGroups[0]: Invalid value: "object": flavors must have the same number '
        "of resources as the coveredResources"]


def test_a_local_queues_cluster_queue_cannot_change(tmp_path):
    old = a_local_queue(tmp_path)
    decode_custom_resource("kueue.x-k8s.io", "v1beta1", "LocalQueue", old)
    new = copy.deepcopy(old)
    new["spec"]["clusterQueue"] = "elsewhere"

    assert errors_of(new, old) == ['spec.clusterQueue: Invalid value: "string": field is '
                                   'immutable']
    assert errors_of(new) == []  # a transition rule: checked on update only


def test_the_serving_gateway_of_the_overlay_fits_the_gateway_crd(tmp_path):
    [gateway] = [o for o in overlay_objects(tmp_path) if o["kind"] == "Gateway"]

    assert errors_of(gateway) == []
    assert gateway["metadata"]["namespace"] == CONFIG.serving.namespace
    assert gateway["spec"]["gatewayClassName"] == "gke-l7-rilb"
    [listener] = gateway["spec"]["listeners"]
    assert listener["allowedRoutes"]["namespaces"] == {"from": "Same"}
