"""The cluster as the schedule scenario reads it, through the real clients
(shared.gke for the Container API, shared.kube for Kubernetes)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sandbox.demos.gke_operations import operations
from shared import gke, kube
from shared.config import Settings
from shared.errors import AccelopsError
from shared.jobspec.labels import NODEPOOL_LABEL
from shared.kube import CONFIG_MAPS, NODES, PODS
from shared.offhours.store import SAVED_SELECTOR

__all__ = ["Cluster", "WaitError", "is_as_before", "is_down"]

# A bound, not an estimate: each wait ends as soon as the cluster is as asked.
WAIT_SECONDS = 180.0


class WaitError(AccelopsError):
    pass


class Cluster:
    """The cluster's pools and pods through the real clients (shared.gke, shared.kube)."""

    def __init__(self, namespace: str) -> None:
        kube.reset_client()
        self.settings = Settings.from_env()
        self.kube = kube.get_client(self.settings)
        self.state_namespace = namespace

    def specs(self) -> dict[str, dict[str, Any]]:
        return {spec["name"]: spec for spec in gke.list_node_pool_specs(self.settings)}

    def nodes(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for node in self.kube.list(NODES, label_selector=NODEPOOL_LABEL):
            pool = node["metadata"]["labels"][NODEPOOL_LABEL]
            counts[pool] = counts.get(pool, 0) + 1
        return counts

    def saved(self) -> list[str]:
        return sorted(c["metadata"]["name"] for c in self.kube.list(
            CONFIG_MAPS, self.state_namespace, label_selector=SAVED_SELECTOR))

    def pod_phase(self, name: str, namespace: str) -> str:
        pod = self.kube.find(PODS, name, namespace)
        return str(((pod or {}).get("status") or {}).get("phase") or "absent")

    def operations(self) -> list[dict[str, Any]]:
        return operations()

    def settled(self) -> bool:
        """No GKE operation runs, and the cluster has the nodes GKE says it has."""
        if any(op.get("status") != "DONE" for op in self.operations()):
            return False
        s = self.settings
        cluster = gke.container_client(s).get_cluster(
            name=f"projects/{s.project}/locations/{s.location}/clusters/{s.cluster}")
        return sum(self.nodes().values()) == int(cluster.current_node_count)

    def wait_for(self, what: str, check: Callable[[], bool],
                 timeout: float = WAIT_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise WaitError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(0.1)


def is_as_before(spec: dict[str, Any] | None, nodes: int, before: dict[str, Any],
                 nodes_before: int) -> bool:
    """Whether a pool is back as it was: RUNNING, its nodes, its autoscaling."""
    return (spec is not None and spec.get("status") == "RUNNING" and nodes == nodes_before
            and spec.get("autoscaling") == before.get("autoscaling"))


def is_down(spec: dict[str, Any] | None, nodes: int) -> bool:
    """Whether a pool is off: deleted, or RUNNING at zero nodes with nothing to bring
    nodes back (an autoscaling minimum)."""
    if spec is None:
        return True
    minimum = int((spec.get("autoscaling") or {}).get("min_node_count") or 0)
    return spec.get("status") == "RUNNING" and nodes == 0 and minimum == 0
