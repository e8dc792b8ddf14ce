"""Node pool validation the way GKE does it, from the sandbox's own TPU facts.

Pure functions over node pool JSON (camelCase, proto3 JSON form as the REST
client sends it). Each refusal is an INVALID_ARGUMENT :class:`GkeError` whose
message names the offending field (``nodePool.config.machineType``, ...).

TPU rules (see the project's TPU facts):

* the machine type must exist: every TPU machine type of
  :mod:`sandbox.gke.tpu_facts` plus a few CPU machine types;
* ``placementPolicy.tpuTopology``, when given, must be a topology GKE offers for that
  machine type (its tables' rows, plus the larger v4 / v5p slices);
* a multi-host topology (more than one VM) needs ``initialNodeCount`` equal to its
  VM count, placement type COMPACT and autoscaling off, and can only be resized to
  0 or to the full VM count. Single-host TPU machine types need no topology.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from sandbox.gke.errors import invalid_argument
from sandbox.gke.tpu_facts import TpuMachine, accepts_topology, tpu_machine, tpu_machines

__all__ = [
    "CPU_MACHINE_TYPES",
    "DEFAULT_MACHINE_TYPE",
    "POOL_NAME_PATTERN",
    "TpuMachine",
    "is_multi_host",
    "is_valid_topology",
    "known_machine_types",
    "machine_type_of",
    "slice_vms",
    "tpu_machine",
    "validate_autoscaling",
    "validate_node_count",
    "validate_node_pool",
]

DEFAULT_MACHINE_TYPE = "e2-medium"

CPU_MACHINE_TYPES: frozenset[str] = frozenset(
    {"e2-micro", "e2-small", "e2-medium"}
    | {f"e2-{kind}-{n}" for kind in ("standard", "highmem", "highcpu") for n in (2, 4, 8, 16, 32)}
    | {f"n1-standard-{n}" for n in (1, 2, 4, 8, 16, 32, 64, 96)}
    | {f"n2-{kind}-{n}" for kind in ("standard", "highmem", "highcpu")
       for n in (2, 4, 8, 16, 32, 48, 64, 80, 96, 128)}
    | {f"n2d-standard-{n}" for n in (2, 4, 8, 16, 32, 48, 64, 96, 128, 224)}
    | {f"c3-standard-{n}" for n in (4, 8, 22, 44, 88, 176)}
    # Machine types with GPUs attached (G2: NVIDIA L4, A2: A100, A3: H100); the pool's
    # accelerators config names the GPU, as GKE asks for it.
    | {f"g2-standard-{n}" for n in (4, 8, 12, 16, 24, 32, 48, 96)}
    | {f"a2-highgpu-{n}g" for n in (1, 2, 4, 8)}
    | {"a3-highgpu-8g"}
)

# GKE's own pattern (it also quotes it in its error message).
POOL_NAME_PATTERN = "(?:[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?)"
_POOL_NAME = re.compile(POOL_NAME_PATTERN)
_TOPOLOGY = re.compile(r"[1-9][0-9]*(?:x[1-9][0-9]*){1,2}")
_COMPACT = ("COMPACT", 1)


def known_machine_types() -> frozenset[str]:
    return CPU_MACHINE_TYPES | frozenset(tpu_machines())


def _chips(topology: str) -> int:
    return math.prod(int(dim) for dim in topology.split("x"))


def is_valid_topology(machine_type: str, topology: str) -> bool:
    """Whether GKE accepts ``topology`` for a TPU node pool of ``machine_type``."""
    return bool(_TOPOLOGY.fullmatch(topology)) and accepts_topology(machine_type, topology)


def machine_type_of(pool: Mapping[str, Any]) -> str:
    config = pool.get("config") or {}
    return str(config.get("machineType") or DEFAULT_MACHINE_TYPE)


def _topology_of(pool: Mapping[str, Any]) -> str:
    return str((pool.get("placementPolicy") or {}).get("tpuTopology") or "")


def slice_vms(pool: Mapping[str, Any]) -> int:
    """VMs in one slice of the pool: topology chips / chips per VM; 1 without a topology."""
    machine = tpu_machine(machine_type_of(pool))
    topology = _topology_of(pool)
    if machine is None or not topology or not _TOPOLOGY.fullmatch(topology):
        return 1
    return max(1, _chips(topology) // machine.chips_per_vm)


def is_multi_host(pool: Mapping[str, Any]) -> bool:
    """A multi-host TPU slice: one atomic pool, 0 or all of its VMs."""
    return slice_vms(pool) > 1


def _int(value: Any, field: str) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        raise invalid_argument(field, value, "Must be an integer.") from None


def validate_node_pool(pool: Mapping[str, Any], prefix: str = "nodePool") -> None:
    """Refuse a node pool GKE would refuse; raises an INVALID_ARGUMENT :class:`GkeError`."""
    name = pool.get("name") or ""
    if not isinstance(name, str) or not _POOL_NAME.fullmatch(name):
        raise invalid_argument(
            f"{prefix}.name", name,
            f"Must be a match of regex '{POOL_NAME_PATTERN}' (only alphanumerics and '-' "
            "allowed, must start with a letter and end with an alphanumeric, and must be no "
            "longer than 40 characters).")
    machine_type = machine_type_of(pool)
    if machine_type not in known_machine_types():
        raise invalid_argument(
            f"{prefix}.config.machineType", machine_type,
            f"Machine type '{machine_type}' does not exist; TPU machine types are "
            f"{', '.join(sorted(tpu_machines()))}.")
    count = _int(pool.get("initialNodeCount"), f"{prefix}.initialNodeCount")
    if count < 0:
        raise invalid_argument(f"{prefix}.initialNodeCount", count, "Must be non-negative.")
    placement = pool.get("placementPolicy") or {}
    topology = _topology_of(pool)
    machine = tpu_machine(machine_type)
    if topology:
        if machine is None:
            raise invalid_argument(
                f"{prefix}.placementPolicy.tpuTopology", topology,
                f"TPU topology is only supported for TPU machine types, not '{machine_type}'.")
        if not is_valid_topology(machine_type, topology):
            raise invalid_argument(
                f"{prefix}.placementPolicy.tpuTopology", topology,
                f"Topology is not valid for machine type '{machine_type}' "
                f"({machine.family}); valid topologies are {', '.join(machine.topologies)}.")
    validate_autoscaling(pool, pool.get("autoscaling") or {}, f"{prefix}.autoscaling")
    if machine is not None and is_multi_host(pool):
        vms = slice_vms(pool)
        if count != vms:
            raise invalid_argument(
                f"{prefix}.initialNodeCount", count,
                f"TPU topology {topology} with machine type '{machine_type}' needs exactly "
                f"{vms} nodes ({_chips(topology)} chips / {machine.chips_per_vm} chips per VM).")
        if placement.get("type") not in _COMPACT:
            raise invalid_argument(
                f"{prefix}.placementPolicy.type", placement.get("type", "TYPE_UNSPECIFIED"),
                "A multi-host TPU node pool needs placement policy type COMPACT.")


def validate_autoscaling(pool: Mapping[str, Any], autoscaling: Mapping[str, Any],
                         prefix: str = "autoscaling") -> None:
    """Refuse autoscaling settings GKE would refuse for ``pool``."""
    if not autoscaling.get("enabled"):
        return
    if is_multi_host(pool):
        raise invalid_argument(
            f"{prefix}.enabled", True,
            f"Autoscaling is not supported for multi-host TPU node pools "
            f"(topology {_topology_of(pool)}).")
    low = _int(autoscaling.get("minNodeCount"), f"{prefix}.minNodeCount")
    high = _int(autoscaling.get("maxNodeCount"), f"{prefix}.maxNodeCount")
    if low < 0:
        raise invalid_argument(f"{prefix}.minNodeCount", low, "Must be non-negative.")
    if high < 1 or high < low:
        raise invalid_argument(f"{prefix}.maxNodeCount", high,
                               f"Must be at least 1 and at least minNodeCount ({low}).")


def validate_node_count(pool: Mapping[str, Any], node_count: int,
                        field: str = "nodeCount") -> None:
    """Refuse a resize GKE would refuse: negative, or partial for a multi-host slice."""
    if node_count < 0:
        raise invalid_argument(field, node_count, "Must be non-negative.")
    if is_multi_host(pool):
        vms = slice_vms(pool)
        if node_count not in (0, vms):
            raise invalid_argument(
                field, node_count,
                f"A multi-host TPU node pool (topology {_topology_of(pool)}, {vms} VMs) can "
                f"only be resized to 0 or {vms} nodes.")

