"""Node pools and GKE operations as accelops speaks of them: what the GKE adapter
(``shared.gke``) is asked to create and what it reports back.

Plain data, shared by the adapter and the features that plan pools
(``reconcile_slices``, ``pool_schedule``) so that neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NodePoolInfo", "OperationInfo", "PoolSpec"]


@dataclass(frozen=True, slots=True)
class PoolSpec:
    """A node pool to create, in accelops' own terms (the adapter maps it to GKE's)."""

    name: str
    machine_type: str
    node_count: int
    topology: str | None  # COMPACT placement with this TPU topology; None: single host
    labels: dict[str, str]
    spot: bool = False
    reservation: str | None = None
    service_account: str | None = None
    network_tags: tuple[str, ...] = ()
    zone: str | None = None


@dataclass(frozen=True, slots=True)
class NodePoolInfo:
    name: str
    status: str
    machine_type: str
    labels: dict[str, str]
    node_count: int


@dataclass(frozen=True, slots=True)
class OperationInfo:
    name: str
    status: str  # PENDING | RUNNING | DONE | ABORTING
    error: str | None
    target: str
    # When GKE started and ended it (epoch seconds); None where GKE gave no time.
    start_time: float | None = None
    end_time: float | None = None

    @property
    def done(self) -> bool:
        return self.status in ("DONE", "ABORTING")
