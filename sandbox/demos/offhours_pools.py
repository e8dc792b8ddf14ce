"""The static node pools and the pod the schedule scenario starts with.

Pools a team would keep by hand, each labelled onto a schedule: an autoscaled
GPU inference pool, a single-host TPU dev pool, a multi-host TPU team slice (which
GKE cannot resize: off-hours it is deleted, its spec saved), and one that opts out
with ``accelops.dev/keep=true``. The pod is a bare one, as a person starts from a
notebook: pinned to its pool by ``cloud.google.com/gke-nodepool``, tolerating the
TPU nodes' taint, running for as long as ``ACCELOPS_SANDBOX_RUN_SECONDS`` says
(sandbox/cluster/runtime.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.jobspec.labels import LABEL_KEEP, LABEL_SCHEDULE, LABEL_TEAM, NODEPOOL_LABEL

__all__ = ["DemoPool", "busy_pod", "demo_pools"]


@dataclass(frozen=True, slots=True)
class DemoPool:
    name: str
    what: str  # for people
    spec: dict[str, Any]  # a NodePool, snake_case, as shared.gke creates it

    @property
    def kept(self) -> bool:
        return LABEL_KEEP in self.spec["config"]["labels"]


def _labels(schedule: str, team: str, *, keep: bool = False) -> dict[str, str]:
    labels = {LABEL_SCHEDULE: schedule, LABEL_TEAM: team}
    if keep:
        labels[LABEL_KEEP] = "true"
    return labels


def _l4(name: str, nodes: int, labels: dict[str, str],
        autoscaling: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name, "initial_node_count": nodes,
        "config": {"machine_type": "g2-standard-8", "labels": labels,
                   "accelerators": [{"accelerator_count": 1,
                                     "accelerator_type": "nvidia-l4"}]}}
    if autoscaling:
        spec["autoscaling"] = autoscaling
    return spec


def _v5e(name: str, nodes: int, topology: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "initial_node_count": nodes,
            "config": {"machine_type": "ct5lp-hightpu-4t", "labels": labels},
            "placement_policy": {"type_": "COMPACT", "tpu_topology": topology}}


def demo_pools(schedule: str) -> tuple[DemoPool, ...]:
    return (
        DemoPool("l4-inference", "GPU inference, g2-standard-8 + L4, autoscaled 1..3",
                 _l4("l4-inference", 2, _labels(schedule, "inference"),
                     {"enabled": True, "min_node_count": 1, "max_node_count": 3})),
        DemoPool("v5e-dev", "TPU dev pool, ct5lp-hightpu-4t 2x2 (single host)",
                 _v5e("v5e-dev", 1, "2x2", _labels(schedule, "research"))),
        DemoPool("v5e-team", "TPU team slice, ct5lp-hightpu-4t 4x4 (4 hosts)",
                 _v5e("v5e-team", 4, "4x4", _labels(schedule, "research"))),
        DemoPool("l4-oncall", "GPU on-call pool, g2-standard-8 + L4, kept up",
                 _l4("l4-oncall", 1, _labels(schedule, "inference", keep=True))),
    )


def busy_pod(name: str, namespace: str, pool: str, chips: int,
             run_seconds: float) -> dict[str, Any]:
    """A bare pod on ``pool`` (a TPU pool) that runs ``run_seconds`` simulated seconds."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {NODEPOOL_LABEL: pool},
            "tolerations": [{"key": "google.com/tpu", "operator": "Exists",
                             "effect": "NoSchedule"}],
            "containers": [{
                "name": "notebook", "image": "us-docker.pkg.dev/acme/train/llama:1.4",
                "command": ["python", "explore.py"],
                "resources": {"limits": {"google.com/tpu": str(chips)}},
                "env": [{"name": "ACCELOPS_SANDBOX_RUN_SECONDS",
                         "value": str(int(run_seconds))}],
            }],
        },
    }
