"""What Kueue's JobSet integration derives from a JobSet, as pure functions.

The Workload's name and body (one pod set per replicated job, ``count`` =
replicas * parallelism), the pod sets' ``google.com/tpu`` requests for flavor
assignment, the admission's ``podSetAssignments``, and the replicated jobs with
their assigned flavors' nodeLabels merged into the pods' nodeSelector. The
controller that acts on them is :mod:`sandbox.cluster.kueue`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from sandbox.cluster.flavors import Assignment, Flavor, PodSet
from sandbox.cluster.objects import (
    JOBSET_API_VERSION,
    LABEL_KUEUE_JOB_UID,
    LABEL_PRIORITY,
    TPU_RESOURCE,
    WORKLOAD_API_VERSION,
    Obj,
    format_count,
    labels_of,
    name_of,
    namespace_of,
    owner_reference,
    short_digest,
    tpu_request,
    uid_of,
)

__all__ = [
    "flavored_replicated_jobs",
    "jobset_tpu_request",
    "pod_set_assignments",
    "pod_sets",
    "workload_body",
    "workload_name",
]


def workload_name(jobset: Mapping[str, Any]) -> str:
    """``jobset-<name>-<5 hex>``, as Kueue names the Workload of a JobSet."""
    digest = short_digest(name_of(jobset), uid_of(jobset), "JobSet", "jobset.x-k8s.io", length=5)
    return f"jobset-{name_of(jobset)}"[:246] + f"-{digest}"


def _replicated_jobs(jobset: Mapping[str, Any]) -> list[Obj]:
    return list((jobset.get("spec") or {}).get("replicatedJobs") or [])


def _pod_count(rjob: Mapping[str, Any]) -> int:
    job_spec = ((rjob.get("template") or {}).get("spec")) or {}
    parallelism = job_spec.get("parallelism")
    return int(rjob.get("replicas", 1)) * int(1 if parallelism is None else parallelism)


def _pod_spec(rjob: Mapping[str, Any]) -> Obj:
    job_spec = ((rjob.get("template") or {}).get("spec")) or {}
    return dict(((job_spec.get("template") or {}).get("spec")) or {})


def pod_sets(jobset: Mapping[str, Any]) -> list[PodSet]:
    """One pod set per replicated job, with the chips all its pods request."""
    return [PodSet(str(rj.get("name", "")), _pod_count(rj) * tpu_request(_pod_spec(rj)),
                   _pod_spec(rj)) for rj in _replicated_jobs(jobset)]


def jobset_tpu_request(jobset: Mapping[str, Any]) -> int:
    """Chips a JobSet needs at once: sum of replicas * parallelism * chips per pod."""
    return sum(pod_set.chips for pod_set in pod_sets(jobset))


def workload_body(jobset: Mapping[str, Any], queue: str,
                  priorities: Mapping[str, int]) -> Obj:
    """The Workload Kueue creates for a JobSet queued on LocalQueue ``queue``."""
    priority_class = labels_of(jobset).get(LABEL_PRIORITY, "")
    spec: Obj = {
        "active": True,
        "queueName": queue,
        "priority": priorities.get(priority_class, 0),
        "podSets": [
            {"name": str(rj.get("name", "")), "count": _pod_count(rj),
             "template": ((rj.get("template") or {}).get("spec") or {}).get("template", {})}
            for rj in _replicated_jobs(jobset)
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
        spec["priorityClassSource"] = "kueue.x-k8s.io/workloadpriorityclass"
    return {
        "apiVersion": WORKLOAD_API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": workload_name(jobset),
            "namespace": namespace_of(jobset),
            "labels": {LABEL_KUEUE_JOB_UID: uid_of(jobset)},
            "ownerReferences": [owner_reference(jobset, JOBSET_API_VERSION, "JobSet")],
        },
        "spec": spec,
    }


def pod_set_assignments(jobset: Mapping[str, Any], assigned: Assignment) -> list[Obj]:
    """``status.admission.podSetAssignments``: each pod set's flavor and chips."""
    assignments = []
    for rjob in _replicated_jobs(jobset):
        count = _pod_count(rjob)
        chips = count * tpu_request(_pod_spec(rjob))
        assignment: Obj = {"name": str(rjob.get("name", "")), "count": count,
                           "flavors": {}, "resourceUsage": {}}
        flavor = assigned.pod_sets.get(assignment["name"])
        if chips and flavor:
            assignment["flavors"][TPU_RESOURCE] = flavor.name
            assignment["resourceUsage"][TPU_RESOURCE] = format_count(chips)
        assignments.append(assignment)
    return assignments


def flavored_replicated_jobs(jobset: Mapping[str, Any],
                             flavors: Mapping[str, Flavor]) -> list[Obj] | None:
    """The replicated jobs with each pod set's flavor nodeLabels added to its pods'
    nodeSelector, as Kueue does on admission; None when no flavor has labels."""
    rjobs = copy.deepcopy(_replicated_jobs(jobset))
    changed = False
    for rjob in rjobs:
        flavor = flavors.get(str(rjob.get("name", "")))
        if flavor is None or not flavor.node_labels:
            continue
        pod_spec = rjob.setdefault("template", {}).setdefault("spec", {}) \
            .setdefault("template", {}).setdefault("spec", {})
        pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}),
                                    **flavor.node_labels}
        changed = True
    return rjobs if changed else None
