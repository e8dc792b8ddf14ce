"""What Kueue's JobSet integration derives from a JobSet, as pure functions.

The Workload's name and body (one pod set per replicated job, ``count`` =
replicas * parallelism), its priority, the pod sets' ``google.com/tpu`` requests
for flavor assignment, the admission's ``podSetAssignments``, the replicated jobs
with their assigned flavors' nodeLabels merged into the pods' nodeSelector, and
back without them when the job is stopped. The controller that acts on them is
:mod:`sandbox.cluster.kueue`.

The priority is Kueue v0.10.1's (``pkg/controller/jobframework/reconciler.go``
``extractPriority``, ``pkg/util/priority/priority.go``): the value of the
WorkloadPriorityClass the ``kueue.x-k8s.io/priority-class`` label names; without
the label, that of the PriorityClass the first pod template naming one names;
without either, the lowest ``globalDefault`` PriorityClass's; else 0. A class named
but missing is the client's NotFound error: Kueue creates no Workload, logs it and
retries, and the JobSet stays suspended (:class:`MissingPriorityClass`). There is
no fallback to built-in priorities.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
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
    "POD_PRIORITY_CLASS_SOURCE",
    "WORKLOAD_PRIORITY_CLASS_SOURCE",
    "MissingPriorityClass",
    "Priority",
    "class_value",
    "flavored_replicated_jobs",
    "jobset_tpu_request",
    "pod_set_assignments",
    "pod_sets",
    "restored_replicated_jobs",
    "workload_body",
    "workload_name",
    "workload_priority",
]

# pkg/constants: Workload.spec.priorityClassSource for each kind of class.
WORKLOAD_PRIORITY_CLASS_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"
POD_PRIORITY_CLASS_SOURCE = "scheduling.k8s.io/priorityclass"


@dataclass(frozen=True)
class Priority:
    """A Workload's ``spec.priority``, ``priorityClassName`` and ``priorityClassSource``."""

    value: int = 0
    class_name: str = ""
    source: str = ""


class MissingPriorityClass(Exception):
    """The priority class a job names does not exist; ``str()`` is the API client's
    error, as Kueue logs it."""


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


def workload_priority(jobset: Mapping[str, Any], workload_classes: Mapping[str, int],
                      pod_classes: Mapping[str, Mapping[str, Any]]) -> Priority:
    """The priority Kueue gives the JobSet's Workload (module docstring);
    ``workload_classes``: WorkloadPriorityClass name → value, ``pod_classes``:
    PriorityClass name → object. Raises MissingPriorityClass."""
    name = labels_of(jobset).get(LABEL_PRIORITY, "")
    if name:
        if name not in workload_classes:
            raise MissingPriorityClass(
                f'workloadpriorityclasses.kueue.x-k8s.io "{name}" not found')
        return Priority(workload_classes[name], name, WORKLOAD_PRIORITY_CLASS_SOURCE)
    named = next((str(_pod_spec(rj).get("priorityClassName")) for rj in _replicated_jobs(jobset)
                  if _pod_spec(rj).get("priorityClassName")), "")
    if named:
        if named not in pod_classes:
            raise MissingPriorityClass(f'priorityclasses.scheduling.k8s.io "{named}" not found')
        return Priority(class_value(pod_classes[named]), named, POD_PRIORITY_CLASS_SOURCE)
    defaults = sorted((class_value(pc), pc_name) for pc_name, pc in pod_classes.items()
                      if pc.get("globalDefault") is True)
    if defaults:
        value, pc_name = defaults[0]
        return Priority(value, pc_name, POD_PRIORITY_CLASS_SOURCE)
    return Priority()


def class_value(priority_class: Mapping[str, Any]) -> int:
    """A (Workload)PriorityClass's ``value`` (0 when unreadable)."""
    try:
        return int(priority_class.get("value", 0))
    except (TypeError, ValueError):
        return 0


def workload_body(jobset: Mapping[str, Any], queue: str, priority: Priority) -> Obj:
    """The Workload Kueue creates for a JobSet queued on LocalQueue ``queue``."""
    spec: Obj = {
        "active": True,
        "queueName": queue,
        "priority": priority.value,
        "podSets": [
            {"name": str(rj.get("name", "")), "count": _pod_count(rj),
             "template": ((rj.get("template") or {}).get("spec") or {}).get("template", {})}
            for rj in _replicated_jobs(jobset)
        ],
    }
    if priority.class_name:
        spec["priorityClassName"] = priority.class_name
        spec["priorityClassSource"] = priority.source
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


def restored_replicated_jobs(jobset: Mapping[str, Any],
                             workload: Mapping[str, Any]) -> list[Obj] | None:
    """The replicated jobs with each pod template's nodeSelector as the Workload's pod
    set recorded it before admission (``RestorePodSetsInfo`` on stop); None when
    nothing differs."""
    recorded = {str(ps.get("name", "")): ((ps.get("template") or {}).get("spec") or {})
                for ps in (workload.get("spec") or {}).get("podSets") or []}
    rjobs = copy.deepcopy(_replicated_jobs(jobset))
    changed = False
    for rjob in rjobs:
        original = recorded.get(str(rjob.get("name", "")))
        if original is None:
            continue
        pod_spec = rjob.setdefault("template", {}).setdefault("spec", {}) \
            .setdefault("template", {}).setdefault("spec", {})
        wanted = dict(original.get("nodeSelector") or {})
        if dict(pod_spec.get("nodeSelector") or {}) != wanted:
            pod_spec["nodeSelector"] = wanted
            changed = True
    return rjobs if changed else None
