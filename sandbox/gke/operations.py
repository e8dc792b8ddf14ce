"""Operation bookkeeping and GKE's admission rules for concurrent operations.

GKE runs node-pool operations (create, delete, resize, update) on different pools
of one cluster in parallel. It refuses a new operation in three cases, checked in
this order (the order is ours; GKE does not document one):

1. a **cluster-level operation** runs (a control-plane upgrade, UPGRADE_MASTER):
   FAILED_PRECONDITION (HTTP 400) "Cluster is running incompatible operation OP."
   with an ErrorInfo detail of reason ``CLUSTER_ALREADY_HAS_OPERATION``;
2. an operation already runs on the **same node pool**: FAILED_PRECONDITION
   "Operation OP is currently <verb> node pool P in cluster C. Please wait and try
   again once it is done.";
3. the cluster already runs its **concurrent-operation limit**: RESOURCE_EXHAUSTED
   (HTTP 429) 'Too many operations: cluster "C" hits the concurrent operations
   quota 5, please try again later.' :data:`DEFAULT_MAX_CONCURRENT_OPERATIONS` is 5,
   the figure those reports show.

Sources: GKE's "Troubleshoot concurrent operations" page
(cloud.google.com/kubernetes-engine/docs/troubleshooting/concurrent-operations:
"GKE only allows one cluster-level operation or one operation per node pool to run
at the same time"; messages "Cluster is running incompatible operation
OPERATION_NAME" and "Operation OPERATION_NAME is currently ACTIONING cluster
CLUSTER_NAME. Please wait and try again once it is done"); the ErrorInfo reason in
kubernetes-sigs/cluster-api-provider-gcp#1363; FAILED_PRECONDITION ("failedPrecondition",
400) for "Operation ... is currently deleting a node pool for cluster ..." in
hashicorp/terraform-provider-google#10366 and for "... is currently upgrading
cluster ..." in #3650; the Terraform provider retries node-pool operations on
FAILED_PRECONDITION under a per-pool lock (GoogleCloudPlatform/magic-modules#6748);
the 429 text in hashicorp/terraform-provider-google#15205 and #15579
(magic-modules#8828 made it retriable).

Guesses, named: no source shows the same-pool refusal since GKE allowed parallel
pools, so its wording is the documented "Operation ... is currently ACTIONING"
template applied to the pool, and its code is the FAILED_PRECONDITION every
observed "is currently ..." refusal carries (none shows ABORTED). Whether the limit
counts every running operation of the cluster (as here) or node-pool operations
only is not documented.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Iterator

from sandbox.gke.errors import GkeError
from sandbox.gke.records import Cluster, OperationRecord

__all__ = [
    "CLUSTER_OPERATION_TYPES",
    "DEFAULT_MAX_CONCURRENT_OPERATIONS",
    "UPGRADE_MASTER",
    "OperationBook",
]

UPGRADE_MASTER = "UPGRADE_MASTER"
#: Operation types that hold the whole cluster (no node-pool operation may start).
CLUSTER_OPERATION_TYPES = frozenset({UPGRADE_MASTER})
#: Concurrent operations per cluster, as GKE's 429 answers report the quota.
DEFAULT_MAX_CONCURRENT_OPERATIONS = 5

_VERBS = {
    "CREATE_NODE_POOL": "creating",
    "DELETE_NODE_POOL": "deleting",
    "SET_NODE_POOL_SIZE": "resizing",
    "UPDATE_CLUSTER": "updating",
}


def incompatible_operation(running: OperationRecord) -> GkeError:
    """FAILED_PRECONDITION for a node-pool operation refused by a cluster-level one."""
    return GkeError(
        "FAILED_PRECONDITION", f"Cluster is running incompatible operation {running.name}.",
        details=[{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                  "reason": "CLUSTER_ALREADY_HAS_OPERATION",
                  "domain": "container.googleapis.com"}])


def pool_busy(running: OperationRecord, cluster: Cluster) -> GkeError:
    """FAILED_PRECONDITION for a second operation on the same node pool."""
    verb = _VERBS.get(running.operation_type, "operating on")
    return GkeError(
        "FAILED_PRECONDITION",
        f"Operation {running.name} is currently {verb} node pool {running.pool} in "
        f"cluster {cluster.name}. Please wait and try again once it is done.")


def too_many_operations(cluster: Cluster, limit: int) -> GkeError:
    """RESOURCE_EXHAUSTED (429) for one operation more than the cluster's limit."""
    return GkeError(
        "RESOURCE_EXHAUSTED",
        f'Too many operations: cluster "{cluster.name}" hits the concurrent operations '
        f"quota {limit}, please try again later.")


class OperationBook:
    """Every operation by name, oldest first; not thread-safe (the state locks)."""

    def __init__(self) -> None:
        self._ops: dict[str, OperationRecord] = {}

    def __iter__(self) -> Iterator[OperationRecord]:
        return iter(self._ops.values())

    def get(self, name: str) -> OperationRecord | None:
        return self._ops.get(name)

    def add(self, op: OperationRecord) -> None:
        self._ops[op.name] = op

    def start(self, cluster: Cluster, operation_type: str, pool: str, now: float,
              delay: float) -> OperationRecord:
        """Record a RUNNING operation that is due ``delay`` simulated seconds from ``now``."""
        name = f"operation-{int(now * 1000)}-{secrets.token_hex(4)}"
        op = OperationRecord(
            name=name, operation_type=operation_type, project=cluster.project,
            location=cluster.location, cluster=cluster.path, pool=pool, status="RUNNING",
            start_time=now, due_time=now + max(0.0, delay))
        self._ops[name] = op
        return op

    def running(self, cluster_path: str) -> list[OperationRecord]:
        return [op for op in self._ops.values() if op.cluster == cluster_path and op.running]

    def admit(self, cluster: Cluster, pool: str, limit: int) -> None:
        """Raise the GkeError GKE answers if a node-pool operation on ``pool`` may not start."""
        running = self.running(cluster.path)
        for op in running:
            if op.operation_type in CLUSTER_OPERATION_TYPES:
                raise incompatible_operation(op)
        for op in running:
            if op.pool == pool:
                raise pool_busy(op, cluster)
        if len(running) >= limit:
            raise too_many_operations(cluster, limit)

    def next_due(self) -> float | None:
        return min((op.due_time for op in self._ops.values() if op.status == "RUNNING"),
                   default=None)

    def due(self, now: float) -> list[OperationRecord]:
        """Running operations due by ``now``, in the order they finish."""
        return sorted((op for op in self._ops.values()
                       if op.status == "RUNNING" and op.due_time <= now),
                      key=lambda op: op.due_time)

    def in_location(self, project: str, location: str) -> Iterable[OperationRecord]:
        return (op for op in self._ops.values()
                if op.project == project and location in ("-", op.location))
