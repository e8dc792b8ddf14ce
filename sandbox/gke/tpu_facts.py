"""What GKE accepts for TPU node pools: the sandbox's own copy of the facts it enforces.

Written out from GKE's "Plan TPUs in GKE" tables (machine type, accelerator label,
topologies, chips per VM), not imported from the library's TPU catalogue
(``shared/jobspec/tpu.py``): a stand-in that asked the code under test what a valid shape is would
accept whatever wrong shape that code produced, and no end-to-end test could catch it.
``tests/unit/test_stand_in_facts.py`` holds the two copies to each other.

Larger v4 and v5p slices than the tables list: GKE offers one 3-D topology per size, up
to 4,096 chips (v4-8192) and 8,960 chips (v5p-17920, 16x20x28), each dimension a multiple
of 4, the most nearly cubic arrangement of the chips (the tables' own large rows are:
v4-256 is 4x4x8, v5p-1024 is 8x8x8).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

__all__ = ["TpuMachine", "accepts_topology", "tpu_machine", "tpu_machines"]


@dataclass(frozen=True, slots=True)
class TpuMachine:
    """A TPU machine type as GKE provisions it."""

    machine_type: str
    family: str  # "v4", "v5e", "v5p", "v6e"
    accelerator: str  # the cloud.google.com/gke-tpu-accelerator label of its nodes
    chips_per_vm: int  # google.com/tpu on each node
    topologies: tuple[str, ...]  # the tables' topologies for it, smallest first
    single_host: tuple[str, ...]  # those that fit on one VM
    largest_chips: int = 0  # v4 / v5p: the largest slice GKE offers (0: the tables only)

    @property
    def single_host_topology(self) -> str | None:
        """The topology a node of this machine type has when its pool names none: the
        one single-host topology, if there is exactly one."""
        return self.single_host[0] if len(self.single_host) == 1 else None


# (machine type, family, accelerator, chips per VM, topologies, single-host topologies,
# largest slice in chips). GKE's tables, by machine type.
_MACHINES: tuple[TpuMachine, ...] = (
    TpuMachine("ct5lp-hightpu-1t", "v5e", "tpu-v5-lite-podslice", 1, ("1x1",), ("1x1",)),
    TpuMachine("ct5lp-hightpu-4t", "v5e", "tpu-v5-lite-podslice", 4,
               ("2x2", "4x4", "4x8", "8x8", "8x16", "16x16"), ("2x2",)),
    TpuMachine("ct5lp-hightpu-8t", "v5e", "tpu-v5-lite-podslice", 8, ("2x4",), ("2x4",)),
    TpuMachine("ct4p-hightpu-4t", "v4", "tpu-v4-podslice", 4,
               ("2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8"), ("2x2x1",), 4096),
    TpuMachine("ct5p-hightpu-4t", "v5p", "tpu-v5p-slice", 4,
               ("2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8"),
               ("2x2x1",), 8960),
    TpuMachine("ct6e-standard-1t", "v6e", "tpu-v6e-slice", 1, ("1x1",), ("1x1",)),
    TpuMachine("ct6e-standard-4t", "v6e", "tpu-v6e-slice", 4,
               ("2x2", "4x4", "4x8", "8x8", "8x16", "16x16"), ("2x2",)),
    TpuMachine("ct6e-standard-8t", "v6e", "tpu-v6e-slice", 8, ("2x4",), ("2x4",)),
)


@cache
def tpu_machines() -> dict[str, TpuMachine]:
    """Every TPU machine type GKE offers, by name."""
    return {machine.machine_type: machine for machine in _MACHINES}


def tpu_machine(machine_type: str) -> TpuMachine | None:
    """The TPU machine type's facts, or None for any other machine type."""
    return tpu_machines().get(machine_type)


def _dims(topology: str) -> tuple[int, ...]:
    parts = topology.split("x")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()


def _most_cubic(chips: int) -> tuple[int, int, int] | None:
    """The arrangement of ``chips`` GKE offers beyond its tables: (A, B, C), each a
    multiple of 4, A <= B <= C, the smallest C/A, then the smallest C."""
    candidates = [(a, b, chips // (a * b))
                  for a in range(4, math.isqrt(chips) + 1, 4)
                  for b in range(a, math.isqrt(chips // a) + 1, 4)
                  if chips % (a * b) == 0 and (chips // (a * b)) % 4 == 0]
    return min(candidates, key=lambda d: (d[2] / d[0], d[2]), default=None)


def accepts_topology(machine_type: str, topology: str) -> bool:
    """Whether GKE accepts a node pool of ``machine_type`` with ``topology``."""
    machine = tpu_machine(machine_type)
    if machine is None:
        return False
    if topology in machine.topologies:
        return True
    dims = _dims(topology)
    if len(dims) != 3 or not machine.largest_chips:
        return False
    chips = math.prod(dims)
    listed = max(math.prod(_dims(t)) for t in machine.topologies)
    return listed < chips <= machine.largest_chips and _most_cubic(chips) == dims
