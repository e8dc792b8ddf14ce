"""The sandbox's managed collection: PodMonitorings and pods into scrape jobs with the
target labels GMP attaches (prometheus-engine's pod_config.go)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sandbox.monitoring import Site, config_text, scrape_jobs, selector_matches
from shared.config import ServingConfig
from shared.kube import POD_MONITORINGS
from shared.serving.triton import LABEL_RELEASE, render_triton

SITE = Site("accelops-local", "us-central2-b", "sandbox")
SPEC = {"deployment": "toy", "model": "toy-lm", "version": "1",
        "accelerator": {"gpu": {"type": "nvidia-l4", "count": 1}},
        "replicas": {"min": 1, "max": 2},
        "autoscaling": {"metric": "nv_inference_queue_duration_us", "target": 1}}


def _monitoring(interval: int = 2) -> dict[str, Any]:
    objects = render_triton(SPEC, "gs://b/releases/toy/r-1", "r-1",
                            ServingConfig(metrics_interval_seconds=interval), replicas=1)
    [body] = [body for resource, body in objects if resource == POD_MONITORINGS]
    return body


def _pod(name: str, *, release: str = "r-1", phase: str = "Running", host_port: int | None = 41002,
         namespace: str = "serving", labels: dict[str, str] | None = None) -> dict[str, Any]:
    annotations = {} if host_port is None else {
        "sandbox.accelops.dev/host-ports": json.dumps({"8000": 41000, "8002": host_port})}
    return {
        "metadata": {
            "name": name, "namespace": namespace, "annotations": annotations,
            "labels": labels if labels is not None else {
                "app.kubernetes.io/name": "triton", "app.kubernetes.io/instance": "toy",
                LABEL_RELEASE: release, "pod-template-hash": "5d9c7"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "toy-5d9c7",
                                 "controller": True}]},
        "spec": {"containers": [{"name": "triton", "ports": [
            {"name": "http", "containerPort": 8000},
            {"name": "metrics", "containerPort": 8002}]}]},
        "status": {"phase": phase},
    }


def test_a_running_triton_pod_is_scraped_on_its_metrics_host_port_with_gmp_labels():
    [job] = scrape_jobs([_monitoring()], [_pod("toy-5d9c7-abcde")], SITE)

    assert (job.name, job.interval, job.timeout, job.path) == (
        "PodMonitoring/serving/toy/metrics", "2s", "2s", "/metrics")
    assert job.targets == ({"targets": ["127.0.0.1:41002"], "labels": {
        "project_id": "accelops-local", "location": "us-central2-b", "cluster": "sandbox",
        "namespace": "serving", "job": "toy", "instance": "toy-5d9c7-abcde:metrics",
        "container": "triton", "pod": "toy-5d9c7-abcde",
        "top_level_controller_name": "toy", "top_level_controller_type": "Deployment",
        "release": "r-1", "deployment": "toy"}},)


def test_the_interval_comes_from_the_serving_config():
    [job] = scrape_jobs([_monitoring(interval=15)], [], SITE)
    assert (job.interval, job.targets) == ("15s", ())


def test_finished_pods_pods_elsewhere_and_unstarted_pods_are_not_scraped():
    pods = [_pod("done", phase="Succeeded"), _pod("failed", phase="Failed"),
            _pod("other-ns", namespace="default"), _pod("pending", host_port=None),
            _pod("other-app", labels={"app.kubernetes.io/name": "saxml"}),
            _pod("starting", phase="Pending")]
    [job] = scrape_jobs([_monitoring()], pods, SITE)
    assert [t["labels"]["pod"] for t in job.targets] == ["starting"]


def test_a_pod_label_missing_from_the_pod_sets_no_target_label():
    pod = _pod("norelease", labels={"app.kubernetes.io/name": "triton",
                                    "app.kubernetes.io/instance": "toy"})
    [job] = scrape_jobs([_monitoring()], [pod], SITE)
    assert "release" not in job.targets[0]["labels"]


def test_to_defaults_to_the_pod_label_name_and_metadata_can_be_narrowed():
    monitoring = _monitoring()
    monitoring["spec"]["targetLabels"] = {"fromPod": [{"from": "team"}], "metadata": ["pod"]}
    pod = _pod("p", labels={"app.kubernetes.io/name": "triton",
                            "app.kubernetes.io/instance": "toy", "team": "research"})
    [job] = scrape_jobs([monitoring], [pod], SITE)
    labels = job.targets[0]["labels"]
    assert (labels["team"], labels["pod"]) == ("research", "p")
    assert not {"container", "top_level_controller_name"} & set(labels)


@pytest.mark.parametrize(("expression", "matches"), [
    ({"key": "tier", "operator": "In", "values": ["a", "b"]}, True),
    ({"key": "tier", "operator": "NotIn", "values": ["a"]}, False),
    ({"key": "tier", "operator": "Exists"}, True),
    ({"key": "zone", "operator": "DoesNotExist"}, True),
    ({"key": "zone", "operator": "In", "values": ["x"]}, False),
])
def test_match_expressions_select_as_kubernetes_does(expression, matches):
    assert selector_matches({"matchExpressions": [expression]}, {"tier": "a"}) is matches


def test_each_job_reads_its_targets_from_its_own_file(tmp_path):
    [job] = scrape_jobs([_monitoring()], [_pod("p")], SITE)
    config = json.loads(config_text([job], tmp_path))
    [scrape] = config["scrape_configs"]
    assert scrape["job_name"] == "PodMonitoring/serving/toy/metrics"
    assert scrape["file_sd_configs"] == [{"files": [str(tmp_path / job.file_name)]}]
    assert json.loads(job.file_sd()) == list(job.targets)


def test_without_the_prometheus_binary_the_sandbox_says_how_to_install_it(monkeypatch):
    from sandbox.monitoring import PrometheusNotInstalledError, find_prometheus
    from sandbox.monitoring import prometheus as module
    monkeypatch.setattr(module, "PROMETHEUS_BINARY", "/nonexistent/prometheus")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("ACCELOPS_PROMETHEUS_BINARY", raising=False)
    with pytest.raises(PrometheusNotInstalledError, match="make prometheus"):
        find_prometheus()
