"""What kube-apiserver refuses in the built-in kinds the sandbox's stand-ins create.

Built-in kinds are otherwise checked only for unknown fields (:mod:`sandbox.kubeapi.fields`).
The rules here are those a stand-in would otherwise let through where a real cluster
refuses, so the defect they hide shows in the sandbox: the Job's restart policy
(kubernetes v1.32 ``pkg/apis/batch/validation/validation.go``, ``validateJobSpec``). A
Job's pods must be restarted by the Job, so its template's ``restartPolicy`` must be
``OnFailure`` or ``Never`` (a pod template defaults to ``Always``, so leaving it out is
refused too), and a ``podFailurePolicy`` judges pods that failed, which only ``Never``
lets happen. JobSet v0.7.2 creates its Jobs without checking them first: a JobSet whose
template breaks these rules is accepted, and every create of its Jobs fails with this 422
(``sandbox/cluster/jobset.py`` logs it as the controller does).
"""

from __future__ import annotations

from sandbox.kubeapi import field_errors as fe
from sandbox.kubeapi.errors import JsonObject
from sandbox.kubeapi.field_errors import FieldError

__all__ = ["check_builtin", "job_errors"]

_RESTART = "spec.template.spec.restartPolicy"
_JOB_POLICIES = ("OnFailure", "Never")


def job_errors(job: JsonObject) -> list[FieldError]:
    """The field errors kube-apiserver gives for this Job's restart policy."""
    spec = job.get("spec") if isinstance(job.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    template = spec.get("template") if isinstance(spec.get("template"), dict) else {}
    assert isinstance(template, dict)
    pod = template.get("spec") if isinstance(template.get("spec"), dict) else {}
    assert isinstance(pod, dict)
    # The API defaults a pod template's restartPolicy to Always before validating.
    policy = pod.get("restartPolicy") or "Always"
    if policy == "Always":
        return [fe.required(_RESTART, 'valid values: "OnFailure", "Never"')]
    if policy not in _JOB_POLICIES:
        return [fe.not_supported(_RESTART, policy, _JOB_POLICIES)]
    if spec.get("podFailurePolicy") is not None and policy != "Never":
        return [fe.invalid(_RESTART, policy,
                           'only "Never" is supported when podFailurePolicy is specified')]
    return []


def check_builtin(group: str, resource: str, obj: JsonObject) -> None:
    """Raise the 422 ``Invalid`` kube-apiserver answers when ``obj`` breaks a rule above."""
    if (group, resource) != ("batch", "jobs"):
        return
    errors = job_errors(obj)
    if errors:
        name = str((obj.get("metadata") or {}).get("name") or "")
        raise fe.invalid_error("batch", "Job", name, errors)
