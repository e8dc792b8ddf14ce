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

Failures: a host of a slice that is preempted (spot) or taken for maintenance fails
its Pod with the ``DisruptionTarget`` condition (the kubelet's graceful node shutdown,
or the pod garbage collector when the node is gone). Such a Pod must not spend the
user's ``max_restarts``, or one preemption would fail a job that asked for none. So,
as JobSet v0.7.2's host-maintenance example does, the Job template carries a
``podFailurePolicy`` rule failing the Job at once on ``DisruptionTarget`` (the Job's
failure reason becomes ``PodFailurePolicy``), and the JobSet's ``failurePolicy`` has a
rule restarting the whole JobSet on that reason without counting it
(``RestartJobSetAndIgnoreMaxRestarts``). Any other failure (a container exiting non-zero
fails its Job at once: ``backoffLimit: 0``, reason ``BackoffLimitExceeded``) matches no
rule, so JobSet's default action applies: restart, counted against
``failurePolicy.maxRestarts = max_restarts``. A ``podFailurePolicy`` needs
``restartPolicy: Never`` (the Job API refuses it otherwise), so a caller that wants
containers restarted in place (``restart_policy="OnFailure"``) gets neither rule.
"""

from __future__ import annotations

from typing import Any, Literal

from shared.jobspec.labels import (
    ANNOTATION_CAPACITY,
    ANNOTATION_EXCLUSIVE,
    ANNOTATION_REQUEST_HASH,
    ANNOTATION_REQUEST_ID,
    ANNOTATION_TPU_TYPE,
    LABEL_JOB,
    LABEL_MANAGED_BY,
    LABEL_PRIORITY,
    LABEL_QUEUE,
    LABEL_REQUEST_KEY,
    LABEL_TEAM,
    MANAGED_BY,
    NODEPOOL_LABEL,
    pinning_selector,
)
from shared.jobspec.policy import Admission
from shared.names import dns_label, jobset_name, request_key

__all__ = [
    "DISRUPTION_RULE",
    "JOBSET_GROUP",
    "JOBSET_PLURAL",
    "JOBSET_VERSION",
    "REPLICATED_JOB",
    "render_jobset",
]

JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_VERSION = "v1alpha2"
JOBSET_PLURAL = "jobsets"
REPLICATED_JOB = "slice"
CONTAINER = "main"

TPU_RESOURCE = "google.com/tpu"
# Ports TPU runtimes use between hosts of a slice (as in GKE's TPU examples).
TPU_PORTS = (8471, 8080)
# The JobSet failure-policy rule for disrupted hosts. JobSet's webhook wants rule names
# matching ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$ (no hyphens), 1-128 characters.
DISRUPTION_RULE = "restartOnHostDisruption"
# The Job failure reason a podFailurePolicy FailJob rule gives (batch/v1 JobReasonPodFailurePolicy).
JOB_REASON_POD_FAILURE_POLICY = "PodFailurePolicy"
RestartPolicy = Literal["Never", "OnFailure"]


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


def _failure_policy(max_restarts: int, restart_policy: RestartPolicy) -> dict[str, Any]:
    """JobSet's failurePolicy: disruptions restart for free, anything else is counted."""
    policy: dict[str, Any] = {"maxRestarts": max_restarts}
    if restart_policy == "Never":
        policy["rules"] = [{
            "name": DISRUPTION_RULE,
            "action": "RestartJobSetAndIgnoreMaxRestarts",
            "onJobFailureReasons": [JOB_REASON_POD_FAILURE_POLICY],
        }]
    return policy


def _job_spec(admission: Admission, pod_template: dict[str, Any],
              restart_policy: RestartPolicy) -> dict[str, Any]:
    vms = admission.shape.vms
    spec: dict[str, Any] = {
        "parallelism": vms,
        "completions": vms,
        "completionMode": "Indexed",
        # One failed pod fails its slice's Job, and JobSet restarts every slice: a
        # multi-host TPU program cannot go on with one host replaced.
        "backoffLimit": 0,
    }
    if restart_policy == "Never":
        # A pod failed by a disruption (DisruptionTarget: node shutdown for a spot
        # preemption or maintenance, eviction, pod GC of a lost node) fails the Job with
        # reason PodFailurePolicy, which the JobSet rule above does not count. The
        # pattern's status is spelled out: the JobSet CRD's schema requires it (the Job
        # API would default it to True, but the template is validated as JobSet's).
        spec["podFailurePolicy"] = {"rules": [{
            "action": "FailJob",
            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
        }]}
    spec["template"] = pod_template
    return spec


def render_jobset(admission: Admission, request_id: str, *,
                  restart_policy: RestartPolicy = "Never") -> dict[str, Any]:
    """The JobSet manifest for an admitted request (pure; same input, same output).

    ``restart_policy="OnFailure"`` (a server restarted in place, not a batch program):
    the pods restart their containers, and the Job carries no ``podFailurePolicy``
    (the Job API allows one only with ``Never``), so disruptions count as failures.
    """
    request, team, shape = admission.request, admission.team, admission.shape
    name = jobset_name(request.name, request_id)
    node_selector = shape.node_selector()
    if admission.slices.enabled:
        node_selector.update(pinning_selector(team.namespace, name))
    labels = {
        LABEL_QUEUE: team.queue,
        LABEL_PRIORITY: request.priority,
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_TEAM: dns_label(request.team) or "team",
        LABEL_JOB: dns_label(request.name) or "job",
        LABEL_REQUEST_KEY: request_key(request_id),
    }
    pod_spec: dict[str, Any] = {
        "restartPolicy": restart_policy,
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
            "failurePolicy": _failure_policy(request.max_restarts, restart_policy),
            "replicatedJobs": [
                {
                    "name": REPLICATED_JOB,
                    "replicas": request.tpu.slices,
                    "template": {"spec": _job_spec(admission, {
                        "metadata": {"labels": {LABEL_TEAM: labels[LABEL_TEAM],
                                                LABEL_JOB: labels[LABEL_JOB]}},
                        "spec": pod_spec,
                    }, restart_policy)},
                }
            ],
        },
    }
