"""What a Triton release is, in the bucket and in the cluster (pure).

**Immutable releases.** Each rollout copies the version's artifacts (server-side)
into a snapshot of its own, a complete model repository::

    gs://RELEASES/releases/<deployment>/<release id>/<model>/config.pbtxt   (pinned)
    gs://RELEASES/releases/<deployment>/<release id>/<model>/<N>/<files...>

and runs it in a Deployment and Service of its own (``<deployment>-<release id>``).
The served config is pinned to version N (``version_policy: specific``) and names
the model, whatever the upload said, so the snapshot serves exactly one version.

**Every replica serves it.** In explicit model-control mode a fresh Triton loads
nothing unless told; a load request sent through a Service reaches one replica.
So nothing is loaded by request: the pod template says ``--load-model=<model>`` on
the release's repository, and every pod made from it — the first, those the HPA
adds, those that restart — loads exactly that at start, with ``--exit-on-error``
so a version that fails to load never reports ready.

**Traffic moves by weight, not by pods.** Clients reach a model through the
serving Gateway: the model's HTTPRoute (:mod:`shared.serving.gateway`) sends each
request to one release's Service, chosen by the route's weights. A new release
starts with none, takes a canary's share once ready, and all of it once promoted
(:mod:`shared.serving.canary`); the release it replaced keeps its pods a while
after its weight went to 0 (load balancers learn of a weight change
asynchronously), then they sleep in preStop and Triton drains in-flight requests
on SIGTERM, so no request is lost in a switch.

**Rollback** sets the route back to the release that serves and retires the new
one; the serving release was never touched.
"""

from __future__ import annotations

import re
from typing import Any

from shared.config import ServingConfig
from shared.kube import DEPLOYMENTS, HORIZONTAL_POD_AUTOSCALERS, POD_MONITORINGS, SERVICES, Resource
from shared.names import dns_label, short_hash
from shared.serving.ledger import LABEL_MODEL

__all__ = [
    "ANNOTATION_RELEASE",
    "ANNOTATION_VERSION",
    "LABEL_INSTANCE",
    "LABEL_RELEASE",
    "LABEL_SERVER",
    "METRICS_FLAGS",
    "MODELS_PORT",
    "TARGET_LABEL_DEPLOYMENT",
    "TARGET_LABEL_RELEASE",
    "release_id",
    "release_name",
    "release_prefix",
    "release_selector",
    "render_triton",
    "snapshot_names",
]

LABEL_SERVER = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_MANAGED = "app.kubernetes.io/managed-by"
LABEL_RELEASE = "accelops.dev/release"
ANNOTATION_RELEASE = "accelops.dev/release"
ANNOTATION_VERSION = "accelops.dev/model-version"
HTTP_PORT, GRPC_PORT, METRICS_PORT = 8000, 8001, 8002
MODELS_PORT = HTTP_PORT
# Seconds an old pod keeps serving after it leaves the endpoints (load balancers and
# kube-proxy learn of it asynchronously), then Triton's own drain.
PRESTOP_SLEEP_SECONDS = 10
EXIT_TIMEOUT_SECONDS = 30
GPU_RESOURCE = "nvidia.com/gpu"
GPU_NODE_LABEL = "cloud.google.com/gke-accelerator"
# What the canary's SLO gate reads (shared/serving/release_metrics.py). Triton always
# counts nv_inference_request_success/_failure; at 24.08 its only per-request latency
# distribution is the request-duration summary (quantiles 0.5 ... 0.999 by default),
# off unless asked for. (It has no latency histogram: that came with r24.11.)
METRICS_FLAGS = ("--metrics-config=summary_latencies=true",)
# Target labels managed Prometheus copies from the pod onto every series scraped from
# it (PodMonitoring targetLabels.fromPod). Triton's own series carry a ``model``
# label already: a target label of that name would rename Triton's to
# ``exported_model``, so the model is read from Triton's label and not mapped.
TARGET_LABEL_RELEASE = "release"
TARGET_LABEL_DEPLOYMENT = "deployment"


def release_id(manifest_key: str) -> str:
    """``r-<hash>`` of the manifest's bucket, name and generation: the same upload
    always names the same snapshot, so a redelivered event reuses its copies."""
    return "r-" + short_hash(manifest_key, length=12)


def release_prefix(deployment: str, rid: str) -> str:
    return f"releases/{deployment}/{rid}/"


def snapshot_names(prefix: str, model: str, version: int,
                   files: list[str]) -> dict[str, str]:
    """Artifact path below the upload's version directory → object name in the
    snapshot. ``config.pbtxt`` goes beside the version directory, the rest in it."""
    names: dict[str, str] = {}
    for path in files:
        if path == "config.pbtxt":
            names[path] = f"{prefix}{model}/config.pbtxt"
        else:
            names[path] = f"{prefix}{model}/{version}/{path}"
    return names


_NAME_MAX = 63
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# Release ids are "r-" + 12 hex digits ("-b<N>" added for a rollback by hand); anything
# longer is hashed so the deployment keeps most of the name.
_RELEASE_MAX = 20


def release_name(deployment: str, release_id: str) -> str:
    """The Deployment, Service, HPA and HealthCheckPolicy of one release:
    ``<deployment>-<release id>``, a DNS-1035 label of at most 63 characters.

    Deterministic, so a redelivered upload finds the objects it created. When the plain
    name does not fit, the deployment is truncated and a hash of both parts keeps two
    deployments sharing a long prefix apart."""
    rid = dns_label(release_id)
    if rid != release_id or not rid or len(rid) > _RELEASE_MAX:
        rid = "r-" + short_hash(release_id, length=12)
    name = f"{deployment}-{rid}"
    if len(name) <= _NAME_MAX and _DNS_1035.match(name):
        return name
    tail = f"-{short_hash(deployment, release_id, length=8)}-{rid}"
    room = _NAME_MAX - len(tail)
    stem = dns_label(deployment, room)
    if not stem or not stem[0].isalpha():
        # A Service name starts with a letter (DNS-1035): prefix rather than drop text.
        stem = dns_label(f"m-{stem}", room)
    return stem + tail


def _labels(deployment: str, model: str) -> dict[str, str]:
    return {LABEL_SERVER: "triton", LABEL_INSTANCE: deployment, LABEL_MODEL: model,
            LABEL_MANAGED: "accelops"}


def _selector(deployment: str) -> dict[str, str]:
    return {LABEL_SERVER: "triton", LABEL_INSTANCE: deployment}


def release_selector(deployment: str, rid: str) -> dict[str, str]:
    """The pods of one release of ``deployment``."""
    return {**_selector(deployment), LABEL_RELEASE: rid}


def _deployment(spec: dict[str, Any], repository: str, rid: str, config: ServingConfig,
                replicas: int | None) -> dict[str, Any]:
    deployment, model = spec["deployment"], spec["model"]
    gpu = spec["accelerator"]["gpu"]
    probe = {"httpGet": {"path": "/v2/health/ready", "port": "http"},
             "periodSeconds": 5, "failureThreshold": 3}
    pod_labels = {**_labels(deployment, model), LABEL_RELEASE: rid}
    body: dict[str, Any] = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": release_name(deployment, rid), "namespace": config.namespace,
                     "labels": pod_labels,
                     "annotations": {ANNOTATION_RELEASE: rid,
                                     ANNOTATION_VERSION: spec["version"]}},
        "spec": {
            "selector": {"matchLabels": release_selector(deployment, rid)},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "minReadySeconds": 5,
            "progressDeadlineSeconds": config.rollout_timeout_seconds,
            "revisionHistoryLimit": 5,
            "template": {
                "metadata": {"labels": pod_labels,
                             "annotations": {ANNOTATION_RELEASE: rid,
                                             ANNOTATION_VERSION: spec["version"]}},
                "spec": {
                    "serviceAccountName": config.triton_service_account,
                    "nodeSelector": {GPU_NODE_LABEL: gpu["type"]},
                    "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists",
                                     "effect": "NoSchedule"}],
                    "terminationGracePeriodSeconds":
                        PRESTOP_SLEEP_SECONDS + EXIT_TIMEOUT_SECONDS + 5,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 1000,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "triton",
                        "image": config.triton_image,
                        "command": ["tritonserver"],
                        "args": [
                            f"--model-repository={repository}",
                            "--model-control-mode=explicit",
                            f"--load-model={model}",
                            "--strict-readiness=true",
                            "--exit-on-error=true",
                            f"--exit-timeout-secs={EXIT_TIMEOUT_SECONDS}",
                            f"--http-port={HTTP_PORT}", f"--grpc-port={GRPC_PORT}",
                            f"--metrics-port={METRICS_PORT}",
                            *METRICS_FLAGS,
                        ],
                        "ports": [{"name": "http", "containerPort": HTTP_PORT},
                                  {"name": "grpc", "containerPort": GRPC_PORT},
                                  {"name": "metrics", "containerPort": METRICS_PORT}],
                        "resources": {"limits": {GPU_RESOURCE: str(gpu["count"])},
                                      "requests": {"cpu": "2", "memory": "8Gi"}},
                        # A model that fails to load ends Triton; its last log lines
                        # become the termination message the rollout reports.
                        "terminationMessagePolicy": "FallbackToLogsOnError",
                        "readinessProbe": probe,
                        "livenessProbe": {"httpGet": {"path": "/v2/health/live",
                                                      "port": "http"},
                                          "periodSeconds": 10, "failureThreshold": 3},
                        # Loading a large model takes minutes: liveness waits for it.
                        "startupProbe": {"httpGet": {"path": "/v2/health/live",
                                                     "port": "http"},
                                         "periodSeconds": 5, "failureThreshold": 120},
                        "lifecycle": {"preStop": {"sleep": {
                            "seconds": PRESTOP_SLEEP_SECONDS}}},
                        "securityContext": {"allowPrivilegeEscalation": False,
                                            "capabilities": {"drop": ["ALL"]}},
                    }],
                },
            },
        },
    }
    if replicas is not None:
        body["spec"]["replicas"] = replicas
    return body


def render_triton(spec: dict[str, Any], repository: str, rid: str, config: ServingConfig,
                  *, replicas: int | None) -> list[tuple[Resource, dict[str, Any]]]:
    """The objects that serve one release, in the order to apply them: its Service,
    the model's PodMonitoring (every release's pods), its Deployment and HPA. The
    model's route decides which release gets requests.

    ``spec`` is the manifest without its files (``DeployManifest.model_dump``, with
    ``deployment`` filled in); ``repository`` the release's gs:// prefix.
    ``replicas`` only when creating the Deployment: afterwards the HPA owns it.
    """
    deployment, model = spec["deployment"], spec["model"]
    namespace = config.namespace
    labels = _labels(deployment, model)
    name = release_name(deployment, rid)
    release_labels = {**labels, LABEL_RELEASE: rid}
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": release_labels},
        "spec": {"selector": release_selector(deployment, rid),
                 "ports": [{"name": "http", "port": HTTP_PORT, "targetPort": "http"},
                           {"name": "grpc", "port": GRPC_PORT, "targetPort": "grpc"},
                           {"name": "metrics", "port": METRICS_PORT,
                            "targetPort": "metrics"}]},
    }
    scaling = spec["autoscaling"]
    hpa = {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": namespace, "labels": release_labels},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                               "name": name},
            "minReplicas": spec["replicas"]["min"], "maxReplicas": spec["replicas"]["max"],
            # Read through the custom-metrics adapter from managed Prometheus, which
            # scrapes the PodMonitoring below.
            "metrics": [{"type": "Pods", "pods": {
                "metric": {"name": f"prometheus.googleapis.com|{scaling['metric']}|gauge"},
                "target": {"type": "AverageValue",
                           "averageValue": str(scaling["target"])}}}],
        },
    }
    monitoring = {
        "apiVersion": "monitoring.googleapis.com/v1", "kind": "PodMonitoring",
        "metadata": {"name": deployment, "namespace": namespace, "labels": labels},
        "spec": {"selector": {"matchLabels": _selector(deployment)},
                 "endpoints": [{"port": "metrics",
                                "interval": f"{config.metrics_interval_seconds}s"}],
                 "targetLabels": {"fromPod": [
                     {"from": LABEL_RELEASE, "to": TARGET_LABEL_RELEASE},
                     {"from": LABEL_INSTANCE, "to": TARGET_LABEL_DEPLOYMENT}]}},
    }
    return [
        (SERVICES, service),
        (POD_MONITORINGS, monitoring),
        (DEPLOYMENTS, _deployment(spec, repository, rid, config, replicas)),
        (HORIZONTAL_POD_AUTOSCALERS, hpa),
    ]
