"""Pools as pool_schedule sees them, built from API objects (pure).

A pool's size is the number of its Nodes in the cluster (the NodePool message has
no current size). It is busy while pods other than DaemonSet pods run or wait on
its nodes, or while an admitted Kueue workload selects nodes the pool has (a job
admitted at 18:59 whose pods are not yet created still needs the pool).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from shared.jobspec.labels import (
    ACCELERATOR_LABEL,
    LABEL_POOL_MANAGED_BY,
    MANAGED_BY,
    NODEPOOL_LABEL,
    TOPOLOGY_LABEL,
)
from shared.jobspec.tpu import machine_shapes, topology_chips
from shared.offhours.model import PoolView

__all__ = ["build_pools", "pool_node_labels"]

_TERMINAL = ("Succeeded", "Failed")
_LISTED = 3  # names shown in a busy reason


def _tpu(machine_type: str) -> tuple[str, int] | None:
    """(accelerator label, chips per VM) of a TPU machine type."""
    shapes = machine_shapes(machine_type)
    return (shapes[0].accelerator, shapes[0].chips_per_vm) if shapes else None


def pool_node_labels(spec: Mapping[str, Any]) -> dict[str, str]:
    """The labels GKE gives the pool's nodes: its own, its name, its TPU shape."""
    config = spec.get("config") or {}
    labels = {str(k): str(v) for k, v in (config.get("labels") or {}).items()}
    labels[NODEPOOL_LABEL] = str(spec.get("name", ""))
    tpu = _tpu(str(config.get("machine_type", "")))
    if tpu is not None:
        labels[ACCELERATOR_LABEL] = tpu[0]
        topology = (spec.get("placement_policy") or {}).get("tpu_topology")
        if topology:
            labels[TOPOLOGY_LABEL] = str(topology)
    return labels


def _accelerators(spec: Mapping[str, Any]) -> tuple[str | None, int, bool]:
    """(accelerator type, accelerators per node, multi-host TPU slice?)."""
    config = spec.get("config") or {}
    tpu = _tpu(str(config.get("machine_type", "")))
    if tpu is not None:
        accelerator, per_vm = tpu
        topology = str((spec.get("placement_policy") or {}).get("tpu_topology") or "")
        return accelerator, per_vm, topology_chips(topology) > per_vm
    for accelerator in config.get("accelerators") or []:
        return (str(accelerator.get("accelerator_type")),
                int(accelerator.get("accelerator_count") or 0), False)
    return None, 0, False


def _daemon(pod: Mapping[str, Any]) -> bool:
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(owner.get("kind") == "DaemonSet" for owner in owners)


def _ref(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _listed(kind: str, names: list[str]) -> str:
    shown = ", ".join(sorted(names)[:_LISTED])
    more = f" and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
    return f"{len(names)} {kind}: {shown}{more}"


def _admitted(workload: Mapping[str, Any]) -> bool:
    status = workload.get("status") or {}
    if not status.get("admission"):
        return False
    return not any(c.get("type") == "Finished" and c.get("status") == "True"
                   for c in status.get("conditions") or [])


def _selectors(workload: Mapping[str, Any]) -> list[dict[str, str]]:
    selectors = []
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        pod_spec = ((pod_set.get("template") or {}).get("spec")) or {}
        selector = pod_spec.get("nodeSelector") or {}
        if selector:
            selectors.append({str(k): str(v) for k, v in selector.items()})
    return selectors


def build_pools(cluster: str, specs: Iterable[Mapping[str, Any]],
                nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]],
                workloads: Iterable[Mapping[str, Any]]) -> list[PoolView]:
    """Every node pool of one cluster, with its size and why it is busy."""
    node_pool: dict[str, str] = {}
    counts: dict[str, int] = defaultdict(int)
    for node in nodes:
        meta = node.get("metadata") or {}
        pool = (meta.get("labels") or {}).get(NODEPOOL_LABEL)
        if pool:
            node_pool[str(meta.get("name"))] = pool
            counts[pool] += 1
    running: dict[str, list[str]] = defaultdict(list)
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase")
        pool = node_pool.get(str((pod.get("spec") or {}).get("nodeName") or ""))
        if pool and phase not in _TERMINAL and not _daemon(pod):
            running[pool].append(_ref(pod))
    admitted = [(w, _selectors(w)) for w in workloads if _admitted(w)]
    views = []
    for spec in specs:
        name = str(spec.get("name", ""))
        labels = {str(k): str(v) for k, v in ((spec.get("config") or {}).get("labels")
                                              or {}).items()}
        node_labels = pool_node_labels(spec)
        waiting = [_ref(w) for w, selectors in admitted
                   if any(s.items() <= node_labels.items() for s in selectors)]
        busy = []
        if running.get(name):
            busy.append(_listed("pod(s) running", running[name]))
        if waiting:
            busy.append(_listed("admitted workload(s)", waiting))
        accelerator, per_node, multi_host = _accelerators(spec)
        zones = max(len(spec.get("locations") or []), 1)
        autoscaling = spec.get("autoscaling") or {}
        views.append(PoolView(
            cluster=cluster, name=name, status=str(spec.get("status", "")), labels=labels,
            nodes=counts.get(name, 0), zones=zones,
            autoscaling=dict(autoscaling) if autoscaling.get("enabled") else None,
            multi_host=multi_host, accelerator_type=accelerator,
            accelerators_per_node=per_node,
            full_size=int(spec.get("initial_node_count") or 0) * zones, spec=dict(spec),
            busy=tuple(busy), managed=labels.get(LABEL_POOL_MANAGED_BY) == MANAGED_BY))
    return views
