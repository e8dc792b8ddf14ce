"""Kueue's webhooks for the kinds accelops writes, ported from kubernetes-sigs/kueue v0.10.1.

Sources (tag v0.10.1, commit 404a0cd6), served behind
``kueue-system/kueue-webhook-service``:

* ``pkg/webhooks/clusterqueue_webhook.go`` — ``mclusterqueue.kb.io`` adds the
  ``kueue.x-k8s.io/resource-in-use`` finalizer on create; ``vclusterqueue.kb.io``
  checks each resource group (covered resources are qualified names and not repeated,
  each flavor's resources name the covered resources in order, quotas are not
  negative, a ``borrowingLimit`` or ``lendingLimit`` needs a cohort, a lending limit
  is at most the nominal quota — the ``LendingLimit`` feature is on by default — and
  a flavor appears once), the namespace selector, ``admissionChecks`` together with
  ``admissionChecksStrategy``, the preemption policies and the fair sharing weight;
* ``pkg/webhooks/resourceflavor_webhook.go`` — the same finalizer; node labels, node
  taints (key, value, unique by key and effect) and tolerations' keys;
* ``pkg/webhooks/workload_webhook.go`` — the ``pods`` request key is reserved, at most
  one pod set uses ``minCount``, an admission names existing pod sets, reclaimable pods
  name existing pod sets and do not exceed their counts, the pod sets are immutable
  while quota is reserved, an admission is immutable once set, reclaimable counts do
  not decrease while admitted (``PartialAdmission`` is on by default, so ``minCount``
  is kept). Not ported: ``ValidateConditions`` and the admission checks' pod set
  updates;
* ``pkg/controller/jobs/jobset/jobset_webhook.go`` with ``pkg/controller/jobframework``
  (``defaults.go``, ``validation.go``, ``tas_validation.go``) — ``mjobset.kb.io``
  (create) suspends a JobSet that names a queue (label ``kueue.x-k8s.io/queue-name``,
  or the deprecated annotation) unless its controller owner is a kind Kueue manages;
  ``vjobset.kb.io`` checks the queue name and ``prebuilt-workload-name`` label as
  DNS subdomains, ``max-exec-time-seconds`` as a positive integer, the topology
  annotations of each replicated job's template, and on update keeps the queue name
  while the JobSet runs (not suspended), the prebuilt workload and the
  ``kueue.x-k8s.io/priority-class`` label always, and the maximum execution time
  unless the JobSet stays suspended. With ``manageJobsWithoutQueueName: false`` (the
  default) a JobSet without a queue name is left alone. Not ported: MultiKueue's
  ``managedBy`` defaulting (it needs a ClusterQueue with a MultiKueue admission
  check) and ``LocalQueueDefaulting`` (an alpha feature, off).

Every other path of the server (pods, Deployments, StatefulSets — integrations off by
default, so their webhooks are no-ops — Jobs, Kubeflow and Ray kinds, cohorts) admits
unchanged here: accelops writes none of them through the API.
"""

from __future__ import annotations

import copy
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from sandbox.kubeapi.admission.review import Denied, Review
from sandbox.kubeapi.errors import JsonObject
from sandbox.kubeapi.field_errors import (
    OMIT,
    Bare,
    FieldError,
    GoValue,
    Path,
    aggregate,
    duplicate,
    invalid,
    not_found,
    not_supported,
    required,
)
from sandbox.kubeapi.validation import (
    IS_NEGATIVE,
    immutable,
    is_dns1123_subdomain,
    is_qualified_name,
    is_valid_label_value,
    validate_label_name,
    validate_label_selector,
    validate_labels,
)

__all__ = [
    "default_jobset",
    "default_with_finalizer",
    "validate_cluster_queue",
    "validate_jobset",
    "validate_resource_flavor",
    "validate_workload",
]

RESOURCE_IN_USE_FINALIZER = "kueue.x-k8s.io/resource-in-use"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
QUEUE_ANNOTATION = QUEUE_LABEL  # deprecated, same key
PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
LIMIT_NEEDS_COHORT = "must be nil when cohort is empty"
LENDING_ABOVE_NOMINAL = "must be less than or equal to the nominalQuota"

# Owner kinds (apiVersion, kind) of Kueue's integrations: a job they control is not
# suspended by the webhook, its owner is queued instead (IsOwnerManagedByKueue).
_MANAGED_OWNERS = frozenset({
    ("batch/v1", "Job"), ("jobset.x-k8s.io/v1alpha2", "JobSet"),
    ("kubeflow.org/v2beta1", "MPIJob"), ("kubeflow.org/v1", "MXJob"),
    ("kubeflow.org/v1", "PaddleJob"), ("kubeflow.org/v1", "PyTorchJob"),
    ("kubeflow.org/v1", "TFJob"), ("kubeflow.org/v1", "XGBoostJob"),
    ("ray.io/v1", "RayJob"), ("ray.io/v1", "RayCluster"),
})


def _meta(obj: JsonObject) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _labels(obj: JsonObject) -> dict[str, str]:
    return dict(_meta(obj).get("labels") or {})


def _annotations(obj: JsonObject) -> dict[str, str]:
    return dict(_meta(obj).get("annotations") or {})


def _deny(errors: list[FieldError]) -> None:
    message = aggregate(errors)
    if message:
        raise Denied(message)


# ---------------------------------------------------------------------- quantities

_SUFFIXES: dict[str, Decimal] = {
             "": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
             "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9,
             "T": Decimal(10) ** 12, "P": Decimal(10) ** 15, "E": Decimal(10) ** 18,
             "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30,
             "Ti": Decimal(2) ** 40, "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


def _quantity(value: Any) -> Decimal | None:
    """A Kubernetes quantity as a number (None when it does not parse)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    match = _QUANTITY.match(str(value).strip())
    if match is None or match[2] not in _SUFFIXES:
        return None
    try:
        return Decimal(match[1]) * _SUFFIXES[match[2]]
    except InvalidOperation:
        return None


def _shown(value: Any) -> str:
    """``Quantity.String()`` of a value as written (canonical for the usual forms)."""
    return str(value)


# ---------------------------------------------------------------------- finalizer defaulting

def default_with_finalizer(review: Review) -> JsonObject:
    """``Default`` of ClusterQueue and ResourceFlavor: the resource-in-use finalizer."""
    obj = copy.deepcopy(review.object)
    finalizers = _meta(obj).setdefault("finalizers", [])
    if RESOURCE_IN_USE_FINALIZER not in finalizers:
        finalizers.append(RESOURCE_IN_USE_FINALIZER)
    return obj


# ---------------------------------------------------------------------- ClusterQueue

def cluster_queue_errors(cq: JsonObject) -> list[FieldError]:
    """``ValidateClusterQueue``."""
    spec = cq.get("spec") or {}
    path = Path("spec")
    has_cohort = bool(spec.get("cohort"))
    errors: list[FieldError] = []
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for i, group in enumerate(spec.get("resourceGroups") or []):
        where = path.child("resourceGroups").at(i)
        covered = [str(r) for r in group.get("coveredResources") or []]
        for j, name in enumerate(covered):
            at = where.child("coveredResources").at(j)
            errors += [invalid(at, Bare(name), m) for m in is_qualified_name(name)]
            if name in seen_resources:
                errors.append(duplicate(at, Bare(name)))
            else:
                seen_resources.add(name)
        for j, flavor in enumerate(group.get("flavors") or []):
            at = where.child("flavors").at(j)
            errors += _flavor_quotas(flavor, covered, has_cohort, at)
            flavor_name = str(flavor.get("name") or "")
            if flavor_name in seen_flavors:
                errors.append(duplicate(at.child("name"), flavor_name))
            else:
                seen_flavors.add(flavor_name)
    errors += validate_label_selector(spec.get("namespaceSelector"),
                                      path.child("namespaceSelector"))
    if spec.get("admissionChecksStrategy") is not None and spec.get("admissionChecks"):
        errors.append(invalid(path, GoValue("&v1beta1.ClusterQueueSpec{...}"),
                              "Either AdmissionChecks or AdmissionCheckStrategy can be set, but "
                              "not both"))
    preemption = spec.get("preemption")
    if isinstance(preemption, dict):
        borrow = preemption.get("borrowWithinCohort")
        if preemption.get("reclaimWithinCohort") == "Never" and isinstance(borrow, dict) \
                and (borrow.get("policy") or "Never") != "Never":
            errors.append(invalid(path.child("preemption"),
                                  GoValue("v1beta1.ClusterQueuePreemption{...}"),
                                  "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"))
    fair = spec.get("fairSharing")
    if isinstance(fair, dict) and fair.get("weight") is not None:
        weight = _quantity(fair["weight"])
        if weight is not None and weight < 0:
            errors.append(invalid(path.child("fairSharing"), _shown(fair["weight"]),
                                  IS_NEGATIVE))
    return errors


def _flavor_quotas(flavor: dict[str, Any], covered: list[str], has_cohort: bool,
                   path: Path) -> list[FieldError]:
    errors: list[FieldError] = []
    for i, quota in enumerate(flavor.get("resources") or []):
        if i >= len(covered):
            break
        at = path.child("resources").at(i)
        if quota.get("name") != covered[i]:
            errors.append(invalid(at.child("name"), Bare(str(quota.get("name") or "")),
                                  "must match the name in coveredResources"))
        errors += _not_negative(quota.get("nominalQuota", 0), at.child("nominalQuota"))
        if quota.get("borrowingLimit") is not None:
            where = at.child("borrowingLimit")
            if not has_cohort:
                errors.append(invalid(where, _shown(quota["borrowingLimit"]), LIMIT_NEEDS_COHORT))
            errors += _not_negative(quota["borrowingLimit"], where)
        if quota.get("lendingLimit") is not None:
            where = at.child("lendingLimit")
            lending = quota["lendingLimit"]
            errors += _not_negative(lending, where)
            if not has_cohort:
                errors.append(invalid(where, _shown(lending), LIMIT_NEEDS_COHORT))
            amount, nominal = _quantity(lending), _quantity(quota.get("nominalQuota", 0))
            if amount is not None and nominal is not None and amount > nominal:
                errors.append(invalid(where, _shown(lending), LENDING_ABOVE_NOMINAL))
    return errors


def _not_negative(value: Any, path: str) -> list[FieldError]:
    amount = _quantity(value)
    if amount is not None and amount < 0:
        return [invalid(path, _shown(value), IS_NEGATIVE)]
    return []


def validate_cluster_queue(review: Review) -> None:
    _deny(cluster_queue_errors(review.object))


# ---------------------------------------------------------------------- ResourceFlavor

def _tolerations(tolerations: list[Any], path: Path) -> list[FieldError]:
    errors: list[FieldError] = []
    for i, toleration in enumerate(tolerations or []):
        key = str((toleration or {}).get("key") or "")
        if key:
            errors += validate_label_name(key, path.at(i).child("key"))
    return errors


def resource_flavor_errors(rf: JsonObject) -> list[FieldError]:
    """``ValidateResourceFlavor``."""
    spec = rf.get("spec") or {}
    path = Path("spec")
    errors = validate_labels(spec.get("nodeLabels"), path.child("nodeLabels"))
    seen: dict[str, set[str]] = {}
    for i, taint in enumerate(spec.get("nodeTaints") or []):
        at = path.child("nodeTaints").at(i)
        key, value = str(taint.get("key") or ""), str(taint.get("value") or "")
        effect = str(taint.get("effect") or "")
        errors += validate_label_name(key, at.child("key"))
        problems = is_valid_label_value(value)
        if problems:
            errors.append(invalid(at.child("value"), value, ";".join(problems)))
        if key in seen.get(effect, set()):
            shown = GoValue(f'v1.Taint{{Key:"{key}", Value:"{value}", Effect:"{effect}", '
                            f'TimeAdded:<nil>}}')
            errors.append(FieldError("FieldValueDuplicate", at, shown,
                                     "taints must be unique by key and effect pair"))
            continue
        seen.setdefault(effect, set()).add(key)
    errors += _tolerations(spec.get("tolerations") or [], path.child("tolerations"))
    return errors


def validate_resource_flavor(review: Review) -> None:
    _deny(resource_flavor_errors(review.object))


# ---------------------------------------------------------------------- Workload

def _quota_reserved(workload: JsonObject) -> bool:
    conditions = (workload.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "QuotaReserved" and c.get("status") == "True"
               for c in conditions)


def workload_errors(workload: JsonObject) -> list[FieldError]:
    """``ValidateWorkload`` (without ``ValidateConditions`` and pod set updates)."""
    spec = workload.get("spec") or {}
    status = workload.get("status") or {}
    path = Path("spec")
    errors: list[FieldError] = []
    pod_sets = [ps for ps in spec.get("podSets") or [] if isinstance(ps, dict)]
    variable = 0
    for i, pod_set in enumerate(pod_sets):
        pod_spec = (pod_set.get("template") or {}).get("spec") or {}
        for part in ("initContainers", "containers"):
            for j, container in enumerate(pod_spec.get(part) or []):
                requests = (container.get("resources") or {}).get("requests") or {}
                if "pods" in requests:
                    where = path.child("podSets").at(i).child("template", "spec", part) \
                        .at(j).child("resources", "requests").key("pods")
                    errors.append(invalid(where, Bare("pods"),
                                          "the key is reserved for internal kueue use"))
        if pod_set.get("minCount") is not None:
            variable += 1
    if variable > 1:
        errors.append(invalid(path.child("podSets"), variable,
                              "at most one podSet can use minCount"))
    names = [str(ps.get("name") or "") for ps in pod_sets]
    counts = {str(ps.get("name") or ""): int(ps.get("count") or 0) for ps in pod_sets}
    status_path = Path("status")
    if _quota_reserved(workload):
        assignments = (status.get("admission") or {}).get("podSetAssignments") or []
        for i, assignment in enumerate(assignments):
            if assignment.get("name") not in names:
                errors.append(not_found(status_path.child("admission", "podSetAssignments")
                                        .at(i).child("name"), str(assignment.get("name"))))
    for reclaimable in status.get("reclaimablePods") or []:
        name = str(reclaimable.get("name") or "")
        where = status_path.child("reclaimablePods").key(name)
        if name not in counts:
            errors.append(not_supported(where.child("name"), name, names))
        elif int(reclaimable.get("count") or 0) > counts[name]:
            errors.append(invalid(where.child("count"), int(reclaimable.get("count") or 0),
                                  f"should be less or equal to {counts[name]}"))
    return errors


def workload_update_errors(new: JsonObject, old: JsonObject) -> list[FieldError]:
    """``ValidateWorkloadUpdate``."""
    errors = workload_errors(new)
    if _quota_reserved(old):
        errors += immutable(Path("spec").child("podSets"), (new.get("spec") or {}).get("podSets"),
                            (old.get("spec") or {}).get("podSets"),
                            GoValue("[]v1beta1.PodSet{...}"))
    new_status, old_status = new.get("status") or {}, old.get("status") or {}
    if _quota_reserved(new) and _quota_reserved(old):
        errors += _reclaimable_update(new_status.get("reclaimablePods") or [],
                                      old_status.get("reclaimablePods") or [], True)
    if new_status.get("admission") is not None and old_status.get("admission") is not None:
        errors += immutable(Path("status").child("admission"), new_status["admission"],
                            old_status["admission"], GoValue("&v1beta1.Admission{...}"))
    return errors


def _reclaimable_update(new: list[dict[str, Any]], old: list[dict[str, Any]],
                        reserved: bool) -> list[FieldError]:
    old_counts = {str(r.get("name")): int(r.get("count") or 0) for r in old}
    if not old_counts or {str(r.get("name")): int(r.get("count") or 0) for r in new} \
            == old_counts:
        return []
    path = Path("status").child("reclaimablePods")
    errors: list[FieldError] = []
    names = set()
    for entry in new:
        name, count = str(entry.get("name")), int(entry.get("count") or 0)
        names.add(name)
        if name in old_counts and count < old_counts[name]:
            errors.append(invalid(path.key(name).child("count"), count,
                                  f"cannot be less then {old_counts[name]}"))
    for name in old_counts:
        if reserved and name not in names:
            errors.append(required(path.key(name), "cannot be removed"))
    return errors


def validate_workload(review: Review) -> None:
    if review.operation == "UPDATE" and review.old_object is not None:
        _deny(workload_update_errors(review.object, review.old_object))
    else:
        _deny(workload_errors(review.object))


# ---------------------------------------------------------------------- JobSet integration

def _queue_name(obj: JsonObject) -> str:
    return _labels(obj).get(QUEUE_LABEL) or _annotations(obj).get(QUEUE_ANNOTATION) or ""


def _suspended(obj: JsonObject) -> bool:
    return bool((obj.get("spec") or {}).get("suspend"))


def _owned_by_kueue_job(obj: JsonObject) -> bool:
    for owner in _meta(obj).get("ownerReferences") or []:
        if owner.get("controller") and (owner.get("apiVersion"), owner.get("kind")) \
                in _MANAGED_OWNERS:
            return True
    return False


def default_jobset(review: Review) -> JsonObject:
    """``Default``: a JobSet that names a queue is created suspended."""
    obj = copy.deepcopy(review.object)
    if not _owned_by_kueue_job(obj) and _queue_name(obj) and not _suspended(obj):
        obj.setdefault("spec", {})["suspend"] = True
    return obj


def _crd_name_errors(value: str | None, path: str) -> list[FieldError]:
    if value is None:
        return []
    problems = is_dns1123_subdomain(value)
    return [invalid(path, value, ",".join(problems))] if problems else []


def jobset_create_errors(obj: JsonObject) -> list[FieldError]:
    """``validateCreate``: queue name, prebuilt workload, max execution time, topology."""
    labels, annotations = _labels(obj), _annotations(obj)
    label_path = Path("metadata").child("labels")
    errors = _crd_name_errors(labels.get(QUEUE_LABEL), label_path.key(QUEUE_LABEL))
    errors += _crd_name_errors(annotations.get(QUEUE_ANNOTATION),
                               Path("metadata").child("annotations").key(QUEUE_ANNOTATION))
    errors += _crd_name_errors(labels.get(PREBUILT_WORKLOAD_LABEL),
                               label_path.key(PREBUILT_WORKLOAD_LABEL))
    if MAX_EXEC_TIME_LABEL in labels:
        text = labels[MAX_EXEC_TIME_LABEL]
        where = label_path.key(MAX_EXEC_TIME_LABEL)
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            errors.append(invalid(where, text, f'strconv.Atoi: parsing "{text}": invalid syntax'))
        elif int(text) <= 0:
            errors.append(invalid(where, int(text), "should be greater than 0"))
    for i, rjob in enumerate((obj.get("spec") or {}).get("replicatedJobs") or []):
        meta = (rjob.get("template") or {}).get("metadata") or {}
        notes = meta.get("annotations") or {}
        where = Path("spec").child("replicatedJobs").at(i).child("template", "metadata",
                                                                   "annotations")
        if REQUIRED_TOPOLOGY in notes and PREFERRED_TOPOLOGY in notes:
            errors.append(FieldError("FieldValueInvalid", where, OMIT, (
                f'must not contain both "{REQUIRED_TOPOLOGY}" and "{PREFERRED_TOPOLOGY}"')))
        for key in (REQUIRED_TOPOLOGY, PREFERRED_TOPOLOGY):
            if key in notes:
                errors += validate_label_name(str(notes[key]), where.key(key))
    return errors


def jobset_update_errors(new: JsonObject, old: JsonObject) -> list[FieldError]:
    """``validateUpdate``: what may not change, then the create checks."""
    label_path = Path("metadata").child("labels")
    errors: list[FieldError] = []
    if not _suspended(new):
        errors += immutable(label_path.key(QUEUE_LABEL), _queue_name(new), _queue_name(old))
    errors += immutable(label_path.key(PREBUILT_WORKLOAD_LABEL),
                        _labels(new).get(PREBUILT_WORKLOAD_LABEL, ""),
                        _labels(old).get(PREBUILT_WORKLOAD_LABEL, ""))
    errors += immutable(label_path.key(PRIORITY_CLASS_LABEL),
                        _labels(new).get(PRIORITY_CLASS_LABEL, ""),
                        _labels(old).get(PRIORITY_CLASS_LABEL, ""))
    if not _suspended(new) or not _suspended(old):
        errors += immutable(label_path.key(MAX_EXEC_TIME_LABEL),
                            _labels(new).get(MAX_EXEC_TIME_LABEL, ""),
                            _labels(old).get(MAX_EXEC_TIME_LABEL, ""))
    return errors + jobset_create_errors(new)


def validate_jobset(review: Review) -> None:
    if review.operation == "UPDATE" and review.old_object is not None:
        _deny(jobset_update_errors(review.object, review.old_object))
    else:
        _deny(jobset_create_errors(review.object))

