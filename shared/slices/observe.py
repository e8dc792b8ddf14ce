"""Reading the cluster into the planner's views: a constant number of list calls.

One run lists JobSets, the pods JobSets own, the TPU-capable nodes and the node
pools — four calls however many objects exist — and never gets objects one by one.
``build_observed`` is the pure part: it turns raw API objects into views.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from shared.config import SliceConfig
from shared.errors import PermanentError
from shared.jobspec.labels import (
    ACCELERATOR_LABEL,
    ANNOTATION_CAPACITY,
    ANNOTATION_PROVISION,
    ANNOTATION_TPU_TYPE,
    JOBSET_NAME_LABEL,
    LABEL_JOBSET,
    LABEL_JOBSET_NAMESPACE,
    LABEL_SLICE,
    NODEPOOL_LABEL,
    TOPOLOGY_LABEL,
)
from shared.jobspec.tpu import TpuShape, lookup, shape_for
from shared.nodepools import NodePoolInfo
from shared.slices.model import JobSetView, Observed, PoolView

__all__ = ["build_observed", "finished_at", "parse_time"]

_TERMINATED = ("Succeeded", "Failed")


def parse_time(value: str | None) -> float | None:
    """RFC 3339 (as Kubernetes prints it) to epoch seconds."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _tpu_job(jobset: dict[str, Any]) -> tuple[TpuShape | None, int]:
    """The TPU shape and slice count of the JobSet's (first) TPU replicated job."""
    annotations = jobset["metadata"].get("annotations") or {}
    for replicated in jobset.get("spec", {}).get("replicatedJobs") or []:
        pod = (replicated.get("template", {}).get("spec", {}).get("template", {})
               .get("spec", {}))
        selector = pod.get("nodeSelector") or {}
        if ACCELERATOR_LABEL not in selector:
            continue
        shape: TpuShape | None = None
        if annotations.get(ANNOTATION_TPU_TYPE):
            try:
                shape = lookup(annotations[ANNOTATION_TPU_TYPE])
            except PermanentError:
                shape = None
        if shape is None:
            shape = shape_for(selector[ACCELERATOR_LABEL], selector.get(TOPOLOGY_LABEL, ""))
        return shape, int(replicated.get("replicas", 1))
    return None, 0


def finished_at(jobset: dict[str, Any]) -> float | None:
    """When the JobSet's Completed or Failed condition became true; None while it runs."""
    for condition in (jobset.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Completed", "Failed") and condition.get("status") == "True":
            return parse_time(condition.get("lastTransitionTime")) or 0.0
    return None


def _default_capacity(settings: SliceConfig) -> str:
    if settings.reservation:
        return f"reservation/{settings.reservation}"
    return "spot" if settings.spot else "on-demand"


def _active(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in _TERMINATED and not (
        pod["metadata"].get("deletionTimestamp"))


def build_observed(jobsets: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]],
                   nodes: Iterable[dict[str, Any]], pools: Iterable[NodePoolInfo],
                   settings: SliceConfig) -> Observed:
    """Views of the cluster for the planner (pure)."""
    pods = list(pods)
    active_by_jobset: Counter[str] = Counter()
    active_by_node: Counter[str] = Counter()
    for pod in pods:
        if not _active(pod):
            continue
        meta = pod["metadata"]
        owner = (meta.get("labels") or {}).get(JOBSET_NAME_LABEL)
        if owner:
            active_by_jobset[f"{meta.get('namespace')}/{owner}"] += 1
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            active_by_node[node] += 1
    nodes_by_pool: Counter[str] = Counter()
    active_by_pool: Counter[str] = Counter()
    for node in nodes:
        pool = (node["metadata"].get("labels") or {}).get(NODEPOOL_LABEL)
        if pool:
            nodes_by_pool[pool] += 1
            active_by_pool[pool] += active_by_node[node["metadata"]["name"]]

    default_capacity = _default_capacity(settings)
    views: list[JobSetView] = []
    for jobset in jobsets:
        meta = jobset["metadata"]
        annotations = meta.get("annotations") or {}
        shape, slices = _tpu_job(jobset)
        key = f"{meta['namespace']}/{meta['name']}"
        views.append(JobSetView(
            namespace=meta["namespace"], name=meta["name"], shape=shape, slices=slices,
            suspended=bool(jobset.get("spec", {}).get("suspend", False)),
            finished_at=finished_at(jobset),
            deleting=bool(meta.get("deletionTimestamp")),
            opted_out=annotations.get(ANNOTATION_PROVISION, "").lower() == "false",
            capacity=annotations.get(ANNOTATION_CAPACITY) or default_capacity,
            created_at=parse_time(meta.get("creationTimestamp")) or 0.0,
            active_pods=active_by_jobset[key],
        ))

    pool_views: list[PoolView] = []
    for pool in pools:
        slice_label = pool.labels.get(LABEL_SLICE, "")
        pool_views.append(PoolView(
            name=pool.name, status=pool.status, machine_type=pool.machine_type,
            jobset_namespace=pool.labels.get(LABEL_JOBSET_NAMESPACE),
            jobset_name=pool.labels.get(LABEL_JOBSET),
            slice_index=int(slice_label) if slice_label.isdigit() else None,
            nodes=nodes_by_pool[pool.name], active_pods=active_by_pool[pool.name],
        ))
    return Observed(jobsets=tuple(views), pools=tuple(pool_views))
