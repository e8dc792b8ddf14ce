"""What a node pool's machine type and accelerators mean for its Nodes.

Compute Engine sizes (vCPUs, GiB) of the machine types TPU and GPU pools use and the
GPUs of a node config's ``accelerators`` — with the TPU facts of a machine type (the
sandbox's own, :mod:`sandbox.gke.tpu_facts`), the inputs :mod:`sandbox.cluster.nodes`
builds a Node's labels, taints and resources from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_SIZE", "MACHINE_SIZES", "gpu_accelerators"]

# vCPUs and GiB of memory (Compute Engine tables).
MACHINE_SIZES: dict[str, tuple[int, int]] = {
    "g2-standard-4": (4, 16),
    "g2-standard-8": (8, 32),
    "g2-standard-12": (12, 48),
    "g2-standard-16": (16, 64),
    "g2-standard-24": (24, 96),
    "g2-standard-32": (32, 128),
    "g2-standard-48": (48, 192),
    "g2-standard-96": (96, 384),
    "ct5lp-hightpu-1t": (24, 48),
    "ct5lp-hightpu-4t": (112, 192),
    "ct5lp-hightpu-8t": (224, 384),
    "ct4p-hightpu-4t": (240, 407),
    "ct5p-hightpu-4t": (208, 448),
    "ct6e-standard-1t": (44, 176),
    "ct6e-standard-4t": (180, 720),
    "ct6e-standard-8t": (180, 1440),
}
DEFAULT_SIZE = (8, 32)


def gpu_accelerators(config: Mapping[str, Any]) -> tuple[str, int] | None:
    """(accelerator type, GPUs per node) of a node config's ``accelerators``, if any."""
    for entry in config.get("accelerators") or []:
        kind = str(entry.get("acceleratorType") or "")
        try:
            count = int(entry.get("acceleratorCount") or 0)
        except (TypeError, ValueError):
            count = 0
        if kind and count > 0:
            return kind, count
    return None
