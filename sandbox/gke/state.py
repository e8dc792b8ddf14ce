"""The sandbox GKE control plane: clusters, node pools, long-running operations.

A pure, thread-safe state machine on the simulated clock, with no HTTP in it.
Every mutation returns an Operation (proto3 JSON, camelCase, enum names) that is
RUNNING and finishes ``delay`` simulated seconds later:

=================  ====================  ==========================  =============
call               operationType         pool status while running   after
=================  ====================  ==========================  =============
create             CREATE_NODE_POOL      PROVISIONING                RUNNING/ERROR
delete             DELETE_NODE_POOL      STOPPING                    gone
setSize            SET_NODE_POOL_SIZE    RECONCILING                 RUNNING
setAutoscaling     UPDATE_CLUSTER        RUNNING                     RUNNING
upgrade_for        UPGRADE_MASTER        (cluster-level, no pool)    unchanged
=================  ====================  ==========================  =============

Like GKE, operations on different pools of a cluster run in parallel, each
finishing after its own delay; a second operation on the same pool, any
node-pool operation during a cluster-level one (:meth:`GkeState.upgrade_for`,
UPGRADE_MASTER) and one operation more than ``max_concurrent_operations`` are
refused (:mod:`sandbox.gke.operations` has the rules, codes and sources). While
any operation runs the cluster reports status RECONCILING.

Operations complete when :meth:`GkeState.tick` runs at or after their due time:
the :class:`~sandbox.gke.driver.OperationDriver` thread calls it as the clock
reaches each due time, and every public method calls it first, so whatever is
read at simulated time *t* is the state at *t* (``clock.advance(180)`` followed
by a read sees the operation DONE).

Observers (:meth:`GkeState.subscribe`) are called as ``callback(event,
cluster_path, pool_json)`` outside the state lock, in order, with ``pool_json``
the node pool as the API shows it plus a sandbox-only ``nodeCount`` (the number
of nodes that should exist now; the real NodePool message has no such field).
"""

from __future__ import annotations

import copy
import hashlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from sandbox.common.clock import SimClock
from sandbox.gke.errors import (
    JsonObject,
    already_exists,
    failed_precondition,
    not_found,
)
from sandbox.gke.faults import FaultInjector
from sandbox.gke.operations import (
    DEFAULT_MAX_CONCURRENT_OPERATIONS,
    UPGRADE_MASTER,
    OperationBook,
)
from sandbox.gke.records import API_ROOT, Cluster, NodePoolRecord, OperationRecord, rfc3339
from sandbox.gke.validation import (
    is_multi_host,
    validate_autoscaling,
    validate_node_count,
    validate_node_pool,
)

__all__ = [
    "DISRUPTION_SECONDS",
    "POOL_DELETED",
    "POOL_DISRUPTED",
    "POOL_ERROR",
    "POOL_EVENTS",
    "POOL_RESIZED",
    "POOL_RUNNING",
    "Cluster",
    "Delays",
    "GkeState",
    "NodePoolRecord",
    "Observer",
    "OperationRecord",
    "rfc3339",
]

log = logging.getLogger(__name__)

POOL_RUNNING = "POOL_RUNNING"  # the pool became RUNNING: nodeCount nodes should exist
POOL_RESIZED = "POOL_RESIZED"  # a resize finished: nodeCount nodes should exist
POOL_DELETED = "POOL_DELETED"  # the pool and its nodes are gone
POOL_ERROR = "POOL_ERROR"  # creation failed: status ERROR, no nodes
# Nodes of the pool go down and come back (pool JSON + "disruption": kind, node, seconds)
POOL_DISRUPTED = "POOL_DISRUPTED"
POOL_EVENTS = (POOL_RUNNING, POOL_RESIZED, POOL_DELETED, POOL_ERROR, POOL_DISRUPTED)

#: Simulated seconds a disrupted node stays down unless the fault says otherwise: a
#: preempted Spot VM until its instance group has recreated it, a host maintenance
#: event until the host is back.
DISRUPTION_SECONDS = {"preemption": 180.0, "maintenance": 600.0}

Observer = Callable[[str, str, JsonObject], None]

DEFAULT_VERSION = "1.31.5-gke.1169000"

# Output-only NodePool fields a request may carry but the server decides.
_OUTPUT_ONLY = ("selfLink", "instanceGroupUrls", "status", "statusMessage", "conditions",
                "podIpv4CidrSize", "updateInfo", "etag")
_CONFIG_DEFAULTS: JsonObject = {
    "diskSizeGb": 100,
    "diskType": "pd-balanced",
    "imageType": "COS_CONTAINERD",
    "serviceAccount": "default",
    "oauthScopes": ["https://www.googleapis.com/auth/cloud-platform"],
    "metadata": {"disable-legacy-endpoints": "true"},
}


@dataclass(frozen=True)
class Delays:
    """Simulated seconds each kind of operation takes."""

    create_multi_host: float = 180.0
    create_single_host: float = 90.0  # single-host TPU and CPU pools
    delete: float = 60.0
    set_size: float = 60.0
    set_autoscaling: float = 30.0


def _spec_from_request(node_pool: Mapping[str, Any]) -> JsonObject:
    spec = copy.deepcopy(dict(node_pool))
    for key in _OUTPUT_ONLY:
        spec.pop(key, None)
    return spec


class GkeState:
    """Thread-safe clusters, node pools and operations on a :class:`SimClock`."""

    def __init__(self, clock: SimClock, *, delays: Delays | Mapping[str, float] | None = None,
                 faults: FaultInjector | None = None, version: str = DEFAULT_VERSION,
                 max_concurrent_operations: int = DEFAULT_MAX_CONCURRENT_OPERATIONS) -> None:
        if max_concurrent_operations < 1:
            raise ValueError("max_concurrent_operations must be at least 1")
        self.clock = clock
        #: Operations one cluster may run at once; one more is answered with 429.
        self.max_concurrent_operations = max_concurrent_operations
        self.delays = delays if isinstance(delays, Delays) else Delays(**(delays or {}))
        self.faults = faults if faults is not None else FaultInjector(clock)
        self.version = version
        self._lock = threading.RLock()
        self._clusters: dict[str, Cluster] = {}
        self._pools: dict[str, dict[str, NodePoolRecord]] = {}
        self._ops = OperationBook()
        self._observers: list[Observer] = []
        self._events: deque[tuple[str, str, JsonObject]] = deque()
        self._delivery = threading.RLock()
        #: How long (real seconds) a caller waits for another thread's event delivery.
        self.delivery_timeout = 5.0

    # ------------------------------------------------------------------ clusters

    def add_cluster(self, project: str, location: str, name: str, endpoint: str,
                    ca_certificate: str = "") -> Cluster:
        """Add (or update the endpoint of) a cluster; returns it."""
        cluster = Cluster(project, location, name, endpoint, ca_certificate)
        with self._lock:
            self._clusters[cluster.path] = cluster
            self._pools.setdefault(cluster.path, {})
        return cluster

    def clusters(self) -> list[Cluster]:
        with self._lock:
            return [replace(c) for c in self._clusters.values()]

    def get_cluster(self, project: str, location: str, name: str) -> JsonObject:
        with self._ticked():
            return self._cluster_json(self._cluster(project, location, name))

    def list_clusters(self, project: str, location: str) -> list[JsonObject]:
        """Clusters of the project in ``location`` (``-``: every location)."""
        with self._ticked():
            return [self._cluster_json(c) for c in self._clusters.values()
                    if c.project == project and location in ("-", c.location)]

    # ------------------------------------------------------------------ node pools

    def list_node_pools(self, project: str, location: str, cluster: str) -> list[JsonObject]:
        with self._ticked():
            found = self._cluster(project, location, cluster)
            return [self._pool_json(found, p) for p in self._pools[found.path].values()]

    def get_node_pool(self, project: str, location: str, cluster: str,
                      pool: str) -> JsonObject:
        with self._ticked():
            found = self._cluster(project, location, cluster)
            return self._pool_json(found, self._pool(found, pool))

    def create_node_pool(self, project: str, location: str, cluster: str,
                         node_pool: Mapping[str, Any]) -> JsonObject:
        """Start creating a pool (``node_pool`` in proto3 JSON); returns the Operation."""
        spec = _spec_from_request(node_pool)
        with self._ticked():
            found = self._cluster(project, location, cluster)
            validate_node_pool(spec)
            name = str(spec["name"])
            if name in self._pools[found.path]:
                raise already_exists(f"{found.path}/nodePools/{name}")
            self._admit(found, name)
            multi = is_multi_host(spec)
            delay = self.delays.create_multi_host if multi else self.delays.create_single_host
            machine_type = str((spec.get("config") or {}).get("machineType", "e2-medium"))
            pool_error = self.faults.take_pool_error(found.path, machine_type)
            now = self.clock.time()
            self._pools[found.path][name] = NodePoolRecord(
                found.path, spec, "PROVISIONING", create_time=now)
            op = self._start(found, "CREATE_NODE_POOL", name, delay)
            if pool_error is not None:
                op.planned_error = (pool_error.status, pool_error.message)
            return op.as_json()

    def delete_node_pool(self, project: str, location: str, cluster: str,
                         pool: str) -> JsonObject:
        with self._ticked():
            found = self._cluster(project, location, cluster)
            record = self._pool(found, pool)
            self._admit(found, pool)
            record.status = "STOPPING"
            return self._start(found, "DELETE_NODE_POOL", pool, self.delays.delete).as_json()

    def set_node_pool_size(self, project: str, location: str, cluster: str, pool: str,
                           node_count: int) -> JsonObject:
        with self._ticked():
            found = self._cluster(project, location, cluster)
            record = self._pool(found, pool)
            validate_node_count(record.spec, node_count)
            self._admit(found, pool)
            self._check_running(found, record)
            record.status = "RECONCILING"
            op = self._start(found, "SET_NODE_POOL_SIZE", pool, self.delays.set_size)
            op.node_count = node_count
            return op.as_json()

    def set_node_pool_autoscaling(self, project: str, location: str, cluster: str, pool: str,
                                  autoscaling: Mapping[str, Any]) -> JsonObject:
        with self._ticked():
            found = self._cluster(project, location, cluster)
            record = self._pool(found, pool)
            validate_autoscaling(record.spec, autoscaling)
            self._admit(found, pool)
            self._check_running(found, record)
            op = self._start(found, "UPDATE_CLUSTER", pool, self.delays.set_autoscaling)
            op.autoscaling = copy.deepcopy(dict(autoscaling))
            return op.as_json()

    # ------------------------------------------------------------------ cluster operations

    def upgrade_for(self, sim_seconds: float, cluster: str | None = None) -> list[JsonObject]:
        """Run a control-plane upgrade (UPGRADE_MASTER) for ``sim_seconds`` simulated seconds.

        While it runs every node-pool operation on the cluster is refused with
        FAILED_PRECONDITION, as when GKE upgrades a control plane. ``cluster``: a
        cluster name or path (default: every cluster). Returns the Operations.
        """
        if sim_seconds <= 0:
            raise ValueError("sim_seconds must be positive")
        with self._ticked():
            targets = [c for c in self._clusters.values()
                       if cluster is None or cluster in (c.name, c.path)]
            if not targets:
                raise not_found(f"cluster {cluster}")
            return [self._start(c, UPGRADE_MASTER, "", sim_seconds).as_json()
                    for c in targets]

    def disrupt(self, kind: str, pool: str, *, cluster: str | None = None,
                node: str | None = None, for_seconds: float | None = None) -> JsonObject:
        """Disrupt the nodes of a running pool: ``preemption`` (Compute Engine reclaims
        one Spot VM: ``node``, else the cluster picks) or ``maintenance`` (a host
        maintenance event takes every VM of the pool, e.g. a TPU slice). Observers get
        ``POOL_DISRUPTED``; the nodes are back after ``for_seconds`` simulated seconds.

        ``cluster``: a cluster name or path (default: the one holding ``pool``).
        Raises NOT_FOUND for an unknown pool, FAILED_PRECONDITION for a pool with no
        running nodes or, for a preemption, one not on Spot or preemptible VMs, and
        ValueError for an unknown kind or a non-positive duration.
        """
        if kind not in DISRUPTION_SECONDS:
            raise ValueError(f"unknown disruption {kind!r} (preemption, maintenance)")
        seconds = DISRUPTION_SECONDS[kind] if for_seconds is None else float(for_seconds)
        if seconds <= 0:
            raise ValueError("for_seconds must be positive")
        with self._ticked():
            found = [(c, self._pools[c.path][pool]) for c in self._clusters.values()
                     if (cluster is None or cluster in (c.name, c.path))
                     and pool in self._pools.get(c.path, {})]
            if not found:
                raise not_found(f"node pool {pool}" + (f" of {cluster}" if cluster else ""))
            target, record = found[0]
            if record.status not in ("RUNNING", "RUNNING_WITH_ERROR") or not record.node_count:
                raise failed_precondition(
                    f"Node pool {target.path}/nodePools/{pool} is in status {record.status} "
                    f"with {record.node_count} node(s): nothing runs there to disrupt.")
            config = record.spec.get("config") or {}
            if kind == "preemption" and not (config.get("spot") or config.get("preemptible")):
                raise failed_precondition(
                    f"Node pool {target.path}/nodePools/{pool} does not run on Spot or "
                    f"preemptible VMs: Compute Engine preempts only those.")
            disruption: JsonObject = {"kind": kind, "seconds": seconds}
            if node:
                disruption["node"] = node
            if self._observers:
                body = self._observed(target, record)
                body["disruption"] = disruption
                self._events.append((POOL_DISRUPTED, target.path, body))
            return {"cluster": target.path, "pool": pool, **disruption}

    def pools(self, cluster_path: str | None = None) -> list[tuple[str, JsonObject]]:
        """Every pool as observers see it (with ``nodeCount``): ``(cluster_path, pool)``."""
        with self._ticked():
            return [(path, self._observed(self._clusters[path], record))
                    for path, pools in self._pools.items()
                    if cluster_path in (None, path) and path in self._clusters
                    for record in pools.values()]

    # ------------------------------------------------------------------ operations

    def get_operation(self, project: str, location: str, name: str) -> JsonObject:
        with self._ticked():
            op = self._ops.get(name)
            if op is None or (op.project, op.location) != (project, location):
                raise not_found(f"projects/{project}/locations/{location}/operations/{name}")
            return op.as_json()

    def list_operations(self, project: str, location: str) -> list[JsonObject]:
        with self._ticked():
            return [op.as_json() for op in self._ops.in_location(project, location)]

    def operations(self) -> list[OperationRecord]:
        """History of every operation (copies), oldest first, with simulated times."""
        with self._ticked():
            return [replace(op) for op in self._ops]

    def next_due(self) -> float | None:
        """Simulated time the next running operation finishes, or None."""
        with self._lock:
            return self._ops.next_due()

    def tick(self) -> int:
        """Finish every operation due by now, then deliver events; returns how many."""
        with self._lock:
            finished = self._complete_due()
        self._deliver()
        return finished

    # ------------------------------------------------------------------ observers

    def subscribe(self, callback: Observer) -> Callable[[], None]:
        """Call ``callback(event, cluster_path, pool_json)`` on pool events; returns unsubscribe."""
        with self._lock:
            self._observers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._observers:
                    self._observers.remove(callback)

        return unsubscribe

    # ------------------------------------------------------------------ persistence

    def snapshot(self) -> JsonObject:
        """Clusters, pools and operations as one JSON-able document."""
        with self._lock:
            return {
                "clusters": [asdict(c) for c in self._clusters.values()],
                "pools": [asdict(p) for pools in self._pools.values() for p in pools.values()],
                "operations": [asdict(op) for op in self._ops],
            }

    def restore(self, document: Mapping[str, Any]) -> None:
        """Load a :meth:`snapshot`; clusters already added here keep their endpoint."""
        op_fields = {f.name for f in fields(OperationRecord)}
        with self._lock:
            for raw in document.get("clusters", []):
                cluster = Cluster(**raw)
                self._clusters.setdefault(cluster.path, cluster)
                self._pools.setdefault(cluster.path, {})
            for raw in document.get("pools", []):
                record = NodePoolRecord(**raw)
                self._pools.setdefault(record.cluster, {})[record.name] = record
            for raw in document.get("operations", []):
                values = {k: v for k, v in raw.items() if k in op_fields}
                if values.get("planned_error") is not None:
                    values["planned_error"] = tuple(values["planned_error"])
                op = OperationRecord(**values)
                self._ops.add(op)

    # ------------------------------------------------------------------ internals

    def _ticked(self) -> _Ticked:
        return _Ticked(self)

    def _cluster(self, project: str, location: str, name: str) -> Cluster:
        path = f"projects/{project}/locations/{location}/clusters/{name}"
        cluster = self._clusters.get(path)
        if cluster is None:
            raise not_found(path)
        return cluster

    def _pool(self, cluster: Cluster, name: str) -> NodePoolRecord:
        record = self._pools[cluster.path].get(name)
        if record is None:
            raise not_found(f"{cluster.path}/nodePools/{name}")
        return record

    def _admit(self, cluster: Cluster, pool: str) -> None:
        self._ops.admit(cluster, pool, self.max_concurrent_operations)

    def _check_running(self, cluster: Cluster, record: NodePoolRecord) -> None:
        if record.status not in ("RUNNING", "RUNNING_WITH_ERROR"):
            raise failed_precondition(
                f"Node pool {cluster.path}/nodePools/{record.name} is in status "
                f"{record.status}; it must be RUNNING.")

    def _start(self, cluster: Cluster, operation_type: str, pool: str,
               delay: float) -> OperationRecord:
        return self._ops.start(cluster, operation_type, pool, self.clock.time(), delay)

    def _complete_due(self) -> int:
        due = self._ops.due(self.clock.time())
        for op in due:
            self._finish(op)
        return len(due)

    def _finish(self, op: OperationRecord) -> None:
        op.status, op.end_time = "DONE", op.due_time
        cluster = self._clusters.get(op.cluster)
        record = self._pools.get(op.cluster, {}).get(op.pool)
        if cluster is None or record is None:
            return
        event: str | None = None
        if op.operation_type == "CREATE_NODE_POOL":
            if op.planned_error is not None:
                op.error_status, op.error_message = op.planned_error
                record.status, record.status_message = "ERROR", op.error_message
                record.node_count = 0
                event = POOL_ERROR
            else:
                record.status = "RUNNING"
                record.node_count = int(record.spec.get("initialNodeCount") or 0)
                event = POOL_RUNNING
        elif op.operation_type == "DELETE_NODE_POOL":
            del self._pools[op.cluster][op.pool]
            record.node_count = 0
            event = POOL_DELETED
        elif op.operation_type == "SET_NODE_POOL_SIZE":
            record.status = "RUNNING"
            record.node_count = op.node_count or 0
            event = POOL_RESIZED
        elif op.operation_type == "UPDATE_CLUSTER" and op.autoscaling is not None:
            record.spec["autoscaling"] = copy.deepcopy(op.autoscaling)
        if event is not None and self._observers:
            self._events.append((event, op.cluster, self._observed(cluster, record)))

    def _deliver(self) -> None:
        """Call observers with queued events, in order, outside the state lock.

        Whoever holds the delivery lock drains the queue, so when this returns every
        event queued before the call has been delivered (unless another thread's
        observer blocks longer than ``delivery_timeout``; it then delivers them).
        """
        if not self._events or not self._delivery.acquire(timeout=self.delivery_timeout):
            return
        try:
            while True:
                with self._lock:
                    if not self._events:
                        return
                    event, cluster_path, pool = self._events.popleft()
                    observers = list(self._observers)
                for callback in observers:
                    try:
                        callback(event, cluster_path, copy.deepcopy(pool))
                    except Exception:
                        log.exception("GKE sandbox observer failed on %s %s", event,
                                      cluster_path)
        finally:
            self._delivery.release()

    def _cluster_json(self, cluster: Cluster) -> JsonObject:
        body = cluster.as_json()
        pools = list(self._pools[cluster.path].values())
        body.update({
            "status": "RECONCILING" if self._ops.running(cluster.path) else "RUNNING",
            "locations": [cluster.location],
            "currentMasterVersion": self.version,
            "currentNodeVersion": self.version,
            "currentNodeCount": sum(p.node_count for p in pools),
            "nodePools": [self._pool_json(cluster, p) for p in pools],
        })
        return body

    def _pool_json(self, cluster: Cluster, record: NodePoolRecord) -> JsonObject:
        spec = copy.deepcopy(record.spec)
        name = record.name
        digest = hashlib.sha256(f"{cluster.path}/{name}".encode()).hexdigest()[:8]
        body: JsonObject = {
            "name": name,
            "management": {"autoUpgrade": True, "autoRepair": True},
            "maxPodsConstraint": {"maxPodsPerNode": "110"},
            "upgradeSettings": {"maxSurge": 1, "strategy": "SURGE"},
            "locations": [cluster.location],
            "version": self.version,
            **spec,
            "config": {**copy.deepcopy(_CONFIG_DEFAULTS), **spec.get("config", {})},
            "selfLink": f"{API_ROOT}/{cluster.path}/nodePools/{name}",
            "instanceGroupUrls": [
                f"https://www.googleapis.com/compute/v1/projects/{cluster.project}/zones/"
                f"{cluster.location}/instanceGroupManagers/gke-{cluster.name}-{name}-"
                f"{digest}-grp"],
            "status": record.status,
            "podIpv4CidrSize": 24,
            "etag": digest,
        }
        body["config"].setdefault("machineType", "e2-medium")
        if record.status_message:
            body["statusMessage"] = record.status_message
        return body

    def _observed(self, cluster: Cluster, record: NodePoolRecord) -> JsonObject:
        body = self._pool_json(cluster, record)
        body["nodeCount"] = record.node_count
        return body


class _Ticked:
    """``with state._ticked():`` finish due operations, hold the lock, deliver after."""

    def __init__(self, state: GkeState) -> None:
        self._state = state

    def __enter__(self) -> None:
        self._state._lock.acquire()
        try:
            self._state._complete_due()
        except BaseException:
            self._state._lock.release()
            raise

    def __exit__(self, *exc_info: object) -> None:
        self._state._lock.release()
        self._state._deliver()

