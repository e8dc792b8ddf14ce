"""Labels and annotations that tie node pools, their nodes and JobSets together.

A provisioned pool carries its JobSet's namespace, name and slice index as node
labels; a JobSet rendered by accelops selects nodes by the same labels, so its pods
can only land on the pools made for it.
"""

from __future__ import annotations

__all__ = [
    "ANNOTATION_CAPACITY",
    "ANNOTATION_PROVISION",
    "ANNOTATION_SLICE_FAILURE",
    "JOBSET_NAME_LABEL",
    "LABEL_JOBSET",
    "LABEL_JOBSET_NAMESPACE",
    "LABEL_MANAGED_BY",
    "LABEL_SLICE",
    "MANAGED_BY",
    "pinning_selector",
    "pool_labels",
]

LABEL_JOBSET = "accelops.dev/jobset"
LABEL_JOBSET_NAMESPACE = "accelops.dev/jobset-namespace"
LABEL_SLICE = "accelops.dev/slice"
LABEL_MANAGED_BY = "accelops.dev/managed-by"
MANAGED_BY = "accelops"
# JobSet's own: its controller labels every Job and pod of a JobSet with its name.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"

# On a JobSet: "false" opts it out of slice provisioning.
ANNOTATION_PROVISION = "accelops.dev/provision-slices"
# On a JobSet: "spot", "on-demand" or "reservation/<name>".
ANNOTATION_CAPACITY = "accelops.dev/capacity"
# On a JobSet, written by reconcile_slices: why its last pool create failed and when
# the next attempt is due (JSON); removed once all its slices run.
ANNOTATION_SLICE_FAILURE = "accelops.dev/slice-failure"


def pinning_selector(namespace: str, name: str) -> dict[str, str]:
    """The nodeSelector entries that keep a JobSet's pods on its own pools."""
    return {LABEL_JOBSET: name, LABEL_JOBSET_NAMESPACE: namespace}


def pool_labels(namespace: str, name: str, slice_index: int) -> dict[str, str]:
    """Node labels of the pool provisioned for one slice of a JobSet."""
    return {**pinning_selector(namespace, name), LABEL_SLICE: str(slice_index),
            LABEL_MANAGED_BY: MANAGED_BY}
