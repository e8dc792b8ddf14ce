"""Kueue's ResourceFlavor assignment for ``google.com/tpu``, as pure functions.

Follows Kueue v0.10.1 (``pkg/scheduler/flavorassigner/flavorassigner.go``,
``pkg/cache/clusterqueue.go``) for the one resource the sandbox meters, with its
default flavor fungibility (``whenCanBorrow: Borrow``, ``whenCanPreempt:
TryNextFlavor``; the ``FlavorFungibility`` gate is on by default):

* The ClusterQueue's resource group covering ``google.com/tpu`` lists its flavors
  in order, each with its own ``nominalQuota``. Pod sets (a JobSet's replicated
  jobs) are assigned in order; the chips of the pod sets before one count against
  the flavor they took.
* A flavor matches when its ResourceFlavor's ``spec.nodeLabels`` do not conflict
  with the pod template's ``nodeSelector`` and required node affinity, comparing
  only the label keys some flavor of the group sets (so ``gke-tpu-topology`` never
  decides). A matching flavor *fits* when ``nominalQuota`` minus the chips admitted
  in it covers the request; when it does not but the request is within
  ``nominalQuota``, the flavor can be had by *preempting* (``fitsResourceQuota``:
  mode Preempt, whatever the ClusterQueue's preemption policy); a request above
  ``nominalQuota`` never fits it (NoFit).
* Each pod set takes the first flavor that fits; failing that, the first one it
  could have by preempting (TryNextFlavor looks at the others first); failing that
  the assignment stops there (NoFit). The assignment's mode is its worst pod set's.
* A pod set that did not fit gives every flavor's reason, sorted and joined as
  Kueue does, and pod sets are joined with ``; ``: ``couldn't assign flavors to pod
  set slice: flavor X doesn't match node affinity, insufficient unused quota for
  google.com/tpu in flavor Y, 16 more needed``.
* A ClusterQueue naming a flavor that has no ResourceFlavor object is inactive
  (``FlavorNotFound``) and admits nothing, whatever else exists.

Usage is per flavor and comes from the admitted Workloads'
``status.admission.podSetAssignments[].flavors``/``resourceUsage``. Not simulated:
``LastAssignment`` (where a retried workload resumes its flavor search), flavor
taints and tolerations, borrowing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# The sandbox kube-scheduler's nodeSelector/required-node-affinity matcher: Kueue
# likewise reuses kube-scheduler's nodeaffinity package against a flavor's labels.
from sandbox.cluster.kube_scheduler import selector_matches
from sandbox.cluster.objects import TPU_RESOURCE, Obj, parse_quantity

__all__ = [
    "FIT",
    "NO_FIT",
    "PREEMPT",
    "Assignment",
    "Flavor",
    "PodSet",
    "admitted_usage",
    "assign_flavors",
    "missing_flavors",
    "tpu_flavors",
]


@dataclass(frozen=True)
class Flavor:
    """One flavor of the resource group covering ``google.com/tpu``."""

    name: str
    quota: int
    node_labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PodSet:
    """A replicated job as Kueue sees it: its name, chips in total, pod template."""

    name: str
    chips: int
    pod_spec: Mapping[str, Any]


# Kueue's FlavorAssignmentMode, from worst to best.
NO_FIT, PREEMPT, FIT = "NoFit", "Preempt", "Fit"
_RANK = {NO_FIT: 0, PREEMPT: 1, FIT: 2}


@dataclass(frozen=True)
class Assignment:
    """The flavor of each pod set that requests chips and the chips this puts on
    each flavor; ``mode`` is Kueue's representative mode (Fit: admissible now;
    Preempt: only by preempting in the ``preempting`` flavors; NoFit), and
    ``message`` says why it is not Fit."""

    pod_sets: dict[str, Flavor]
    usage: dict[str, int]
    message: str = ""
    mode: str = FIT
    preempting: frozenset[str] = frozenset()

    @property
    def fits(self) -> bool:
        return self.mode == FIT


def _tpu_group(cluster_queue: Mapping[str, Any]) -> Obj | None:
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        covered = group.get("coveredResources") or []
        listed = any(resource.get("name") == TPU_RESOURCE
                     for entry in group.get("flavors") or []
                     for resource in entry.get("resources") or [])
        if TPU_RESOURCE in covered or listed:
            return dict(group)
    return None


def tpu_flavors(cluster_queue: Mapping[str, Any],
                node_labels: Mapping[str, Mapping[str, str]]) -> list[Flavor] | None:
    """The flavors offering ``google.com/tpu``, in the ClusterQueue's order, with
    their nominal quota and the ``node_labels`` of their ResourceFlavor; None when
    no resource group covers ``google.com/tpu``."""
    group = _tpu_group(cluster_queue)
    if group is None:
        return None
    flavors = []
    for entry in group.get("flavors") or []:
        quota = sum(parse_quantity(r.get("nominalQuota", 0))
                    for r in entry.get("resources") or [] if r.get("name") == TPU_RESOURCE)
        name = str(entry.get("name", ""))
        flavors.append(Flavor(name, round(quota), dict(node_labels.get(name) or {})))
    return flavors


def missing_flavors(cluster_queue: Mapping[str, Any], existing: Iterable[str]) -> list[str]:
    """Flavors the ClusterQueue names (all resource groups, in order) that have no
    ResourceFlavor object."""
    known = set(existing)
    missing: list[str] = []
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        for entry in group.get("flavors") or []:
            name = str(entry.get("name", ""))
            if name not in known and name not in missing:
                missing.append(name)
    return missing


def admitted_usage(admission: Mapping[str, Any]) -> dict[str, int]:
    """Chips per flavor that a Workload's ``status.admission`` holds."""
    usage: dict[str, int] = {}
    for assignment in admission.get("podSetAssignments") or []:
        flavor = (assignment.get("flavors") or {}).get(TPU_RESOURCE)
        chips = (assignment.get("resourceUsage") or {}).get(TPU_RESOURCE)
        if flavor and chips is not None:
            usage[str(flavor)] = usage.get(str(flavor), 0) + round(parse_quantity(chips))
    return usage


def _flavor_selector(pod_spec: Mapping[str, Any], keys: set[str]) -> Obj:
    """The pod's node constraints reduced to the label keys the flavors set, as
    Kueue's ``flavorSelector`` does: other keys cannot tell flavors apart."""
    selector = {k: v for k, v in (pod_spec.get("nodeSelector") or {}).items() if k in keys}
    reduced: Obj = {"nodeSelector": selector}
    required = ((((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution")) or {})
    terms: list[Obj] = []
    for term in required.get("nodeSelectorTerms") or []:
        expressions = [e for e in term.get("matchExpressions") or [] if e.get("key") in keys]
        if not expressions:
            # Terms are ORed: one left without constraints matches every flavor.
            terms = []
            break
        terms.append({"matchExpressions": expressions})
    if terms:
        reduced["affinity"] = {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    return reduced


def _flavor_mode(flavor: Flavor, selector: Obj, chips: int, used: int) -> tuple[str, str]:
    """How ``flavor`` can take ``chips`` more (``used``: the chips already admitted or
    assigned in it), and why not when it cannot right away (``fitsResourceQuota``)."""
    if not selector_matches(selector, flavor.node_labels):
        return NO_FIT, f"flavor {flavor.name} doesn't match node affinity"
    if chips > flavor.quota:
        return NO_FIT, (f"insufficient quota for {TPU_RESOURCE} in flavor {flavor.name}, "
                        f"request > maximum capacity ({chips} > {flavor.quota})")
    available = max(flavor.quota - used, 0)
    if chips <= available:
        return FIT, ""
    return PREEMPT, (f"insufficient unused quota for {TPU_RESOURCE} in flavor {flavor.name}, "
                     f"{chips - available} more needed")


def _pending(pod_set: PodSet, reasons: Iterable[str]) -> str:
    return f"couldn't assign flavors to pod set {pod_set.name}: " + ", ".join(sorted(reasons))


def assign_flavors(pod_sets: Sequence[PodSet], flavors: Sequence[Flavor] | None,
                   usage: Mapping[str, int]) -> Assignment:
    """Kueue's flavor assignment for one Workload against ``usage`` (chips admitted
    per flavor in its ClusterQueue); stops at the first pod set no flavor can take."""
    keys = {key for flavor in flavors or [] for key in flavor.node_labels}
    assumed: dict[str, int] = {}
    chosen: dict[str, Flavor] = {}
    messages: list[str] = []
    preempting: set[str] = set()
    mode = FIT

    def result(worst: str) -> Assignment:
        return Assignment(chosen, assumed, "; ".join(messages), worst, frozenset(preempting))

    for pod_set in pod_sets:
        if pod_set.chips <= 0:
            continue
        if flavors is None:
            messages.append(_pending(
                pod_set, [f"resource {TPU_RESOURCE} unavailable in ClusterQueue"]))
            return result(NO_FIT)
        selector = _flavor_selector(pod_set.pod_spec, keys)
        reasons: list[str] = []
        best: Flavor | None = None
        best_mode = NO_FIT
        for flavor in flavors:
            previous = assumed.get(flavor.name, 0)
            flavor_mode, reason = _flavor_mode(flavor, selector, previous + pod_set.chips,
                                               usage.get(flavor.name, 0))
            if reason:
                reasons.append(reason)
            if _RANK[flavor_mode] > _RANK[best_mode]:
                best, best_mode = flavor, flavor_mode
            if flavor_mode == FIT:
                break
        if best is None:
            messages.append(_pending(pod_set, reasons))
            return result(NO_FIT)
        chosen[pod_set.name] = best
        assumed[best.name] = assumed.get(best.name, 0) + pod_set.chips
        if best_mode == PREEMPT:
            # Kueue keeps the reasons of a pod set that is not Fit; a Fit one has none.
            messages.append(_pending(pod_set, reasons))
            preempting.add(best.name)
            mode = PREEMPT
    return result(mode)
