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
=================  ====================  ==========================  =============

Like GKE, a cluster runs one mutating operation at a time: another mutation
meanwhile is refused with FAILED_PRECONDITION ("Cluster is running incompatible
operation ..."), and the cluster reports status RECONCILING.

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
import secrets
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from datetime import UTC, datetime
from typing import Any

from sandbox.clock import SimClock
from sandbox.gke.errors import (
    GRPC_CODES,
    JsonObject,
    already_exists,
    failed_precondition,
    not_found,
)
from sandbox.gke.faults import FaultInjector
from sandbox.gke.validation import (
    is_multi_host,
    validate_autoscaling,
    validate_node_count,
    validate_node_pool,
)

__all__ = [
    "POOL_DELETED",
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
POOL_EVENTS = (POOL_RUNNING, POOL_RESIZED, POOL_DELETED, POOL_ERROR)

Observer = Callable[[str, str, JsonObject], None]

API_ROOT = "https://container.googleapis.com/v1"
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


def rfc3339(seconds: float) -> str:
    """RFC 3339 UTC with milliseconds and ``Z``, as Google APIs print timestamps."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass(frozen=True)
class Delays:
    """Simulated seconds each kind of operation takes."""

    create_multi_host: float = 180.0
    create_single_host: float = 90.0  # single-host TPU and CPU pools
    delete: float = 60.0
    set_size: float = 60.0
    set_autoscaling: float = 30.0


@dataclass
class Cluster:
    """A GKE cluster whose ``endpoint`` is a (sandbox) Kubernetes API URL."""

    project: str
    location: str
    name: str
    endpoint: str
    ca_certificate: str = ""  # base64 PEM, as GKE returns it

    @property
    def path(self) -> str:
        return f"projects/{self.project}/locations/{self.location}/clusters/{self.name}"

    def as_json(self) -> JsonObject:
        """The cluster without its node pools (status RUNNING)."""
        return {
            "name": self.name,
            "location": self.location,
            "zone": self.location,
            "endpoint": self.endpoint,
            "status": "RUNNING",
            "selfLink": f"{API_ROOT}/{self.path}",
            "masterAuth": {"clusterCaCertificate": self.ca_certificate},
        }


@dataclass
class NodePoolRecord:
    """A node pool: the spec as requested (normalised) plus its live state."""

    cluster: str  # cluster path
    spec: JsonObject
    status: str
    node_count: int = 0
    status_message: str = ""
    create_time: float = 0.0

    @property
    def name(self) -> str:
        return str(self.spec["name"])


@dataclass
class OperationRecord:
    """One long-running operation; times are simulated epoch seconds."""

    name: str
    operation_type: str
    project: str
    location: str
    cluster: str  # cluster path
    pool: str  # target node pool name
    status: str
    start_time: float
    due_time: float
    end_time: float | None = None
    error_status: str | None = None
    error_message: str = ""
    # What the operation applies when it finishes.
    node_count: int | None = None
    autoscaling: JsonObject | None = None
    planned_error: tuple[str, str] | None = None  # (status, message) for a failing create

    @property
    def target_link(self) -> str:
        return f"{API_ROOT}/{self.cluster}/nodePools/{self.pool}"

    def as_json(self) -> JsonObject:
        body: JsonObject = {
            "name": self.name,
            "zone": self.location,
            "operationType": self.operation_type,
            "status": self.status,
            "selfLink": f"{API_ROOT}/projects/{self.project}/locations/{self.location}"
                        f"/operations/{self.name}",
            "targetLink": self.target_link,
            "location": self.location,
            "startTime": rfc3339(self.start_time),
        }
        if self.end_time is not None:
            body["endTime"] = rfc3339(self.end_time)
        if self.error_status is not None:
            body["error"] = {"code": GRPC_CODES[self.error_status],
                             "message": self.error_message}
            body["statusMessage"] = self.error_message
        return body


def _spec_from_request(node_pool: Mapping[str, Any]) -> JsonObject:
    spec = copy.deepcopy(dict(node_pool))
    for key in _OUTPUT_ONLY:
        spec.pop(key, None)
    return spec


class GkeState:
    """Thread-safe clusters, node pools and operations on a :class:`SimClock`."""

    def __init__(self, clock: SimClock, *, delays: Delays | Mapping[str, float] | None = None,
                 faults: FaultInjector | None = None, version: str = DEFAULT_VERSION) -> None:
        self.clock = clock
        self.delays = delays if isinstance(delays, Delays) else Delays(**(delays or {}))
        self.faults = faults if faults is not None else FaultInjector(clock)
        self.version = version
        self._lock = threading.RLock()
        self._clusters: dict[str, Cluster] = {}
        self._pools: dict[str, dict[str, NodePoolRecord]] = {}
        self._ops: dict[str, OperationRecord] = {}
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
            self._check_idle(found)
            multi = is_multi_host(spec)
            delay = self.delays.create_multi_host if multi else self.delays.create_single_host
            pool_error = self.faults.take_pool_error()
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
            self._check_idle(found)
            record.status = "STOPPING"
            return self._start(found, "DELETE_NODE_POOL", pool, self.delays.delete).as_json()

    def set_node_pool_size(self, project: str, location: str, cluster: str, pool: str,
                           node_count: int) -> JsonObject:
        with self._ticked():
            found = self._cluster(project, location, cluster)
            record = self._pool(found, pool)
            validate_node_count(record.spec, node_count)
            self._check_idle(found)
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
            self._check_idle(found)
            self._check_running(found, record)
            op = self._start(found, "UPDATE_CLUSTER", pool, self.delays.set_autoscaling)
            op.autoscaling = copy.deepcopy(dict(autoscaling))
            return op.as_json()

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
            return [op.as_json() for op in self._ops.values()
                    if op.project == project and location in ("-", op.location)]

    def operations(self) -> list[OperationRecord]:
        """History of every operation (copies), oldest first, with simulated times."""
        with self._ticked():
            return [replace(op) for op in self._ops.values()]

    def next_due(self) -> float | None:
        """Simulated time the next running operation finishes, or None."""
        with self._lock:
            return min((op.due_time for op in self._ops.values() if op.status == "RUNNING"),
                       default=None)

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
                "operations": [asdict(op) for op in self._ops.values()],
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
                self._ops[op.name] = op

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

    def _running_op(self, cluster: Cluster) -> OperationRecord | None:
        for op in self._ops.values():
            if op.cluster == cluster.path and op.status in ("PENDING", "RUNNING"):
                return op
        return None

    def _check_idle(self, cluster: Cluster) -> None:
        running = self._running_op(cluster)
        if running is not None:
            raise failed_precondition(
                f"Cluster is running incompatible operation {running.name}.")

    def _check_running(self, cluster: Cluster, record: NodePoolRecord) -> None:
        if record.status not in ("RUNNING", "RUNNING_WITH_ERROR"):
            raise failed_precondition(
                f"Node pool {cluster.path}/nodePools/{record.name} is in status "
                f"{record.status}; it must be RUNNING.")

    def _start(self, cluster: Cluster, operation_type: str, pool: str,
               delay: float) -> OperationRecord:
        now = self.clock.time()
        name = f"operation-{int(now * 1000)}-{secrets.token_hex(4)}"
        op = OperationRecord(
            name=name, operation_type=operation_type, project=cluster.project,
            location=cluster.location, cluster=cluster.path, pool=pool, status="RUNNING",
            start_time=now, due_time=now + max(0.0, delay))
        self._ops[name] = op
        return op

    def _complete_due(self) -> int:
        now = self.clock.time()
        due = sorted((op for op in self._ops.values()
                      if op.status == "RUNNING" and op.due_time <= now),
                     key=lambda op: op.due_time)
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
            "status": "RUNNING" if self._running_op(cluster) is None else "RECONCILING",
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

