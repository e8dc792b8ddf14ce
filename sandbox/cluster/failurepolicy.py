"""What a JobSet does about its failed Jobs: its ``failurePolicy`` (pure).

A copy of jobset v0.7.2's ``pkg/controllers/failure_policy.go`` with the words of
``pkg/constants/constants.go``:

* no ``failurePolicy``: the JobSet fails, reason ``FailedJobs``, "jobset failed due
  to one or more job failures";
* otherwise the ``rules`` are tried in order; a rule applies to a failed Job when the
  reason of the Job's ``Failed`` condition is one of ``onJobFailureReasons`` and its
  replicated job (label ``jobset.sigs.k8s.io/replicatedjob-name``) one of
  ``targetReplicatedJobs`` (an empty list matches any); the first rule that applies
  to some failed Job wins, with the Job that failed first among those it applies to;
  no rule applying means ``RestartJobSet`` with the first failed Job;
* ``FailJobSet`` fails the JobSet (reason ``FailJobSetFailurePolicyAction``);
  ``RestartJobSet`` restarts it (``restarts`` and ``restartsCountTowardsMax`` + 1, a
  Warning event ``RestartJobSetFailurePolicyAction``) unless
  ``restartsCountTowardsMax`` has reached ``maxRestarts``, when it fails it (reason
  ``ReachedMaxRestarts``, "jobset failed due to reaching max number of restarts");
  ``RestartJobSetAndIgnoreMaxRestarts`` restarts it without counting (``restarts`` +
  1 only, event ``RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction``);
* every message ends with `` (first failed job: <name>)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sandbox.cluster.objects import LABEL_REPLICATED_JOB, labels_of, name_of

__all__ = [
    "FAIL_JOBSET",
    "RESTART_JOBSET",
    "RESTART_JOBSET_IGNORE_MAX",
    "FailureDecision",
    "decide_failure",
]

FAIL_JOBSET = "FailJobSet"
RESTART_JOBSET = "RestartJobSet"
RESTART_JOBSET_IGNORE_MAX = "RestartJobSetAndIgnoreMaxRestarts"

FAILED_JOBS = ("FailedJobs", "jobset failed due to one or more job failures")
REACHED_MAX_RESTARTS = ("ReachedMaxRestarts",
                        "jobset failed due to reaching max number of restarts")
_ACTION_WORDS = {
    FAIL_JOBSET: ("FailJobSetFailurePolicyAction",
                  "applying FailJobSet failure policy action"),
    RESTART_JOBSET: ("RestartJobSetFailurePolicyAction",
                     "applying RestartJobSet failure policy action"),
    RESTART_JOBSET_IGNORE_MAX: ("RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction",
                                "applying RestartJobSetAndIgnoreMaxRestarts failure policy "
                                "action"),
}


@dataclass(frozen=True, slots=True)
class FailureDecision:
    """Fail the JobSet (``fail``) or restart it (``counted`` against maxRestarts or not);
    ``reason`` and ``message`` are the Failed condition's or the restart event's."""

    job: str  # the failed Job the decision names
    fail: bool
    counted: bool
    reason: str
    message: str


def _failed_condition(job: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for entry in (job.get("status") or {}).get("conditions") or []:
        if entry.get("type") == "Failed" and entry.get("status") == "True":
            return dict(entry)
    return None


def _failed_at(job: Mapping[str, Any]) -> str:
    # RFC 3339 timestamps of one clock compare as strings.
    return str((_failed_condition(job) or {}).get("lastTransitionTime") or "")


def _first_failed(jobs: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    first: Mapping[str, Any] | None = None
    for job in jobs:
        if _failed_condition(job) is not None \
                and (first is None or _failed_at(job) < _failed_at(first)):
            first = job
    return first


def _applies(rule: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    reasons = list(rule.get("onJobFailureReasons") or [])
    reason = str((_failed_condition(job) or {}).get("reason") or "")
    if reasons and reason not in reasons:
        return False
    replicated = labels_of(job).get(LABEL_REPLICATED_JOB)
    if not replicated:
        return False
    targets = list(rule.get("targetReplicatedJobs") or [])
    return not targets or replicated in targets


def _with_job(words: tuple[str, str], job: str) -> tuple[str, str]:
    return words[0], f"{words[1]} (first failed job: {job})"


def decide_failure(jobset: Mapping[str, Any],
                   failed: Sequence[Mapping[str, Any]]) -> FailureDecision | None:
    """What the JobSet does about its ``failed`` Jobs (of the current attempt); None
    when none of them has a Failed condition."""
    spec = jobset.get("spec") or {}
    policy = spec.get("failurePolicy")
    first = _first_failed(failed)
    if first is None:
        return None
    if policy is None:
        reason, message = _with_job(FAILED_JOBS, name_of(first))
        return FailureDecision(name_of(first), True, False, reason, message)
    action, matched = RESTART_JOBSET, first
    for rule in policy.get("rules") or []:
        candidate = _first_failed([job for job in failed if _applies(rule, job)])
        if candidate is not None:
            action, matched = str(rule.get("action")), candidate
            break
    name = name_of(matched)
    if action == FAIL_JOBSET:
        return FailureDecision(name, True, False, *_with_job(_ACTION_WORDS[action], name))
    if action == RESTART_JOBSET_IGNORE_MAX:
        return FailureDecision(name, False, False, *_with_job(_ACTION_WORDS[action], name))
    counted = int((jobset.get("status") or {}).get("restartsCountTowardsMax") or 0)
    if counted >= int(policy.get("maxRestarts") or 0):
        return FailureDecision(name, True, False, *_with_job(REACHED_MAX_RESTARTS, name))
    return FailureDecision(name, False, True, *_with_job(_ACTION_WORDS[RESTART_JOBSET], name))
