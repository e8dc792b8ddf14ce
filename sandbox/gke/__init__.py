"""A local GKE (Container API v1) endpoint over REST: the subset accelops uses.

google-cloud-container's REST transport reaches it through
``ACCELOPS_GKE_ENDPOINT`` (``ClientOptions(api_endpoint=server.url)`` with
anonymous credentials). It serves clusters (get, list; each cluster's
``endpoint`` is the sandbox Kubernetes API's URL), node pools (list, get,
create, delete, setSize, setAutoscaling) validated like GKE validates TPU pools,
and long-running operations that finish after a delay on the sandbox's
simulated clock::

    clock = SimClock(speed=60)
    state = GkeState(clock)
    state.add_cluster("acme", "us-central2-b", "tpu", kube_api.url)
    state.subscribe(lambda event, cluster, pool: ...)   # POOL_RUNNING, ...
    server = start_gke_api(state)
    server.faults.fail_next(2, "RESOURCE_EXHAUSTED", 429)
    server.faults.stockout_for(900)       # creates end in ERROR (GCE_STOCKOUT)
    server.faults.set_latency(0.1)        # every API call waits 0.1 real seconds
    state.upgrade_for(600)                # pool operations: FAILED_PRECONDITION
    state.disrupt("preemption", "spot-pool")   # a Spot VM reclaimed (POOL_DISRUPTED)
    state.disrupt("maintenance", "tpu-slice")  # every host of the slice, for a while
    ...
    server.stop()

Operations on different pools run in parallel; one per pool, none during a
cluster-level operation, at most ``max_concurrent_operations`` (default 5) per
cluster (:mod:`sandbox.gke.operations`). Errors use Google's JSON error shape;
the client maps them by HTTP code (404 → ``NotFound``, 409 → ``Conflict``,
429 → ``TooManyRequests``, and 400 → ``BadRequest`` for both INVALID_ARGUMENT
and FAILED_PRECONDITION).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from sandbox.common.clock import SimClock
from sandbox.gke.errors import GkeError
from sandbox.gke.faults import Fault, FaultInjector, PoolError, Stockout
from sandbox.gke.operations import DEFAULT_MAX_CONCURRENT_OPERATIONS, UPGRADE_MASTER
from sandbox.gke.server import GkeApiServer, RequestLog, RequestRecord
from sandbox.gke.state import (
    DISRUPTION_SECONDS,
    POOL_DELETED,
    POOL_DISRUPTED,
    POOL_ERROR,
    POOL_EVENTS,
    POOL_RESIZED,
    POOL_RUNNING,
    Cluster,
    Delays,
    GkeState,
    NodePoolRecord,
    Observer,
    OperationRecord,
)

__all__ = [
    "DEFAULT_MAX_CONCURRENT_OPERATIONS",
    "DISRUPTION_SECONDS",
    "POOL_DELETED",
    "POOL_DISRUPTED",
    "POOL_ERROR",
    "POOL_EVENTS",
    "POOL_RESIZED",
    "POOL_RUNNING",
    "UPGRADE_MASTER",
    "Cluster",
    "Delays",
    "Fault",
    "FaultInjector",
    "GkeApiServer",
    "GkeError",
    "GkeState",
    "NodePoolRecord",
    "Observer",
    "OperationRecord",
    "PoolError",
    "RequestLog",
    "RequestRecord",
    "Stockout",
    "start_gke_api",
]


def start_gke_api(
    state_or_clusters: GkeState | Iterable[Cluster] = (),
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    state_file: str | os.PathLike[str] | None = None,
    clock: SimClock | None = None,
    delays: Delays | Mapping[str, float] | None = None,
    max_concurrent_operations: int = DEFAULT_MAX_CONCURRENT_OPERATIONS,
) -> GkeApiServer:
    """Serve a :class:`GkeState` (or a new one holding ``clusters``) in background threads.

    Given clusters, the new state runs on ``clock`` (default: a real-time
    :class:`SimClock`) with ``delays`` and ``max_concurrent_operations`` per
    cluster. Port 0 picks a free port.
    """
    if isinstance(state_or_clusters, GkeState):
        state = state_or_clusters
    else:
        state = GkeState(clock or SimClock(), delays=delays,
                         max_concurrent_operations=max_concurrent_operations)
        for cluster in state_or_clusters:
            state.add_cluster(cluster.project, cluster.location, cluster.name,
                              cluster.endpoint, cluster.ca_certificate)
    return GkeApiServer(state, host, port, state_file=state_file).start()
