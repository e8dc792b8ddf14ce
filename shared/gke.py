"""GKE access: the one module that imports google-cloud-container and google-auth.

Used to discover how to reach a cluster's Kubernetes API when no kubeconfig is
given: ``get_cluster`` yields the endpoint and CA certificate, and application
default credentials yield the bearer token. The token source caches the token and
refreshes it five minutes before it expires, so the per-request hook the Kubernetes
client calls costs nothing on the warm path.

``ACCELOPS_GKE_ENDPOINT`` points the Container API client at a local REST endpoint
with anonymous credentials (the sandbox and tests); the endpoint it returns may
then carry an ``http://`` scheme and needs no token.
"""

from __future__ import annotations

import base64
import datetime as dt
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.clients import ClientCache
from shared.config import Settings
from shared.errors import (
    ConfigError,
    ConflictError,
    NotFoundError,
    OperationInProgressError,
    PermanentError,
    PermissionDeniedError,
    RateLimitedError,
    UnavailableError,
)
from shared.nodepools import NodePoolInfo, OperationInfo, PoolSpec

__all__ = [
    "ClusterEndpoint",
    "TokenSource",
    "cluster_endpoint",
    "container_client",
    "create_node_pool",
    "create_node_pool_from_spec",
    "delete_node_pool",
    "get_operation",
    "list_node_pool_specs",
    "list_node_pools",
    "set_node_pool_autoscaling",
    "set_node_pool_size",
    "start_node_pool_create",
    "start_node_pool_delete",
]

API_TIMEOUT = 30.0

_REFRESH_MARGIN = dt.timedelta(minutes=5)
_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


@dataclass(frozen=True, slots=True)
class ClusterEndpoint:
    url: str
    ca_file: str | None
    token_source: Callable[[], str] | None


class TokenSource:
    """A bearer token from Google credentials, refreshed shortly before it expires."""

    def __init__(self, credentials: Any, request_factory: Callable[[], Any],
                 now: Callable[[], dt.datetime] | None = None) -> None:
        self._credentials = credentials
        self._request_factory = request_factory
        self._now = now or (lambda: dt.datetime.now(dt.UTC).replace(tzinfo=None))
        self._lock = threading.Lock()

    def __call__(self) -> str:
        with self._lock:
            creds = self._credentials
            expiry = creds.expiry  # naive UTC, as google-auth keeps it
            if not creds.token or expiry is None or expiry - self._now() < _REFRESH_MARGIN:
                creds.refresh(self._request_factory())
            return str(creds.token)


_containers: ClientCache[Any] = ClientCache()


def container_client(settings: Settings) -> Any:
    """The process-wide ClusterManagerClient (gRPC, or REST for a local endpoint)."""

    def build() -> Any:
        from google.cloud import container_v1

        if settings.gke_endpoint:
            from google.api_core.client_options import ClientOptions
            from google.auth.credentials import AnonymousCredentials

            return container_v1.ClusterManagerClient(
                transport="rest",
                credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
                client_options=ClientOptions(api_endpoint=settings.gke_endpoint),
            )
        return container_v1.ClusterManagerClient()

    return _containers.get(settings.gke_endpoint, build)


def _rpc_status(exc: Exception) -> str:
    """The canonical status (FAILED_PRECONDITION…) of an error, over gRPC or REST.

    Over REST, google-api-core picks the exception class from the HTTP code alone,
    so FAILED_PRECONDITION and INVALID_ARGUMENT both arrive as BadRequest (400);
    the status is in the JSON error body.
    """
    code = getattr(exc, "grpc_status_code", None)
    if code is not None:
        return str(getattr(code, "name", code))
    response = getattr(exc, "response", None)
    try:
        body = response.json() if response is not None else {}
    except (ValueError, AttributeError):
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    return str(error.get("status", "")) if isinstance(error, dict) else ""


def _translate(exc: Exception, what: str) -> Exception:
    """A google-api-core exception as a domain error."""
    from google.api_core import exceptions as gexc

    message = getattr(exc, "message", None) or str(exc)
    status = _rpc_status(exc)
    if isinstance(exc, (gexc.PermissionDenied, gexc.Unauthenticated)):
        return PermissionDeniedError(f"{what}: {message}")
    if isinstance(exc, gexc.NotFound):
        return NotFoundError(f"{what}: {message}")
    # Before Conflict: Aborted subclasses Conflict (both 409), and over REST every 409
    # arrives as Conflict, so only the status tells GKE's ABORTED ("operation in
    # progress", retry) from ALREADY_EXISTS.
    if isinstance(exc, (gexc.FailedPrecondition, gexc.Aborted)) or status in (
            "FAILED_PRECONDITION", "ABORTED"):
        # "Cluster is running incompatible operation ...": another operation holds it.
        return OperationInProgressError(f"{what}: {message}")
    if isinstance(exc, (gexc.AlreadyExists, gexc.Conflict)):
        return ConflictError(f"{what}: {message}")
    if isinstance(exc, (gexc.TooManyRequests, gexc.ResourceExhausted)):
        return RateLimitedError(f"{what}: {message}")
    if isinstance(exc, (gexc.InvalidArgument, gexc.BadRequest)):
        return PermanentError(f"{what}: {message}")
    return UnavailableError(f"{what}: {exc}")


def _call(what: str, fn: Any, **kwargs: Any) -> Any:
    from google.api_core import exceptions as gexc

    try:
        return fn(timeout=API_TIMEOUT, **kwargs)
    except (gexc.GoogleAPICallError, gexc.RetryError, OSError) as exc:
        raise _translate(exc, what) from exc


def _cluster_path(settings: Settings) -> str:
    settings.require("project", "location", "cluster")
    return (f"projects/{settings.project}/locations/{settings.location}"
            f"/clusters/{settings.cluster}")


def _enum_name(value: Any) -> str:
    return str(getattr(value, "name", value))


def list_node_pools(settings: Settings) -> list[NodePoolInfo]:
    """Every node pool of the cluster (one API call)."""
    parent = _cluster_path(settings)
    response = _call(f"list node pools of {parent}",
                     container_client(settings).list_node_pools, parent=parent)
    return [
        NodePoolInfo(name=pool.name, status=_enum_name(pool.status),
                     machine_type=pool.config.machine_type, labels=dict(pool.config.labels),
                     node_count=int(pool.initial_node_count))
        for pool in response.node_pools
    ]


def list_node_pool_specs(settings: Settings) -> list[dict[str, Any]]:
    """Every node pool of the cluster as a whole NodePool (snake_case fields, enum
    names, default values left out): what can be saved and created again."""
    from google.cloud import container_v1

    parent = _cluster_path(settings)
    response = _call(f"list node pools of {parent}",
                     container_client(settings).list_node_pools, parent=parent)
    return [container_v1.NodePool.to_dict(pool, use_integers_for_enums=False,
                                          always_print_fields_with_no_presence=False)
            for pool in response.node_pools]


def create_node_pool_from_spec(settings: Settings, spec: dict[str, Any]) -> str:
    """Start creating a pool from a NodePool as :func:`list_node_pool_specs` gave it
    (without output-only fields); returns the operation name."""
    from google.cloud import container_v1

    parent = _cluster_path(settings)
    operation = _call(f"create node pool {spec.get('name')}",
                      container_client(settings).create_node_pool, parent=parent,
                      node_pool=container_v1.NodePool(spec))
    return str(operation.name)


def set_node_pool_size(settings: Settings, name: str, nodes_per_zone: int) -> str:
    """Start resizing the pool to ``nodes_per_zone`` nodes in each of its zones."""
    path = f"{_cluster_path(settings)}/nodePools/{name}"
    operation = _call(f"resize node pool {name}", container_client(settings).set_node_pool_size,
                      request={"name": path, "node_count": nodes_per_zone})
    return str(operation.name)


def set_node_pool_autoscaling(settings: Settings, name: str,
                              autoscaling: dict[str, Any]) -> str:
    """Start changing the pool's autoscaling (NodePoolAutoscaling fields, snake_case)."""
    path = f"{_cluster_path(settings)}/nodePools/{name}"
    operation = _call(f"set autoscaling of node pool {name}",
                      container_client(settings).set_node_pool_autoscaling,
                      request={"name": path, "autoscaling": autoscaling})
    return str(operation.name)


def create_node_pool(settings: Settings, spec: PoolSpec) -> str:
    """Start creating the pool; returns the operation name without waiting for it.

    Raises OperationInProgressError when GKE is busy with another operation,
    RateLimitedError on quota, ConflictError when the pool exists, PermanentError
    when GKE refuses the shape.
    """
    return start_node_pool_create(settings, spec).name


def start_node_pool_create(settings: Settings, spec: PoolSpec) -> OperationInfo:
    """:func:`create_node_pool`, returning the operation as GKE answered (its start time)."""
    from google.cloud import container_v1

    config: dict[str, Any] = {"machine_type": spec.machine_type, "labels": spec.labels,
                              "resource_labels": {k.replace(".", "_").replace("/", "_"): v
                                                  for k, v in spec.labels.items()},
                              "spot": spec.spot, "tags": list(spec.network_tags)}
    if spec.service_account:
        config["service_account"] = spec.service_account
    if spec.reservation:
        config["reservation_affinity"] = {
            "consume_reservation_type": container_v1.ReservationAffinity.Type.SPECIFIC_RESERVATION,
            "key": "compute.googleapis.com/reservation-name",
            "values": [spec.reservation],
        }
    pool: dict[str, Any] = {
        "name": spec.name,
        "initial_node_count": spec.node_count,
        "config": config,
        # Training slices must not be upgraded under a running job; repair stays on.
        "management": {"auto_upgrade": False, "auto_repair": True},
        "autoscaling": {"enabled": False},
    }
    if spec.topology:
        pool["placement_policy"] = {"type_": container_v1.NodePool.PlacementPolicy.Type.COMPACT,
                                    "tpu_topology": spec.topology}
    if spec.zone:
        pool["locations"] = [spec.zone]
    parent = _cluster_path(settings)
    operation = _call(f"create node pool {spec.name}", container_client(settings).create_node_pool,
                      parent=parent, node_pool=container_v1.NodePool(pool))
    return _operation_info(operation)


def delete_node_pool(settings: Settings, name: str) -> str:
    """Start deleting the pool; returns the operation name without waiting for it."""
    return start_node_pool_delete(settings, name).name


def start_node_pool_delete(settings: Settings, name: str) -> OperationInfo:
    """Start deleting the pool; returns the operation as GKE answered (its start time)."""
    path = f"{_cluster_path(settings)}/nodePools/{name}"
    operation = _call(f"delete node pool {name}", container_client(settings).delete_node_pool,
                      name=path)
    return _operation_info(operation)


def _instant(text: str) -> float | None:
    """An RFC 3339 time as Google APIs print it (``...T10:00:00.123Z``), in epoch seconds."""
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _operation_info(operation: Any) -> OperationInfo:
    error = operation.error.message if operation.error and operation.error.message else None
    return OperationInfo(name=str(operation.name), status=_enum_name(operation.status),
                         error=error or (operation.status_message or None),
                         target=operation.target_link,
                         start_time=_instant(operation.start_time),
                         end_time=_instant(operation.end_time))


def get_operation(settings: Settings, name: str) -> OperationInfo:
    settings.require("project", "location")
    path = name if name.startswith("projects/") else (
        f"projects/{settings.project}/locations/{settings.location}/operations/{name}")
    operation = _call(f"get operation {name}", container_client(settings).get_operation,
                      name=path)
    return _operation_info(operation)


def cluster_endpoint(settings: Settings) -> ClusterEndpoint:
    """How to reach the cluster's Kubernetes API.

    Raises NotFoundError when the cluster does not exist, TransientError when the
    Container API fails or cannot be reached.
    """
    from google.api_core import exceptions as gexc

    name = (f"projects/{settings.project}/locations/{settings.location}"
            f"/clusters/{settings.cluster}")
    try:
        cluster = container_client(settings).get_cluster(name=name, timeout=20.0)
    except (gexc.GoogleAPICallError, gexc.RetryError, OSError) as exc:
        raise _translate(exc, f"get_cluster {name}") from exc
    endpoint = str(cluster.endpoint)
    url = endpoint if "://" in endpoint else f"https://{endpoint}"
    ca_file = None
    ca_data = cluster.master_auth.cluster_ca_certificate if cluster.master_auth else ""
    if ca_data:
        with tempfile.NamedTemporaryFile("wb", prefix="gke-ca-", suffix=".crt",
                                         delete=False) as handle:
            handle.write(base64.b64decode(ca_data))
            ca_file = handle.name
    token_source = None if settings.gke_endpoint else _default_token_source()
    return ClusterEndpoint(url=url, ca_file=ca_file, token_source=token_source)


def _default_token_source() -> TokenSource:
    import google.auth
    import google.auth.exceptions
    import google.auth.transport.requests

    try:
        credentials, _ = google.auth.default(scopes=_SCOPES)
    except google.auth.exceptions.DefaultCredentialsError as exc:
        # The service account is missing or misconfigured: a deployment error (an
        # operator fixes it), retried rather than refusing the message.
        raise ConfigError(f"no Google credentials for the cluster: {exc}") from exc
    return TokenSource(credentials, google.auth.transport.requests.Request)
