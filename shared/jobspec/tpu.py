"""The catalogue of TPU slice shapes that accelops can schedule on GKE.

A TPU type name such as ``v5p-128`` or ``v5litepod-16`` decides everything the
provisioner and the job renderer need: the GKE accelerator node label, the slice
topology, the machine type of the node pool, how many VMs (hosts) form the slice
and how many chips each VM exposes as ``google.com/tpu``.

Design:

* **An explicit table.** Every shape listed in the project's facts file (the GKE
  "Plan TPUs in GKE" tables) is written out below, row for row, in the same order.
  :func:`catalogue` returns exactly these rows; :func:`lookup` answers them as is.
* **A derivation rule for larger v4 / v5p slices.** Their names count TensorCores
  (2 per chip), and GKE accepts larger 3-D topologies than the table lists. For a
  v4 or v5p name larger than the biggest explicit row (up to ``v4-8192`` and
  ``v5p-17920``), the shape is derived: chips = cores / 2, VMs = chips / 4 and the
  topology is ``AxBxC`` with ``A <= B <= C``, each a multiple of 4, ``A*B*C`` =
  chips, choosing the most cubic factorisation (smallest ``C/A``, then smallest
  ``C``). The rule reproduces the table's own large rows (``v4-256`` -> ``4x4x8``,
  ``v5p-1024`` -> ``8x8x8``) and GKE's largest slice (``v5p-17920`` -> ``16x20x28``).
* **Everything else is refused** with :class:`UnknownTpuTypeError`, a
  :class:`~shared.errors.PermanentError` on field ``tpu.type`` whose message names
  the value and the valid sizes, so a bad request is acknowledged and never retried.

The module imports only the standard library: it sits on a Cloud Run cold-start path.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.errors import PermanentError
from shared.jobspec.labels import ACCELERATOR_LABEL, TOPOLOGY_LABEL

__all__ = ["TpuShape", "UnknownTpuTypeError", "catalogue", "lookup", "machine_shapes",
           "shape_for", "topology_chips"]



class UnknownTpuTypeError(PermanentError):
    """The TPU type is not in the catalogue and cannot be derived from its rule."""

    def __init__(
        self, message: str, *, field: str | None = "tpu.type", rule: str | None = "tpu.type.known"
    ) -> None:
        super().__init__(message, field=field, rule=rule)


@dataclass(frozen=True, slots=True)
class TpuShape:
    """One TPU slice shape as GKE provisions it."""

    #: The TPU type name, e.g. ``"v5litepod-16"``.
    type: str
    #: The TPU generation: ``"v4"``, ``"v5e"``, ``"v5p"`` or ``"v6e"``.
    family: str
    #: Value of the ``cloud.google.com/gke-tpu-accelerator`` node label.
    accelerator: str
    #: Value of the ``cloud.google.com/gke-tpu-topology`` node label, e.g. ``"4x4"``.
    topology: str
    #: Machine type of the node pool, e.g. ``"ct5lp-hightpu-4t"``.
    machine_type: str
    #: Number of VMs (hosts, Kubernetes nodes) in one slice.
    vms: int
    #: Chips per VM, the ``google.com/tpu`` resource request of each worker pod.
    chips_per_vm: int

    @property
    def chips(self) -> int:
        """Chips in the slice: ``vms * chips_per_vm``, the product of the topology dims."""
        return self.vms * self.chips_per_vm

    @property
    def multi_host(self) -> bool:
        """Whether the slice spans several VMs (an atomic, non-resizable node pool)."""
        return self.vms > 1

    def node_selector(self) -> dict[str, str]:
        """The pod ``nodeSelector`` that lands a worker on a node of this shape."""
        return {ACCELERATOR_LABEL: self.accelerator, TOPOLOGY_LABEL: self.topology}


def _rows(
    family: str, accelerator: str, rows: tuple[tuple[str, str, str, int, int], ...]
) -> tuple[TpuShape, ...]:
    return tuple(
        TpuShape(name, family, accelerator, topology, machine, vms, per_vm)
        for name, topology, machine, vms, per_vm in rows
    )


# The facts table, row for row and in its order.
_CATALOGUE: tuple[TpuShape, ...] = (
    *_rows(
        "v5e",
        "tpu-v5-lite-podslice",
        (
            ("v5litepod-1", "1x1", "ct5lp-hightpu-1t", 1, 1),
            ("v5litepod-4", "2x2", "ct5lp-hightpu-4t", 1, 4),
            ("v5litepod-8", "2x4", "ct5lp-hightpu-8t", 1, 8),
            ("v5litepod-16", "4x4", "ct5lp-hightpu-4t", 4, 4),
            ("v5litepod-32", "4x8", "ct5lp-hightpu-4t", 8, 4),
            ("v5litepod-64", "8x8", "ct5lp-hightpu-4t", 16, 4),
            ("v5litepod-128", "8x16", "ct5lp-hightpu-4t", 32, 4),
            ("v5litepod-256", "16x16", "ct5lp-hightpu-4t", 64, 4),
        ),
    ),
    *_rows(
        "v4",
        "tpu-v4-podslice",
        (
            ("v4-8", "2x2x1", "ct4p-hightpu-4t", 1, 4),
            ("v4-16", "2x2x2", "ct4p-hightpu-4t", 2, 4),
            ("v4-32", "2x2x4", "ct4p-hightpu-4t", 4, 4),
            ("v4-64", "2x4x4", "ct4p-hightpu-4t", 8, 4),
            ("v4-128", "4x4x4", "ct4p-hightpu-4t", 16, 4),
            ("v4-256", "4x4x8", "ct4p-hightpu-4t", 32, 4),
        ),
    ),
    *_rows(
        "v5p",
        "tpu-v5p-slice",
        (
            ("v5p-8", "2x2x1", "ct5p-hightpu-4t", 1, 4),
            ("v5p-16", "2x2x2", "ct5p-hightpu-4t", 2, 4),
            ("v5p-32", "2x2x4", "ct5p-hightpu-4t", 4, 4),
            ("v5p-64", "2x4x4", "ct5p-hightpu-4t", 8, 4),
            ("v5p-128", "4x4x4", "ct5p-hightpu-4t", 16, 4),
            ("v5p-256", "4x4x8", "ct5p-hightpu-4t", 32, 4),
            ("v5p-512", "4x8x8", "ct5p-hightpu-4t", 64, 4),
            ("v5p-1024", "8x8x8", "ct5p-hightpu-4t", 128, 4),
        ),
    ),
    *_rows(
        "v6e",
        "tpu-v6e-slice",
        (
            ("v6e-1", "1x1", "ct6e-standard-1t", 1, 1),
            ("v6e-4", "2x2", "ct6e-standard-4t", 1, 4),
            ("v6e-8", "2x4", "ct6e-standard-8t", 1, 8),
            ("v6e-16", "4x4", "ct6e-standard-4t", 4, 4),
            ("v6e-32", "4x8", "ct6e-standard-4t", 8, 4),
            ("v6e-64", "8x8", "ct6e-standard-4t", 16, 4),
            ("v6e-128", "8x16", "ct6e-standard-4t", 32, 4),
            ("v6e-256", "16x16", "ct6e-standard-4t", 64, 4),
        ),
    ),
)

_BY_TYPE: dict[str, TpuShape] = {shape.type: shape for shape in _CATALOGUE}
_BY_MACHINE: dict[str, tuple[TpuShape, ...]] = {}
for _shape in _CATALOGUE:
    _BY_MACHINE[_shape.machine_type] = (*_BY_MACHINE.get(_shape.machine_type, ()), _shape)


@dataclass(frozen=True, slots=True)
class _Derivable:
    """How to derive the larger slices of a family whose names count TensorCores."""

    family: str
    accelerator: str
    machine_type: str
    largest_listed: int  # size (cores) of the largest explicit row
    largest: int  # size (cores) of the largest slice GKE offers


_DERIVABLE: dict[str, _Derivable] = {
    "v4": _Derivable("v4", "tpu-v4-podslice", "ct4p-hightpu-4t", 256, 8192),
    "v5p": _Derivable("v5p", "tpu-v5p-slice", "ct5p-hightpu-4t", 1024, 17920),
}

# Name prefix of each family (v5e slices are named "v5litepod-N").
_PREFIXES: tuple[str, ...] = ("v5litepod", "v4", "v5p", "v6e")

_CORES_PER_CHIP = 2
_CHIPS_PER_VM = 4
_DIM_STEP = 4  # every dimension of a derived topology is a multiple of this


def _cubic_topology(chips: int) -> str | None:
    """``AxBxC`` (multiples of 4, ``A <= B <= C``) with product ``chips``, most cubic first."""
    unit = _DIM_STEP**3
    if chips <= 0 or chips % unit:
        return None
    n = chips // unit
    best: tuple[int, int, int] | None = None
    a = 1
    while a * a * a <= n:
        if n % a == 0:
            rest = n // a
            b = a
            while b * b <= rest:
                if rest % b == 0:
                    c = rest // b
                    # Compare c/a with best_c/best_a exactly, then prefer the smaller c.
                    if (
                        best is None
                        or c * best[0] < best[2] * a
                        or (c * best[0] == best[2] * a and c < best[2])
                    ):
                        best = (a, b, c)
                b += 1
        a += 1
    if best is None:  # pragma: no cover - n >= 1 always has (1, 1, n)
        return None
    return "x".join(str(_DIM_STEP * dim) for dim in best)


def _derive(rule: _Derivable, cores: int) -> TpuShape | None:
    if cores <= rule.largest_listed or cores > rule.largest or cores % _CORES_PER_CHIP:
        return None
    chips = cores // _CORES_PER_CHIP
    topology = _cubic_topology(chips)
    if topology is None:
        return None
    return TpuShape(
        type=f"{rule.family}-{cores}",
        family=rule.family,
        accelerator=rule.accelerator,
        topology=topology,
        machine_type=rule.machine_type,
        vms=chips // _CHIPS_PER_VM,
        chips_per_vm=_CHIPS_PER_VM,
    )


def _sizes_hint(prefix: str) -> str:
    listed = ", ".join(s.type for s in _CATALOGUE if s.type.startswith(prefix + "-"))
    rule = _DERIVABLE.get(prefix)
    if rule is None:
        return f"{prefix} sizes count chips and are {listed}"
    step = _DIM_STEP**3 * _CORES_PER_CHIP
    return (
        f"{prefix} sizes count TensorCores (2 per chip) and are {listed}, or a larger "
        f"multiple of {step} up to {prefix}-{rule.largest} "
        f"(e.g. {prefix}-{rule.largest_listed * 2})"
    )


def _unknown(value: str, detail: str) -> UnknownTpuTypeError:
    return UnknownTpuTypeError(f"unknown TPU type {value!r}: {detail}")


def lookup(tpu_type: str) -> TpuShape:
    """The shape of ``tpu_type`` (surrounding whitespace and case are ignored).

    Raises :class:`UnknownTpuTypeError` (field ``tpu.type``) for any name that is
    neither a catalogue row nor a derivable larger v4 / v5p slice.
    """
    if not isinstance(tpu_type, str):
        raise _unknown(str(tpu_type), "a TPU type is a string such as 'v5p-8'")
    name = tpu_type.strip().lower()
    shape = _BY_TYPE.get(name)
    if shape is not None:
        return shape
    prefix, dash, size = name.rpartition("-")
    if not dash or prefix not in _PREFIXES:
        raise _unknown(
            tpu_type,
            "expected <family>-<size> with family v5e (named v5litepod-N), v4, v5p or v6e, "
            "e.g. 'v5litepod-16', 'v4-8', 'v5p-128', 'v6e-8'",
        )
    rule = _DERIVABLE.get(prefix)
    # Canonical decimal only: no sign, no leading zero, ASCII digits.
    if rule is not None and size.isascii() and size.isdigit() and not size.startswith("0"):
        derived = _derive(rule, int(size))
        if derived is not None:
            return derived
    raise _unknown(tpu_type, _sizes_hint(prefix))


def catalogue() -> tuple[TpuShape, ...]:
    """Every explicit row of the catalogue, in table order (families grouped, ascending)."""
    return _CATALOGUE


def machine_shapes(machine_type: str) -> tuple[TpuShape, ...]:
    """The catalogue rows of a TPU machine type (empty for any other machine type)."""
    return _BY_MACHINE.get(machine_type, ())


def topology_chips(topology: str) -> int:
    """Chips in a topology such as ``4x4`` or ``2x2x4`` (0 when it is not one)."""
    dims = topology.split("x")
    if not topology or not all(d.isdigit() for d in dims):
        return 0
    chips = 1
    for dim in dims:
        chips *= int(dim)
    return chips


def shape_for(accelerator: str, topology: str) -> TpuShape | None:
    """The shape a pod's GKE node labels describe, or None when no TPU matches.

    Used to read a JobSet that was not rendered by accelops: its pods say which
    accelerator and topology they need, not which type name they came from.
    """
    for shape in _CATALOGUE:
        if (shape.accelerator, shape.topology) == (accelerator, topology):
            return shape
    for rule in _DERIVABLE.values():
        if rule.accelerator != accelerator:
            continue
        dims = topology.split("x")
        if len(dims) != 3 or not all(d.isdigit() for d in dims):
            return None
        chips = int(dims[0]) * int(dims[1]) * int(dims[2])
        derived = _derive(rule, chips * _CORES_PER_CHIP)
        if derived is not None and derived.topology == topology:
            return derived
    return None
