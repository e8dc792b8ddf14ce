"""The records the sandbox GKE control plane keeps: clusters, node pools, operations.

Plain dataclasses with their proto3 JSON rendering (camelCase, enum names, RFC 3339
times), shared by :mod:`sandbox.gke.operations` (who may run what, and when it
ends) and :mod:`sandbox.gke.state` (the state machine that owns them).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sandbox.gke.errors import GRPC_CODES, JsonObject

__all__ = ["API_ROOT", "Cluster", "NodePoolRecord", "OperationRecord", "rfc3339"]

API_ROOT = "https://container.googleapis.com/v1"


def rfc3339(seconds: float) -> str:
    """RFC 3339 UTC with milliseconds and ``Z``, as Google APIs print timestamps."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


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
    """One long-running operation; times are simulated epoch seconds.

    ``pool`` is the target node pool, or ``""`` for a cluster-level operation
    (UPGRADE_MASTER), whose targetLink is then the cluster.
    """

    name: str
    operation_type: str
    project: str
    location: str
    cluster: str  # cluster path
    pool: str  # target node pool name; "" for a cluster-level operation
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
    def running(self) -> bool:
        return self.status in ("PENDING", "RUNNING")

    @property
    def target_link(self) -> str:
        if not self.pool:
            return f"{API_ROOT}/{self.cluster}"
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
