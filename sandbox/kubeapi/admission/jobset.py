"""The JobSet controller's own webhooks, ported from kubernetes-sigs/jobset v0.7.2.

Source: ``pkg/webhooks/jobset_webhook.go`` (tag v0.7.2, commit 9cb030b3), served
behind ``jobset-system/jobset-webhook-service`` at
``/mutate-jobset-x-k8s-io-v1alpha2-jobset`` (``mjobset.kb.io``) and
``/validate-jobset-x-k8s-io-v1alpha2-jobset`` (``vjobset.kb.io``), CREATE and UPDATE.

Defaulting (:func:`default`): ``successPolicy`` ``{operator: All}``, ``startupPolicy``
``{startupPolicyOrder: AnyOrder}``, each replicated job's ``completionMode: Indexed``
and pod ``restartPolicy: OnFailure``, ``network.enableDNSHostnames`` and
``network.publishNotReadyAddresses`` true, failure policy rules named
``failurePolicyRule<i>``.

Validation on create (:func:`validate_create`), every problem joined with newlines as
``errors.Join`` does: the network subdomain (RFC 1123 subdomain and RFC 1035 label),
``managedBy`` (a domain-prefixed path of at most 63 characters), replicas x
parallelism within int32, the longest generated Job name
(``<jobset>-<replicatedJob>-<replicas-1>``) and, for Indexed jobs, pod name
(``<jobset>-<rjob>-<job>-<pod>-abcde``) as RFC 1035 labels of at most 63 characters,
success policy targets among the replicated jobs, failure policy rule names (1-128
characters, pattern, unique), their targets and ``onJobFailureReasons``, and the
coordinator. On update (:func:`validate_update`): ``spec.replicatedJobs`` and
``spec.managedBy`` are immutable, except that while the JobSet is (or is being)
suspended the pod templates' labels, annotations, node selector, tolerations and
scheduling gates may change (what Kueue does on admission).

The pod webhooks of the same server (``mpod.kb.io``, ``vpod.kb.io`` on pods labelled
``jobset.sigs.k8s.io/jobset-name``: exclusive placement of leader and follower pods)
admit pods unchanged here: the sandbox's JobSet controller creates its pods directly,
never through the API.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from sandbox.kubeapi.admission.review import Denied, Review
from sandbox.kubeapi.errors import JsonObject
from sandbox.kubeapi.field_errors import GoValue, Path, aggregate, too_long_max_length
from sandbox.kubeapi.validation import (
    immutable,
    is_dns1035_label,
    is_dns1123_subdomain,
    is_domain_prefixed_path,
)

__all__ = ["default", "validate", "validate_create", "validate_update"]

MAX_MANAGED_BY_LENGTH = 63
MAX_INT32 = 2**31 - 1
DNS1035_MAX_LENGTH_MSG = "must be no more than 63 characters"
JOB_NAME_TOO_LONG = ("JobSet name is too long, job names generated for this JobSet will exceed "
                     "63 characters")
POD_NAME_TOO_LONG = ("JobSet name is too long, pod names generated for this JobSet will exceed "
                     "63 characters")
SUBDOMAIN_TOO_LONG = ".spec.network.subdomain is too long, must be less than 63 characters"
# batchv1.JobReason* the failure policy may name.
VALID_JOB_FAILURE_REASONS = ("BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes",
                             "MaxFailedIndexesExceeded", "PodFailurePolicy")
RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


def _spec(obj: JsonObject) -> dict[str, Any]:
    spec = obj.setdefault("spec", {})
    return spec if isinstance(spec, dict) else {}


def _job_spec(rjob: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = rjob.setdefault("template", {}).setdefault("spec", {})
    return spec


def default(review: Review) -> JsonObject:
    """``Default``: what the mutating webhook adds to a JobSet."""
    obj = copy.deepcopy(review.object)
    spec = _spec(obj)
    if spec.get("successPolicy") is None:
        spec["successPolicy"] = {"operator": "All"}
    if spec.get("startupPolicy") is None:
        spec["startupPolicy"] = {"startupPolicyOrder": "AnyOrder"}
    for rjob in spec.get("replicatedJobs") or []:
        job_spec = _job_spec(rjob)
        if job_spec.get("completionMode") is None:
            job_spec["completionMode"] = "Indexed"
        pod_spec = job_spec.setdefault("template", {}).setdefault("spec", {})
        if not pod_spec.get("restartPolicy"):
            pod_spec["restartPolicy"] = "OnFailure"
    network = spec.get("network")
    if network is None:
        network = spec["network"] = {}
    if network.get("enableDNSHostnames") is None:
        network["enableDNSHostnames"] = True
    if network.get("publishNotReadyAddresses") is None:
        network["publishNotReadyAddresses"] = True
    for i, rule in enumerate((spec.get("failurePolicy") or {}).get("rules") or []):
        if not rule.get("name"):
            rule["name"] = f"failurePolicyRule{i}"
    return obj


def _int(value: Any, fallback: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else fallback


def _name(obj: JsonObject) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def validate_create(obj: JsonObject) -> list[str]:
    """``ValidateCreate``: every problem, in the webhook's order."""
    spec = obj.get("spec") or {}
    errors: list[str] = []
    rjobs = [r for r in spec.get("replicatedJobs") or [] if isinstance(r, dict)]
    names = [str(r.get("name") or "") for r in rjobs]
    subdomain = (spec.get("network") or {}).get("subdomain") or ""
    if subdomain:
        errors += is_dns1123_subdomain(subdomain)
        errors += [SUBDOMAIN_TOO_LONG if DNS1035_MAX_LENGTH_MSG in m else m
                   for m in is_dns1035_label(subdomain)]
    managed_by = spec.get("managedBy")
    if managed_by is not None:
        where = Path("spec").child("managedBy")
        errors += [str(e) for e in is_domain_prefixed_path(where, str(managed_by))]
        if len(str(managed_by)) > MAX_MANAGED_BY_LENGTH:
            errors.append(str(too_long_max_length(where, str(managed_by),
                                                  MAX_MANAGED_BY_LENGTH)))
    for rjob, rjob_name in zip(rjobs, names, strict=True):
        job_spec = (rjob.get("template") or {}).get("spec") or {}
        replicas = _int(rjob.get("replicas"))
        parallelism = _int(job_spec.get("parallelism"), 1)
        if parallelism * replicas > MAX_INT32:
            errors.append(f"the product of replicas and parallelism must not exceed {MAX_INT32} "
                          f"for replicatedJob '{rjob_name}'")
        longest_job = f"{_name(obj)}-{rjob_name}-{replicas - 1}"
        errors += [JOB_NAME_TOO_LONG if DNS1035_MAX_LENGTH_MSG in m else m
                   for m in is_dns1035_label(longest_job)]
        completions = job_spec.get("completions")
        if job_spec.get("completionMode") == "Indexed" and isinstance(completions, int):
            longest_pod = f"{_name(obj)}-{rjob_name}-{replicas - 1}-{completions - 1}-abcde"
            errors += [POD_NAME_TOO_LONG if DNS1035_MAX_LENGTH_MSG in m else m
                       for m in is_dns1035_label(longest_pod)]
    for target in (spec.get("successPolicy") or {}).get("targetReplicatedJobs") or []:
        if target not in names:
            errors.append(f"invalid replicatedJob name '{target}' does not appear in "
                          ".spec.ReplicatedJobs")
    if spec.get("failurePolicy") is not None:
        errors += _failure_policy(spec["failurePolicy"], names)
    if spec.get("coordinator") is not None:
        problem = _coordinator(spec["coordinator"], rjobs)
        if problem:
            errors.append(problem)
    return errors


def _failure_policy(policy: dict[str, Any], names: list[str]) -> list[str]:
    errors: list[str] = []
    by_name: dict[str, list[int]] = {}
    for index, rule in enumerate(policy.get("rules") or []):
        name = str(rule.get("name") or "")
        if not 1 <= len(name) <= 128:
            errors.append(f"invalid failure policy rule name of length {len(name)}, the rule "
                          "name must be at least 1 characters long and at most 128 characters "
                          "long")
        by_name.setdefault(name, []).append(index)
        if not RULE_NAME.match(name):
            errors.append(f"invalid failure policy rule name '{name}', a failure policy rule "
                          "name must start with an alphabetic character, optionally followed "
                          "by a string of alphanumeric characters or '_,:', and must end with "
                          "an alphanumeric character or '_'")
        for target in rule.get("targetReplicatedJobs") or []:
            if target not in names:
                errors.append(f"invalid replicatedJob name '{target}' in failure policy does "
                              "not appear in .spec.ReplicatedJobs")
        for reason in rule.get("onJobFailureReasons") or []:
            if reason not in VALID_JOB_FAILURE_REASONS:
                errors.append(f"invalid job failure reason '{reason}' in failure policy is not "
                              "a recognized job failure reason")
    for name, indices in by_name.items():
        if len(indices) > 1:
            shown = "[" + " ".join(str(i) for i in indices) + "]"
            errors.append(f"rule names are not unique, rules with indices {shown} all have the "
                          f"same name '{name}'")
    return errors


def _coordinator(coordinator: dict[str, Any], rjobs: list[dict[str, Any]]) -> str | None:
    wanted = str(coordinator.get("replicatedJob") or "")
    rjob = next((r for r in rjobs if r.get("name") == wanted), None)
    if rjob is None:
        return f"coordinator replicatedJob {wanted} does not exist"
    job_index, pod_index = _int(coordinator.get("jobIndex")), _int(coordinator.get("podIndex"))
    if job_index < 0 or job_index >= _int(rjob.get("replicas")):
        return f"coordinator job index {job_index} is invalid for replicatedJob {rjob['name']}"
    job_spec = (rjob.get("template") or {}).get("spec") or {}
    if job_spec.get("completionMode") != "Indexed":
        return "job for coordinator pod must be indexed completion mode"
    if pod_index < 0 or pod_index >= _int(job_spec.get("completions")):
        return (f"coordinator pod index {pod_index} is invalid for replicatedJob {wanted} job "
                f"index {job_index}")
    return None


# What Kueue may change in a suspended JobSet's pod templates (kueue workload_types.go).
_MUTABLE_WHILE_SUSPENDED = (("metadata", "annotations"), ("metadata", "labels"),
                            ("spec", "nodeSelector"), ("spec", "tolerations"),
                            ("spec", "schedulingGates"))


def _pod_template(rjob: dict[str, Any]) -> dict[str, Any]:
    return ((rjob.get("template") or {}).get("spec") or {}).get("template") or {}


def validate_update(new: JsonObject, old: JsonObject) -> str:
    """``ValidateUpdate``: the aggregate message, "" when allowed."""
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    munged = copy.deepcopy(new_spec.get("replicatedJobs") or [])
    old_rjobs = old_spec.get("replicatedJobs") or []
    if old_spec.get("suspend") or new_spec.get("suspend"):
        # Like the webhook, this indexes the old list by the new one's positions.
        for index, rjob in enumerate(munged):
            old_template = _pod_template(old_rjobs[index]) if index < len(old_rjobs) else {}
            template = rjob.setdefault("template", {}).setdefault("spec", {}).setdefault(
                "template", {})
            for part, key in _MUTABLE_WHILE_SUSPENDED:
                section = template.setdefault(part, {})
                value = (old_template.get(part) or {}).get(key)
                if value is None:
                    section.pop(key, None)
                else:
                    section[key] = copy.deepcopy(value)
                if not section:
                    template.pop(part)
    spec = Path("spec")
    shown = GoValue("[]v1alpha2.ReplicatedJob{...}")
    errors = immutable(spec.child("replicatedJobs"), _normal(munged), _normal(old_rjobs), shown)
    managed_new, managed_old = new_spec.get("managedBy"), old_spec.get("managedBy")
    errors += immutable(spec.child("managedBy"), managed_new, managed_old)
    return aggregate(errors)


def _normal(value: Any) -> Any:
    """Drop empty maps and lists: Go's typed structs make ``{}`` and absent equal."""
    if isinstance(value, dict):
        kept = {k: _normal(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in ({}, [], None)}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def validate(review: Review) -> None:
    """The validating webhook: raise Denied with the webhook's message."""
    if review.operation == "CREATE":
        message = "\n".join(validate_create(review.object))
    elif review.old_object is not None:
        message = validate_update(review.object, review.old_object)
    else:
        message = ""
    if message:
        raise Denied(message)
