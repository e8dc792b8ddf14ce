"""Kueue's ResourceFlavor assignment for ``google.com/tpu``, as pure functions.

Follows Kueue v0.9 and v0.10 (``pkg/scheduler/flavorassigner``, ``pkg/cache``) for the
one resource the sandbox meters:

* The ClusterQueue's resource group covering ``google.com/tpu`` lists its flavors
  in order, each with its own ``nominalQuota``. Pod sets (a JobSet's replicated
  jobs) are assigned in order; each takes the first flavor that fits, and the
  chips of the pod sets before it count against the flavor they took.
* A flavor fits when its ResourceFlavor's ``spec.nodeLabels`` do not conflict with
  the pod template's ``nodeSelector`` and required node affinity, comparing only
  the label keys some flavor of the group sets (so ``gke-tpu-topology`` never
  decides), and when ``nominalQuota`` minus the chips admitted in that flavor
  covers the request.
* When no flavor fits, the pending message gives every flavor's reason, sorted
  and joined as Kueue does: ``couldn't assign flavors to pod set slice: flavor X
  doesn't match node affinity, insufficient unused quota for google.com/tpu in
  flavor Y, 16 more needed``.
* A ClusterQueue naming a flavor that has no ResourceFlavor object is inactive
  (``FlavorNotFound``) and admits nothing.

Usage is per flavor and comes from the admitted Workloads'
``status.admission.podSetAssignments[].flavors``/``resourceUsage``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sandbox.cluster.objects import TPU_RESOURCE, Obj, parse_quantity

# The sandbox kube-scheduler's nodeSelector/required-node-affinity matcher: Kueue
# likewise reuses kube-scheduler's nodeaffinity package against a flavor's labels.
from sandbox.cluster.scheduler import selector_matches

__all__ = [
    "Assignment",
    "Flavor",
    "PodSet",
    "admitted_usage",
    "assign_flavors",
    "inactive_message",
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


@dataclass(frozen=True)
class Assignment:
    """The flavor of each pod set that requests chips and the chips this puts on
    each flavor; when some pod set fits nowhere, ``message`` says why."""

    pod_sets: dict[str, Flavor]
    usage: dict[str, int]
    message: str = ""

    @property
    def fits(self) -> bool:
        return not self.message


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


def inactive_message(missing: Sequence[str]) -> str:
    """The ClusterQueue's Active=False (reason FlavorNotFound) message."""
    return ("Can't admit new workloads: references missing ResourceFlavor(s): "
            f"[{' '.join(missing)}].")


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


def _unfit_reason(flavor: Flavor, selector: Obj, chips: int, used: int) -> str | None:
    """Why ``flavor`` cannot take ``chips`` more (None when it can); ``used`` counts
    the chips already admitted or assigned in it."""
    if not selector_matches(selector, flavor.node_labels):
        return f"flavor {flavor.name} doesn't match node affinity"
    if chips > flavor.quota:
        return (f"insufficient quota for {TPU_RESOURCE} in flavor {flavor.name}, "
                f"request > maximum capacity ({chips} > {flavor.quota})")
    available = max(flavor.quota - used, 0)
    if chips > available:
        return (f"insufficient unused quota for {TPU_RESOURCE} in flavor {flavor.name}, "
                f"{chips - available} more needed")
    return None


def _pending(pod_set: PodSet, reasons: Iterable[str]) -> str:
    return f"couldn't assign flavors to pod set {pod_set.name}: " + ", ".join(sorted(reasons))


def assign_flavors(pod_sets: Sequence[PodSet], flavors: Sequence[Flavor] | None,
                   usage: Mapping[str, int]) -> Assignment:
    """Kueue's flavor assignment for one Workload against ``usage`` (chips admitted
    per flavor in its ClusterQueue); stops at the first pod set that fits nowhere."""
    keys = {key for flavor in flavors or [] for key in flavor.node_labels}
    assumed: dict[str, int] = {}
    chosen: dict[str, Flavor] = {}
    for pod_set in pod_sets:
        if pod_set.chips <= 0:
            continue
        if flavors is None:
            return Assignment(chosen, assumed, _pending(
                pod_set, [f"resource {TPU_RESOURCE} unavailable in ClusterQueue"]))
        selector = _flavor_selector(pod_set.pod_spec, keys)
        reasons: list[str] = []
        for flavor in flavors:
            previous = assumed.get(flavor.name, 0)
            reason = _unfit_reason(flavor, selector, previous + pod_set.chips,
                                   usage.get(flavor.name, 0))
            if reason is None:
                chosen[pod_set.name] = flavor
                assumed[flavor.name] = previous + pod_set.chips
                break
            reasons.append(reason)
        else:
            return Assignment(chosen, assumed, _pending(pod_set, reasons))
    return Assignment(chosen, assumed)
