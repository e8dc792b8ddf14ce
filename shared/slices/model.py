"""Typed views of what reconcile_slices observes and what it decides.

The planner works on these plain values only (no client types), so every decision
can be tested on hand-built states and printed for ``--dry-run``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from shared.jobspec.tpu import TpuShape
from shared.nodepools import PoolSpec

__all__ = [
    "Action",
    "CreatePool",
    "DeletePool",
    "JobSetView",
    "Observed",
    "Plan",
    "PoolView",
    "SliceFailure",
]


@dataclass(frozen=True, slots=True)
class JobSetView:
    namespace: str
    name: str
    shape: TpuShape | None  # None: not a TPU JobSet accelops understands
    slices: int
    suspended: bool
    finished_at: float | None  # when Completed/Failed became true, epoch seconds
    deleting: bool
    opted_out: bool
    capacity: str  # "spot" | "on-demand" | "reservation/<name>"
    created_at: float
    active_pods: int  # pods of this JobSet not yet Succeeded/Failed

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def wants_slices(self) -> bool:
        return (self.shape is not None and not self.suspended and self.finished_at is None
                and not self.deleting and not self.opted_out)


@dataclass(frozen=True, slots=True)
class PoolView:
    name: str
    status: str  # PROVISIONING | RUNNING | RECONCILING | STOPPING | ERROR | ...
    machine_type: str
    jobset_namespace: str | None  # from the pool's accelops labels; None: not ours
    jobset_name: str | None
    slice_index: int | None
    nodes: int  # Kubernetes Nodes of this pool
    active_pods: int  # pods bound to those nodes, not yet Succeeded/Failed

    @property
    def managed(self) -> bool:
        return self.jobset_name is not None and self.jobset_namespace is not None

    @property
    def jobset_key(self) -> str:
        return f"{self.jobset_namespace}/{self.jobset_name}"


@dataclass(frozen=True, slots=True)
class Observed:
    jobsets: tuple[JobSetView, ...]
    pools: tuple[PoolView, ...]


@dataclass(frozen=True, slots=True)
class CreatePool:
    spec: PoolSpec
    jobset: str
    slice_index: int
    due: float  # when this became needed (epoch seconds); older work goes first
    reason: str
    kind: Literal["create"] = "create"

    @property
    def pool(self) -> str:
        return self.spec.name


@dataclass(frozen=True, slots=True)
class DeletePool:
    pool: str
    jobset: str | None
    due: float
    reason: str
    kind: Literal["delete"] = "delete"


Action = CreatePool | DeletePool


@dataclass(frozen=True, slots=True)
class SliceFailure:
    """A JobSet's streak of failed pool creates, and when it may try again.

    One attempt is every create of the JobSet started before its failure was seen:
    the slices of a multi-slice JobSet are requested together and, in a stockout,
    fail together, which is one attempt, not one per slice.
    """

    attempts: int
    next_attempt: float  # epoch seconds
    reason: str  # GKE's message
    capacity: str  # the capacity of the attempt that failed
    pool: str
    seen: float = 0.0  # when the last failure was seen (epoch seconds); 0: unknown

    def as_dict(self) -> dict[str, object]:
        return {"attempts": self.attempts, "next_attempt": self.next_attempt,
                "reason": self.reason, "capacity": self.capacity, "pool": self.pool,
                "seen": self.seen}

    @classmethod
    def from_dict(cls, raw: dict[str, object]) -> SliceFailure:
        return cls(attempts=int(str(raw.get("attempts", 1))),
                   next_attempt=float(str(raw.get("next_attempt", 0.0))),
                   reason=str(raw.get("reason", "")), capacity=str(raw.get("capacity", "")),
                   pool=str(raw.get("pool", "")), seen=float(str(raw.get("seen", 0.0))))

    def covers(self, started: float) -> bool:
        """Whether a create started at ``started`` belongs to the attempt already counted."""
        return self.seen > 0.0 and started <= self.seen


@dataclass(frozen=True, slots=True)
class Plan:
    """Every action due now, most overdue first, and those to start in this run.

    ``start`` respects the concurrency limit (operations already in flight count),
    holds at most one operation per pool, and puts deletions before creations.
    """

    actions: tuple[Action, ...]
    waiting: tuple[str, ...]  # why something is not acted on yet
    idle_since: dict[str, float] = field(default_factory=dict)  # pool -> first seen idle
    start: tuple[Action, ...] = ()
    failures: dict[str, SliceFailure] = field(default_factory=dict)  # jobset key -> streak


