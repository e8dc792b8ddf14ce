"""Kueue's preemption within a ClusterQueue, as pure functions.

Follows Kueue v0.10.1 ``pkg/scheduler/preemption/preemption.go`` for a ClusterQueue
without a cohort (accelops gives each team its own), on ``google.com/tpu``:

* A pending Workload whose flavor assignment is mode Preempt (the request is within
  ``nominalQuota`` but not within what is unused, :mod:`sandbox.cluster.flavors`)
  looks for candidates among the Workloads holding quota in its ClusterQueue, when
  ``spec.preemption.withinClusterQueue`` allows (``findCandidates``):
  ``LowerPriority`` takes those of strictly lower priority; ``LowerOrNewerEqualPriority``
  also those of equal priority queued after it (creation time); ``Never``, the
  CRD's default, none. A candidate must use a flavor the assignment needs to
  preempt in.
* Candidates are ordered (``candidatesOrdering``): those already evicted first,
  then lower priority first, then the most recently admitted first (their
  ``QuotaReserved`` transition time), then by uid.
* ``minimalPreemptions``: candidates are taken away in that order until the
  Workload's whole request fits the nominal quota; then, from the second-to-last
  taken back to the first, each is given back when the Workload still fits
  without it. The rest are the targets; none when even all of them are not
  enough.
* Each target not yet evicted gets ``Evicted`` (reason ``Preempted``) and
  ``Preempted`` (reason ``InClusterQueue``) with the message :func:`message`, and a
  ``Preempted`` Event; the preemptor stays pending with its flavor message and
  ". Pending the preemption of N workload(s)" (``pkg/scheduler/scheduler.go``),
  and, being requeued at once, stays the head of its ClusterQueue: nothing behind
  it is admitted meanwhile.

Not simulated: cohorts (reclaimWithinCohort, borrowWithinCohort), fair sharing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "IN_CLUSTER_QUEUE",
    "LOWER_OR_NEWER_EQUAL_PRIORITY",
    "LOWER_PRIORITY",
    "NEVER",
    "Holder",
    "message",
    "pending_message",
    "targets",
]

NEVER = "Never"
LOWER_PRIORITY = "LowerPriority"
LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"
# kueue.InClusterQueueReason: the Preempted condition's reason within a ClusterQueue.
IN_CLUSTER_QUEUE = "InClusterQueue"


@dataclass(frozen=True)
class Holder:
    """A Workload holding quota in the ClusterQueue, as preemption weighs it."""

    key: str  # namespace/name
    uid: str
    priority: int
    queued_at: str  # creationTimestamp: Kueue's queue order time
    reserved_at: str  # the QuotaReserved condition's lastTransitionTime
    evicted: bool
    usage: Mapping[str, int] = field(default_factory=dict)  # chips per flavor


def message(preemptor_uid: str) -> str:
    """The Evicted/Preempted message and the Event's (``IssuePreemptions``)."""
    return (f"Preempted to accommodate a workload (UID: {preemptor_uid}) due to "
            "prioritization in the ClusterQueue")


def pending_message(assignment_message: str, targets_count: int) -> str:
    """The preemptor's QuotaReserved=False message while its targets are evicted."""
    return f"{assignment_message}. Pending the preemption of {targets_count} workload(s)"


def _may_preempt(policy: str, priority: int, queued_at: str, holder: Holder) -> bool:
    if holder.priority < priority:
        return True
    return (holder.priority == priority and policy == LOWER_OR_NEWER_EQUAL_PRIORITY
            and queued_at < holder.queued_at)


def _fits(requests: Mapping[str, int], quotas: Mapping[str, int],
          usage: Mapping[str, int]) -> bool:
    return all(chips <= quotas.get(flavor, 0) - usage.get(flavor, 0)
               for flavor, chips in requests.items())


def _move(usage: dict[str, int], holder: Holder, sign: int) -> None:
    for flavor, chips in holder.usage.items():
        usage[flavor] = usage.get(flavor, 0) + sign * chips


def targets(policy: str, *, priority: int, queued_at: str, requests: Mapping[str, int],
            preempting: Collection[str], quotas: Mapping[str, int],
            usage: Mapping[str, int], holders: Sequence[Holder]) -> list[Holder]:
    """The Workloads to evict so that a Workload of ``priority``, queued at
    ``queued_at``, requesting ``requests`` (chips per flavor, its whole assignment)
    fits ``quotas`` (nominal chips per flavor) given ``usage`` (chips held per flavor
    by ``holders``); ``preempting``: the flavors its assignment must preempt in.
    Empty when the policy allows none or no set of candidates makes room."""
    if policy not in (LOWER_PRIORITY, LOWER_OR_NEWER_EQUAL_PRIORITY):
        return []
    candidates = [h for h in holders if _may_preempt(policy, priority, queued_at, h)
                  and any(h.usage.get(flavor, 0) > 0 for flavor in preempting)]
    candidates.sort(key=lambda h: (not h.evicted, h.priority,
                                   _descending(h.reserved_at), h.uid))
    remaining = dict(usage)
    chosen: list[Holder] = []
    for candidate in candidates:
        _move(remaining, candidate, -1)
        chosen.append(candidate)
        if _fits(requests, quotas, remaining):
            break
    else:
        return []
    # fillBackWorkloads: the last one taken stays; the others return while it fits.
    for index in range(len(chosen) - 2, -1, -1):
        _move(remaining, chosen[index], +1)
        if _fits(requests, quotas, remaining):
            chosen[index] = chosen[-1]
            chosen.pop()
        else:
            _move(remaining, chosen[index], -1)
    return chosen


def _descending(text: str) -> tuple[int, ...]:
    """A sort key ordering RFC 3339 timestamps (one format) latest first."""
    return tuple(-ord(ch) for ch in text)
