"""Node pools become Nodes, as GKE's node pool machinery does for a real cluster.

:meth:`NodePoolController.on_pool_event` takes the sandbox GKE API's node pool
events (``POOL_RUNNING``, ``POOL_RESIZED``, ``POOL_DELETED``, ``POOL_ERROR``) with
the Container API NodePool JSON and creates, resizes or deletes the pool's Nodes:
named ``gke-<cluster>-<pool>-<8 hex>-<4 random>``, labelled like GKE labels TPU
nodes (``cloud.google.com/gke-nodepool``, ``cloud.google.com/gke-tpu-accelerator``,
``cloud.google.com/gke-tpu-topology``, ...), tainted ``google.com/tpu=present:
NoSchedule`` and offering ``google.com/tpu`` = chips per VM. Pools with GPUs
(``config.accelerators: [{acceleratorType: nvidia-l4, acceleratorCount: 1}]``)
get what GKE gives GPU nodes: the label ``cloud.google.com/gke-accelerator``,
``nvidia.com/gpu`` = the count in capacity and allocatable, and the taint
``nvidia.com/gpu=present:NoSchedule``.

Pods bound to a Node that no longer exists are failed the way the pod garbage
collector does it (phase Failed, reason ``NodeLost``, condition
``DisruptionTarget``): :meth:`NodePoolController.fail_lost_pods`.

``POOL_DISRUPTED`` (the GKE API's fault injection: a Spot VM preempted, a
maintenance event on a slice) shuts down one Node of the pool (the one named, else
the first with running Pods) or, for maintenance, every Node of it, and brings them
back after the disruption's simulated seconds (:mod:`sandbox.cluster.disruptions`).
"""

from __future__ import annotations

import hashlib
import logging
import random
import re
import string
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sandbox.cluster.disruptions import NodeDisruptions
from sandbox.cluster.machines import (
    DEFAULT_SIZE,
    MACHINE_SIZES,
    gpu_accelerators,
)
from sandbox.cluster.objects import (
    GPU_RESOURCE,
    LABEL_GKE_ACCELERATOR,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_PREEMPTIBLE,
    LABEL_SPOT,
    LABEL_TPU_ACCELERATOR,
    LABEL_TPU_TOPOLOGY,
    NODES,
    PODS,
    TPU_RESOURCE,
    Obj,
    condition,
    delete_quietly,
    deleting,
    meta,
    name_of,
    patch_quietly,
    pod_terminated,
    short_digest,
    timestamp,
)
from sandbox.common.clock import SimClock
from sandbox.gke.tpu_facts import tpu_machine
from sandbox.kubeapi import ApiError, ObjectStore

# The node label of a pool with workloadMetadataConfig GKE_METADATA.
LABEL_METADATA_SERVER = "iam.gke.io/gke-metadata-server-enabled"

__all__ = [
    "POOL_EVENTS",
    "ClusterRef",
    "NodePoolController",
    "gpu_accelerators",
]

log = logging.getLogger(__name__)

POOL_EVENTS = frozenset({"POOL_RUNNING", "POOL_RESIZED", "POOL_DELETED", "POOL_ERROR",
                         "POOL_DISRUPTED"})
ANNOTATION_CLUSTER = "sandbox.accelops.dev/cluster"
TPU_TAINT: Obj = {"key": TPU_RESOURCE, "value": "present", "effect": "NoSchedule"}
GPU_TAINT: Obj = {"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}

_CLUSTER_PATH = re.compile(r"projects/([^/]+)/(?:locations|zones)/([^/]+)/clusters/([^/:]+)")
_TAINT_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
    "NO_EXECUTE": "NoExecute",
}
_SUFFIX_ALPHABET = string.ascii_lowercase + string.digits


@dataclass(frozen=True, slots=True)
class ClusterRef:
    """``projects/<project>/locations/<location>/clusters/<name>``, parsed."""

    project: str
    location: str
    name: str

    @classmethod
    def parse(cls, path: str) -> ClusterRef | None:
        match = _CLUSTER_PATH.search(path)
        return cls(*match.groups()) if match else None

    @property
    def path(self) -> str:
        return f"projects/{self.project}/locations/{self.location}/clusters/{self.name}"


def _pool_node_count(pool: Mapping[str, Any]) -> int:
    for key in ("nodeCount", "initialNodeCount"):
        value = pool.get(key)
        if value is not None:
            try:
                return max(0, int(value))
            except (TypeError, ValueError):
                continue
    return 0


def _zone_and_region(pool: Mapping[str, Any], cluster: ClusterRef) -> tuple[str, str]:
    locations = pool.get("locations") or []
    zone = str(locations[0]) if locations else cluster.location
    region = zone.rsplit("-", 1)[0] if zone.count("-") >= 2 else zone
    return zone, region


class NodePoolController:
    """Creates, resizes and deletes the Nodes of node pools; fails pods on lost Nodes."""

    def __init__(
        self,
        store: ObjectStore,
        clock: SimClock,
        *,
        cluster: str | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.cluster = ClusterRef.parse(cluster) if cluster else None
        self._rng = rng or random.Random()  # noqa: S311 - names, not secrets
        self.disruptions = NodeDisruptions(store, clock, self._rng)

    # ------------------------------------------------------------------ events

    def on_pool_event(self, event: str, cluster_path: str, pool: Mapping[str, Any]) -> None:
        """React to one node pool event of the GKE API (other clusters are ignored)."""
        cluster = ClusterRef.parse(cluster_path)
        if cluster is None:
            log.warning("node pool event %s for an unparsable cluster %r", event, cluster_path)
            return
        if self.cluster is not None and cluster != self.cluster:
            return
        pool_name = str(pool.get("name", ""))
        if not pool_name:
            return
        if event in ("POOL_RUNNING", "POOL_RESIZED"):
            self.ensure_nodes(cluster, pool, _pool_node_count(pool))
        elif event == "POOL_DELETED":
            self.ensure_nodes(cluster, pool, 0)
        elif event == "POOL_DISRUPTED":
            self.disrupt(pool)
        # POOL_ERROR: GKE leaves whatever VMs came up; nothing changes here.

    # ------------------------------------------------------------------ nodes

    def nodes_of_pool(self, pool_name: str) -> list[Obj]:
        return self.store.list(*NODES, label_selector=f"{LABEL_NODEPOOL}={pool_name}")

    def ensure_nodes(self, cluster: ClusterRef, pool: Mapping[str, Any], count: int) -> None:
        """Make the pool have exactly ``count`` Nodes."""
        pool_name = str(pool["name"])
        existing = [n for n in self.nodes_of_pool(pool_name) if not deleting(n)]
        if len(existing) < count:
            for _ in range(count - len(existing)):
                self._create_node(cluster, pool)
        elif len(existing) > count:
            busy = self._busy_nodes()
            # Scale in idle nodes first, newest first (sorts are stable).
            victims = sorted(existing, key=lambda n: str(meta(n).get("creationTimestamp", "")),
                             reverse=True)
            victims.sort(key=lambda n: name_of(n) in busy)
            for node in victims[: len(existing) - count]:
                delete_quietly(self.store, NODES, name_of(node))
            self.fail_lost_pods()

    def disrupt(self, pool: Mapping[str, Any]) -> list[str]:
        """Shut down the Nodes a ``POOL_DISRUPTED`` event names; returns their names.

        ``pool["disruption"]``: ``kind`` (``preemption``: one Node, ``node`` or else
        the first running Pods; ``maintenance``: every Node of the pool) and
        ``seconds`` until they are back.
        """
        disruption: Mapping[str, Any] = pool.get("disruption") or {}
        kind = str(disruption.get("kind") or "")
        nodes = sorted((n for n in self.nodes_of_pool(str(pool.get("name", "")))
                        if not deleting(n)), key=name_of)
        if kind == "preemption":
            wanted = disruption.get("node")
            if wanted:
                nodes = [n for n in nodes if name_of(n) == wanted]
            else:
                busy = self._busy_nodes()
                nodes = [n for n in nodes if name_of(n) in busy][:1] or nodes[:1]
        if not nodes:
            log.warning("disruption %r of pool %s found no node to shut down", kind,
                        pool.get("name"))
            return []
        self.disruptions.shut_down(nodes, kind, float(disruption.get("seconds") or 0))
        return [name_of(n) for n in nodes]

    def bring_back(self) -> float | None:
        """Bring back disrupted Nodes that are due; returns when the next one is."""
        return self.disruptions.bring_back()

    def _busy_nodes(self) -> set[str]:
        return {
            str(pod["spec"]["nodeName"])
            for pod in self.store.list(*PODS)
            if (pod.get("spec") or {}).get("nodeName") and not pod_terminated(pod)
        }

    def node_name(self, cluster: ClusterRef, pool_name: str) -> str:
        """``gke-<cluster>-<pool>-<8 hex>-<4 random>``, at most 63 characters.

        The hex part is the pool's instance group hash, the one in the GKE API's
        ``instanceGroupUrls`` (``gke-<cluster>-<pool>-<8 hex>-grp``), as on GKE.
        """
        group = hashlib.sha256(f"{cluster.path}/{pool_name}".encode()).hexdigest()[:8]
        stem = f"gke-{cluster.name[:20]}-{pool_name}"[:49].rstrip("-")
        suffix = "".join(self._rng.choice(_SUFFIX_ALPHABET) for _ in range(4))
        return f"{stem}-{group}-{suffix}"

    def build_node(self, cluster: ClusterRef, pool: Mapping[str, Any], name: str) -> Obj:
        """The Node object GKE's kubelet would register for one VM of ``pool``."""
        config: Mapping[str, Any] = pool.get("config") or {}
        machine_type = str(config.get("machineType") or "e2-standard-8")
        zone, region = _zone_and_region(pool, cluster)
        labels: dict[str, str] = {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
            LABEL_HOSTNAME: name,
            LABEL_INSTANCE_TYPE: machine_type,
            "beta.kubernetes.io/instance-type": machine_type,
            "topology.kubernetes.io/zone": zone,
            "topology.kubernetes.io/region": region,
            "failure-domain.beta.kubernetes.io/zone": zone,
            "failure-domain.beta.kubernetes.io/region": region,
            "cloud.google.com/machine-family": machine_type.split("-", 1)[0],
            "cloud.google.com/gke-os-distribution": "cos",
            "cloud.google.com/gke-boot-disk": "pd-balanced",
            LABEL_NODEPOOL: str(pool["name"]),
        }
        if config.get("spot"):
            labels[LABEL_SPOT] = "true"
        # GKE labels the nodes of a pool running the GKE metadata server (Workload
        # Identity); pods that need it select them. The REST client sends the enum as
        # its number (GKE_METADATA = 2) with enum-encoding=int, or as its name.
        mode = (config.get("workloadMetadataConfig") or {}).get("mode")
        if mode in ("GKE_METADATA", 2, "2"):
            labels[LABEL_METADATA_SERVER] = "true"
        if config.get("preemptible"):
            labels[LABEL_PREEMPTIBLE] = "true"
        taints: list[Obj] = []
        cpus, memory_gib = MACHINE_SIZES.get(machine_type, DEFAULT_SIZE)
        capacity: dict[str, str] = {
            "cpu": str(cpus),
            "memory": f"{memory_gib * 1024 * 1024}Ki",
            "ephemeral-storage": "98831908Ki",
            "pods": "110",
        }
        allocatable: dict[str, str] = {
            "cpu": f"{cpus * 1000 - 940}m" if cpus > 1 else "940m",
            "memory": f"{int(memory_gib * 1024 * 1024 * 0.9)}Ki",
            "ephemeral-storage": "47060071478",
            "pods": "110",
        }
        tpu = tpu_machine(machine_type)
        if tpu is not None:
            placement = pool.get("placementPolicy") or {}
            topology = str(placement.get("tpuTopology") or tpu.single_host_topology or "")
            labels[LABEL_TPU_ACCELERATOR] = tpu.accelerator
            if topology:
                labels[LABEL_TPU_TOPOLOGY] = topology
            taints.append(dict(TPU_TAINT))
            capacity[TPU_RESOURCE] = allocatable[TPU_RESOURCE] = str(tpu.chips_per_vm)
        gpus = gpu_accelerators(config)
        if gpus is not None:
            labels[LABEL_GKE_ACCELERATOR] = gpus[0]
            taints.append(dict(GPU_TAINT))
            capacity[GPU_RESOURCE] = allocatable[GPU_RESOURCE] = str(gpus[1])
        for key, value in (config.get("labels") or {}).items():
            labels[str(key)] = str(value)
        for taint in config.get("taints") or []:
            effect = _TAINT_EFFECTS.get(str(taint.get("effect")), str(taint.get("effect")))
            entry = {"key": str(taint.get("key", "")), "effect": effect}
            if taint.get("value"):
                entry["value"] = str(taint["value"])
            if entry not in taints:
                taints.append(entry)
        now = timestamp(self.clock)
        internal_ip = f"10.{self._rng.randrange(256)}.{self._rng.randrange(256)}." \
                      f"{self._rng.randrange(1, 255)}"
        spec: Obj = {
            "providerID": f"gce://{cluster.project}/{zone}/{name}",
            "podCIDR": f"10.{self._rng.randrange(256)}.{self._rng.randrange(256)}.0/24",
        }
        if taints:
            spec["taints"] = taints
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {
                    ANNOTATION_CLUSTER: cluster.path,
                    "container.googleapis.com/instance_id": str(self._rng.randrange(10**18)),
                    "node.alpha.kubernetes.io/ttl": "0",
                },
            },
            "spec": spec,
            "status": {
                "capacity": capacity,
                "allocatable": allocatable,
                "conditions": condition(
                    [], "Ready", True, "KubeletReady", "kubelet is posting ready status", now,
                    extra={"lastHeartbeatTime": now},
                ),
                "addresses": [
                    {"type": "InternalIP", "address": internal_ip},
                    {"type": "Hostname", "address": name},
                ],
                "nodeInfo": {
                    "architecture": "amd64",
                    "bootID": str(uuid.UUID(int=self._rng.getrandbits(128))),
                    "containerRuntimeVersion": "containerd://1.7.24",
                    "kernelVersion": "6.1.112+",
                    "kubeProxyVersion": "v1.31.5-gke.1169000",
                    "kubeletVersion": "v1.31.5-gke.1169000",
                    "machineID": short_digest(name, "machine", length=32),
                    "operatingSystem": "linux",
                    "osImage": "Container-Optimized OS from Google",
                    "systemUUID": str(uuid.UUID(int=self._rng.getrandbits(128))),
                },
            },
        }

    def _create_node(self, cluster: ClusterRef, pool: Mapping[str, Any]) -> None:
        for _ in range(10):
            name = self.node_name(cluster, str(pool["name"]))
            try:
                self.store.create(*NODES, self.build_node(cluster, pool, name))
                return
            except ApiError as exc:
                if exc.code != 409:
                    raise
        raise RuntimeError(f"could not find a free node name for pool {pool['name']!r}")

    # ------------------------------------------------------------------ pod GC

    def fail_lost_pods(self) -> int:
        """Fail unfinished pods bound to Nodes that no longer exist; returns how many."""
        nodes = {name_of(node) for node in self.store.list(*NODES)}
        failed = 0
        for pod in self.store.list(*PODS):
            node = (pod.get("spec") or {}).get("nodeName")
            if not node or node in nodes or pod_terminated(pod):
                continue
            self._fail_lost_pod(pod, str(node))
            failed += 1
        return failed

    def _fail_lost_pod(self, pod: Obj, node: str) -> None:
        now = timestamp(self.clock)
        status: Obj = dict(pod.get("status") or {})
        conditions = condition(status.get("conditions"), "DisruptionTarget", True,
                               "DeletionByPodGC", "PodGC: node no longer exists", now)
        conditions = condition(conditions, "Ready", False, "PodFailed", "", now)
        statuses = []
        for entry in status.get("containerStatuses") or []:
            entry = dict(entry)
            started = ((entry.get("state") or {}).get("running") or {}).get("startedAt")
            entry["state"] = {"terminated": {
                "exitCode": 137,
                "reason": "ContainerStatusUnknown",
                "message": "The container could not be located when the pod was terminated",
                "startedAt": started,
                "finishedAt": now,
            }}
            entry["ready"] = False
            entry["started"] = False
            statuses.append(entry)
        status.update(
            phase="Failed",
            reason="NodeLost",
            message=f"Node {node} which was running pod {name_of(pod)} was deleted",
            conditions=conditions,
        )
        if statuses:
            status["containerStatuses"] = statuses
        patch_quietly(self.store, PODS, pod, {"status": status}, subresource="status")
