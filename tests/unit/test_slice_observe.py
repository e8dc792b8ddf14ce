"""Turning raw Kubernetes and GKE objects into the planner's views."""

from __future__ import annotations

from typing import Any

from shared.config import SliceConfig, parse_config
from shared.jobspec.policy import check_policy
from shared.jobspec.render import render_jobset
from shared.jobspec.request import parse_job_request
from shared.nodepools import NodePoolInfo
from shared.slices.observe import build_observed
from tests.unit.conftest import CONFIG_YAML


def _jobset(request_body: dict[str, Any], **status: Any) -> dict[str, Any]:
    config = parse_config(CONFIG_YAML)
    body = render_jobset(check_policy(parse_job_request(request_body), config), "r-1")
    body["metadata"]["creationTimestamp"] = "2026-11-21T08:00:00Z"
    body["spec"]["suspend"] = False
    body["status"] = status
    return body


def _pod(jobset: dict[str, Any], node: str | None, phase: str) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": jobset["metadata"]["namespace"],
                         "labels": {"jobset.sigs.k8s.io/jobset-name":
                                    jobset["metadata"]["name"]}},
            "spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}


def test_a_rendered_jobset_is_read_back_with_its_shape_slices_and_pods(request_body):
    js = _jobset(request_body)
    pods = [_pod(js, "n1", "Running"), _pod(js, None, "Pending"), _pod(js, "n1", "Succeeded")]
    nodes = [{"metadata": {"name": "n1", "labels": {"cloud.google.com/gke-nodepool": "p0"}}},
             {"metadata": {"name": "n2", "labels": {"cloud.google.com/gke-nodepool": "p0"}}}]
    pools = [NodePoolInfo("p0", "RUNNING", "ct5lp-hightpu-4t",
                          {"accelops.dev/jobset": js["metadata"]["name"],
                           "accelops.dev/jobset-namespace": "research",
                           "accelops.dev/slice": "0"}, 4)]

    observed = build_observed([js], pods, nodes, pools, SliceConfig())

    [view] = observed.jobsets
    assert view.shape is not None
    assert (view.shape.type, view.slices, view.suspended) == ("v5litepod-16", 2, False)
    assert view.active_pods == 2
    assert view.capacity == "on-demand"
    [pool] = observed.pools
    assert (pool.nodes, pool.active_pods, pool.slice_index) == (2, 1, 0)
    assert pool.jobset_key == view.key


def test_completed_and_failed_conditions_mark_a_jobset_finished(request_body):
    done = _jobset(request_body, conditions=[
        {"type": "Completed", "status": "True", "lastTransitionTime": "2026-11-21T09:00:00Z"}])
    [view] = build_observed([done], [], [], [], SliceConfig()).jobsets
    assert view.finished_at is not None
    assert view.wants_slices is False


def test_a_foreign_jobset_is_understood_from_its_node_selector():
    foreign = {"metadata": {"name": "x", "namespace": "ml",
                            "creationTimestamp": "2026-11-21T08:00:00Z"},
               "spec": {"suspend": False, "replicatedJobs": [{"name": "w", "replicas": 3,
                        "template": {"spec": {"template": {"spec": {"nodeSelector": {
                            "cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
                            "cloud.google.com/gke-tpu-topology": "4x4x4"}}}}}}]}}
    [view] = build_observed([foreign], [], [], [], SliceConfig(spot=True)).jobsets
    assert view.shape is not None
    assert (view.shape.type, view.slices, view.capacity) == ("v5p-128", 3, "spot")


def test_a_jobset_without_tpus_is_ignored_by_the_planner():
    cpu = {"metadata": {"name": "cpu", "namespace": "ml"},
           "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {
               "spec": {"containers": []}}}}}]}}
    [view] = build_observed([cpu], [], [], [], SliceConfig()).jobsets
    assert view.shape is None
    assert view.wants_slices is False
