"""Rendering an admitted job request into a Kueue-queued JobSet.

Follows GKE's conventions for TPU workloads: one replicated job whose replicas are
the slices, each Job running one Pod per TPU VM of the slice (``parallelism ==
completions == VMs``, indexed so each Pod knows its worker id), Pods pinned to the
slice shape with the ``gke-tpu-accelerator`` / ``gke-tpu-topology`` node labels and
requesting every chip of their VM, and JobSet's exclusive-topology annotation so
each slice lands on a node pool of its own.

The Pod is assembled from an allow-list: image, command, args and environment come
from the request; everything security-relevant (service account, privileges, host
access, volumes) is fixed here and cannot be influenced by the request.
"""

from __future__ import annotations

from typing import Any

from shared.jobs.policy import Admission
from shared.names import dns_label, jobset_name, request_key
from shared.slices.labels import ANNOTATION_CAPACITY, pinning_selector

__all__ = [
    "ANNOTATION_REQUEST_HASH",
    "ANNOTATION_REQUEST_ID",
    "ANNOTATION_TPU_TYPE",
    "JOBSET_GROUP",
    "JOBSET_PLURAL",
    "JOBSET_VERSION",
    "LABEL_QUEUE",
    "LABEL_REQUEST_KEY",
    "REPLICATED_JOB",
    "render_jobset",
]

JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_VERSION = "v1alpha2"
JOBSET_PLURAL = "jobsets"
REPLICATED_JOB = "slice"
CONTAINER = "main"

LABEL_QUEUE = "kueue.x-k8s.io/queue-name"
LABEL_PRIORITY = "kueue.x-k8s.io/priority-class"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_TEAM = "accelops.dev/team"
LABEL_JOB = "accelops.dev/job"
# Hash of the request id: how submit_job finds a reused id across names and namespaces.
LABEL_REQUEST_KEY = "accelops.dev/request-key"
ANNOTATION_EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
ANNOTATION_REQUEST_ID = "accelops.dev/request-id"
ANNOTATION_REQUEST_HASH = "accelops.dev/request-hash"
ANNOTATION_TPU_TYPE = "accelops.dev/tpu-type"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
TPU_RESOURCE = "google.com/tpu"
# Ports TPU runtimes use between hosts of a slice (as in GKE's TPU examples).
TPU_PORTS = (8471, 8080)


def _container(admission: Admission) -> dict[str, Any]:
    request, shape = admission.request, admission.shape
    chips = str(shape.chips_per_vm)
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": request.image,
        "ports": [{"containerPort": port} for port in TPU_PORTS],
        "resources": {"requests": {TPU_RESOURCE: chips}, "limits": {TPU_RESOURCE: chips}},
        "securityContext": {
            "privileged": False,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    if request.command:
        container["command"] = list(request.command)
    if request.args:
        container["args"] = list(request.args)
    if request.env:
        container["env"] = [{"name": k, "value": v} for k, v in sorted(request.env.items())]
    return container


def _capacity(admission: Admission) -> str:
    """Where the slices' capacity comes from: the request's choice, else the config's."""
    tpu, defaults = admission.request.tpu, admission.slices
    if tpu.reservation:
        return f"reservation/{tpu.reservation}"
    if tpu.spot is not None:
        return "spot" if tpu.spot else "on-demand"
    if defaults.reservation:
        return f"reservation/{defaults.reservation}"
    return "spot" if defaults.spot else "on-demand"


def render_jobset(admission: Admission, request_id: str) -> dict[str, Any]:
    """The JobSet manifest for an admitted request (pure; same input, same output)."""
    request, team, shape = admission.request, admission.team, admission.shape
    name = jobset_name(request.name, request_id)
    node_selector = shape.node_selector()
    if admission.slices.enabled:
        node_selector.update(pinning_selector(team.namespace, name))
    labels = {
        LABEL_QUEUE: team.queue,
        LABEL_PRIORITY: request.priority,
        LABEL_MANAGED_BY: "accelops",
        LABEL_TEAM: dns_label(request.team) or "team",
        LABEL_JOB: dns_label(request.name) or "job",
        LABEL_REQUEST_KEY: request_key(request_id),
    }
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "nodeSelector": node_selector,
        "containers": [_container(admission)],
    }
    return {
        "apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": team.namespace,
            "labels": labels,
            "annotations": {
                ANNOTATION_EXCLUSIVE: NODEPOOL_LABEL,
                ANNOTATION_REQUEST_ID: request_id,
                ANNOTATION_REQUEST_HASH: request.content_hash(),
                ANNOTATION_TPU_TYPE: shape.type,
                ANNOTATION_CAPACITY: _capacity(admission),
            },
        },
        "spec": {
            # Created suspended: Kueue admits the workload by unsuspending it once its
            # ClusterQueue has quota, so no Pod exists before capacity is granted.
            "suspend": True,
            "failurePolicy": {"maxRestarts": request.max_restarts},
            "replicatedJobs": [
                {
                    "name": REPLICATED_JOB,
                    "replicas": request.tpu.slices,
                    "template": {
                        "spec": {
                            "parallelism": shape.vms,
                            "completions": shape.vms,
                            "completionMode": "Indexed",
                            "backoffLimit": 0,
                            "template": {
                                "metadata": {"labels": {LABEL_TEAM: labels[LABEL_TEAM],
                                                        LABEL_JOB: labels[LABEL_JOB]}},
                                "spec": pod_spec,
                            },
                        }
                    },
                }
            ],
        },
    }
