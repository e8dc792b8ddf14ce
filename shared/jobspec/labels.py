"""Every label and annotation key accelops writes on, or reads from, Kubernetes objects
and GKE node pools, in one place.

Keys under ``accelops.dev/`` are accelops' own. The rest belong to Kubernetes, Kueue,
JobSet and GKE: accelops writes them where their owner asks it to (a queue name on a
JobSet) and reads them where their owner writes them (the slice index JobSet puts on
every pod).

A provisioned pool carries its JobSet's namespace, name and slice index as node labels;
a JobSet rendered by accelops selects nodes by the same labels, so its pods can only
land on the pools made for it.
"""

from __future__ import annotations

__all__ = [
    "ACCELERATOR_LABEL",
    "ANNOTATION_CAPACITY",
    "ANNOTATION_EXCLUSIVE",
    "ANNOTATION_PROVISION",
    "ANNOTATION_REQUEST_HASH",
    "ANNOTATION_REQUEST_ID",
    "ANNOTATION_SLICE_FAILURE",
    "ANNOTATION_TPU_TYPE",
    "JOBSET_NAME_LABEL",
    "KUEUE_JOB_UID_LABEL",
    "LABEL_COMPLETION_INDEX",
    "LABEL_JOB",
    "LABEL_JOBSET",
    "LABEL_JOBSET_NAMESPACE",
    "LABEL_JOB_INDEX",
    "LABEL_KEEP",
    "LABEL_MANAGED_BY",
    "LABEL_POOL_MANAGED_BY",
    "LABEL_PRIORITY",
    "LABEL_QUEUE",
    "LABEL_REQUEST_KEY",
    "LABEL_RESTART_ATTEMPT",
    "LABEL_SCHEDULE",
    "LABEL_SLICE",
    "LABEL_TEAM",
    "MANAGED_BY",
    "NODEPOOL_LABEL",
    "TOPOLOGY_LABEL",
    "pinning_selector",
    "pool_labels",
]

MANAGED_BY = "accelops"

# --- accelops' own ------------------------------------------------------------------
# On a JobSet (Kubernetes' recommended label, value MANAGED_BY), and on the ConfigMaps
# accelops keeps its state in.
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
# On the GKE node pools reconcile_slices provisions (value MANAGED_BY): node-pool labels
# may not use the kubernetes.io prefix, so pools carry accelops' own spelling.
LABEL_POOL_MANAGED_BY = "accelops.dev/managed-by"
# On a JobSet and on node pools: the team it is for (pools: whose savings they count).
LABEL_TEAM = "accelops.dev/team"
# On a JobSet: the job's name as the request gave it.
LABEL_JOB = "accelops.dev/job"
# On a JobSet: hash of the request id, how submit_job finds a reused id across names
# and namespaces.
LABEL_REQUEST_KEY = "accelops.dev/request-key"
ANNOTATION_REQUEST_ID = "accelops.dev/request-id"
ANNOTATION_REQUEST_HASH = "accelops.dev/request-hash"
ANNOTATION_TPU_TYPE = "accelops.dev/tpu-type"
# On a JobSet: "false" opts it out of slice provisioning.
ANNOTATION_PROVISION = "accelops.dev/provision-slices"
# On a JobSet: "spot", "on-demand" or "reservation/<name>".
ANNOTATION_CAPACITY = "accelops.dev/capacity"
# On a JobSet, written by reconcile_slices: why its last pool create failed and when
# the next attempt is due (JSON); removed once all its slices run.
ANNOTATION_SLICE_FAILURE = "accelops.dev/slice-failure"
# Node labels of a provisioned pool: the JobSet it was made for and which slice.
LABEL_JOBSET = "accelops.dev/jobset"
LABEL_JOBSET_NAMESPACE = "accelops.dev/jobset-namespace"
LABEL_SLICE = "accelops.dev/slice"
# Node-pool labels a pool opts in to and out of an off-hours schedule with
# (config.labels on GKE).
LABEL_SCHEDULE = "accelops.dev/schedule"
LABEL_KEEP = "accelops.dev/keep"

# --- Kueue ---------------------------------------------------------------------------
LABEL_QUEUE = "kueue.x-k8s.io/queue-name"
LABEL_PRIORITY = "kueue.x-k8s.io/priority-class"
# Kueue labels each Workload with the uid of the job it stands for.
KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"

# --- JobSet and the Job controller ---------------------------------------------------
# JobSet's own: its controller labels every Job and pod of a JobSet with its name.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
# On every pod: which slice (Job) of the JobSet, which worker of the slice, which
# restart of the JobSet.
LABEL_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
LABEL_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
LABEL_RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
ANNOTATION_EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"

# --- GKE node labels -----------------------------------------------------------------
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"


def pinning_selector(namespace: str, name: str) -> dict[str, str]:
    """The nodeSelector entries that keep a JobSet's pods on its own pools."""
    return {LABEL_JOBSET: name, LABEL_JOBSET_NAMESPACE: namespace}


def pool_labels(namespace: str, name: str, slice_index: int) -> dict[str, str]:
    """Node labels of the pool provisioned for one slice of a JobSet."""
    return {**pinning_selector(namespace, name), LABEL_SLICE: str(slice_index),
            LABEL_POOL_MANAGED_BY: MANAGED_BY}
