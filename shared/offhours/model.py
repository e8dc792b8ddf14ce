"""What pool_schedule observes, remembers and decides, as plain data."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import Any, Literal

from shared.jobspec.labels import LABEL_KEEP, LABEL_SCHEDULE
from shared.metrics.pool_action import PoolActionRecord, pool_action_id

__all__ = [
    "Audit",
    "ClusterRef",
    "PoolPlan",
    "PoolView",
    "SavedPool",
    "Step",
    "StepKind",
    "autoscaling_minimum",
]



@dataclass(frozen=True, slots=True)
class ClusterRef:
    project: str
    location: str
    name: str

    @property
    def path(self) -> str:
        return f"projects/{self.project}/locations/{self.location}/clusters/{self.name}"

    @classmethod
    def parse(cls, path: str) -> ClusterRef:
        parts = path.split("/")
        if len(parts) != 6 or parts[0::2] != ["projects", "locations", "clusters"]:
            raise ValueError(f"{path!r}: must be projects/P/locations/L/clusters/C")
        return cls(parts[1], parts[3], parts[5])


def autoscaling_minimum(autoscaling: dict[str, Any] | None) -> int:
    """The nodes an autoscaling keeps at least: per zone and in total, summed (either
    being positive keeps nodes up)."""
    auto = autoscaling or {}
    return int(auto.get("min_node_count", 0) or 0) + int(auto.get("total_min_node_count", 0)
                                                         or 0)


@dataclass(frozen=True, slots=True)
class PoolView:
    """One node pool as the Container API and the cluster's Nodes show it."""

    cluster: str  # cluster path
    name: str
    status: str  # RUNNING, PROVISIONING, RECONCILING, STOPPING, ERROR
    labels: dict[str, str]
    nodes: int  # Nodes of the pool registered in the cluster
    zones: int  # setSize counts nodes per zone
    autoscaling: dict[str, Any] | None  # the pool's autoscaling when enabled
    multi_host: bool  # a multi-host TPU slice: deleted, never resized
    accelerator_type: str | None
    accelerators_per_node: int
    full_size: int  # nodes it was created with (initialNodeCount x zones)
    spec: dict[str, Any]  # the whole NodePool, as the API returned it
    busy: tuple[str, ...] = ()  # why it must not be removed now
    managed: bool = False  # made by reconcile_slices: never touched

    @property
    def schedule(self) -> str | None:
        return self.labels.get(LABEL_SCHEDULE)

    @property
    def keep(self) -> bool:
        return self.labels.get(LABEL_KEEP, "").lower() == "true"

    @property
    def up(self) -> bool:
        """Holding (or about to hold) nodes: anything but scaled to zero."""
        return self.nodes > 0 or autoscaling_minimum(self.autoscaling) > 0

    @property
    def size(self) -> int:
        """Nodes the pool holds. A multi-host slice is all or nothing: its full size,
        whether or not every node has registered yet. Any other pool has the nodes it
        has, not those it was created with: a person or the autoscaler may have
        resized it since (restoring its creation size would undo that, and count
        savings that were never made)."""
        return max(self.nodes, self.full_size) if self.multi_host else self.nodes

    @property
    def accelerator_count(self) -> int:
        return self.size * self.accelerators_per_node


Method = Literal["resize", "delete"]


@dataclass(frozen=True, slots=True)
class SavedPool:
    """What a removed pool was, kept until it is restored (a ConfigMap per pool).

    ``removed_at`` / ``restore_started_at`` are set once the removal or restore has
    started *and* its audit row is stored; until then the plan reports it again.
    """

    cluster: str
    pool: str
    method: Method
    schedule: str | None
    nodes_per_zone: int
    autoscaling: dict[str, Any] | None
    spec: dict[str, Any] | None  # the whole NodePool, for "delete"
    accelerator_type: str | None
    accelerator_count: int
    team: str | None
    period: str  # the off-hours it was removed for
    removed_at: str | None = None
    restore_period: str | None = None
    restore_started_at: str | None = None

    def with_changes(self, **changes: Any) -> SavedPool:
        return replace(self, **changes)


StepKind = Literal["save", "set_autoscaling", "set_size", "delete", "create", "forget"]


@dataclass(frozen=True, slots=True)
class Step:
    """One write: ``save``/``forget`` the saved state, or one GKE operation."""

    kind: StepKind
    cluster: str
    pool: str
    size: int | None = None
    autoscaling: dict[str, Any] | None = None
    spec: dict[str, Any] | None = None
    saved: SavedPool | None = None

    @property
    def operation(self) -> bool:
        return self.kind not in ("save", "forget")

    def describe(self) -> str:
        if self.kind == "set_size":
            return f"resize {self.pool} to {self.size} node(s) per zone"
        if self.kind == "set_autoscaling":
            auto = self.autoscaling or {}
            return (f"set autoscaling of {self.pool} to {auto.get('min_node_count', 0)}.."
                    f"{auto.get('max_node_count', 0)}")
        if self.kind == "create":
            return f"recreate {self.pool} from its saved spec"
        if self.kind == "delete":
            return f"delete {self.pool}"
        if self.kind == "save":
            return f"save the spec and size of {self.pool}"
        return f"forget the saved state of {self.pool}"


Action = Literal["remove", "restore", "skip"]


@dataclass(frozen=True, slots=True)
class Audit:
    """One pool_actions row (shared/metrics/pool_action.py), before it is published."""

    action: Action
    method: Literal["resize", "delete", "recreate"] | None
    cluster: str
    pool: str
    period: str
    reason: str
    accelerator_type: str | None
    accelerator_count: int
    schedule: str | None
    team: str | None
    forced: bool = False

    def record(self, at: dt.datetime) -> PoolActionRecord:
        ref = ClusterRef.parse(self.cluster)
        return PoolActionRecord.model_validate({
            "action_id": pool_action_id(ref.project, ref.location, ref.name, self.pool,
                                        self.action, self.period),
            "at": at, "project": ref.project, "location": ref.location,
            "cluster": ref.name, "pool": self.pool,
            "action": self.action, "method": self.method, "reason": self.reason,
            "accelerator_type": self.accelerator_type,
            "accelerator_count": self.accelerator_count, "schedule": self.schedule,
            "team": self.team, "forced": self.forced,
        })


@dataclass(frozen=True, slots=True)
class PoolPlan:
    """What one tick does to one pool, and why."""

    cluster: str
    pool: str
    note: str  # one line for people: the decision and its reason
    steps: tuple[Step, ...] = ()
    # The audit row to store once the step's operation has started (or, for a
    # removal or restore seen started but not yet audited, at once).
    audit: Audit | None = None
    # The saved state to write after the audit row is stored (marks it audited).
    after_audit: SavedPool | None = None
    skipped: bool = False
