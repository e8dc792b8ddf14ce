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

from shared.config import Settings
from shared.errors import NotFoundError, PermanentError, RateLimitedError, UnavailableError

__all__ = ["ClusterEndpoint", "TokenSource", "cluster_endpoint", "container_client"]

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


_container: Any = None
_container_key: str | None = None
_lock = threading.Lock()


def container_client(settings: Settings) -> Any:
    """The process-wide ClusterManagerClient (gRPC, or REST for a local endpoint)."""
    global _container, _container_key
    with _lock:
        if _container is None or _container_key != settings.gke_endpoint:
            from google.cloud import container_v1

            if settings.gke_endpoint:
                from google.api_core.client_options import ClientOptions
                from google.auth.credentials import AnonymousCredentials

                _container = container_v1.ClusterManagerClient(
                    transport="rest",
                    credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
                    client_options=ClientOptions(api_endpoint=settings.gke_endpoint),
                )
            else:
                _container = container_v1.ClusterManagerClient()
            _container_key = settings.gke_endpoint
        return _container


def _translate(exc: Exception, what: str) -> Exception:
    from google.api_core import exceptions as gexc

    if isinstance(exc, gexc.NotFound):
        return NotFoundError(f"{what}: {exc.message}")
    if isinstance(exc, (gexc.TooManyRequests, gexc.ResourceExhausted)):
        return RateLimitedError(f"{what}: {exc.message}")
    if isinstance(exc, gexc.InvalidArgument):
        return PermanentError(f"{what}: {exc.message}")
    return UnavailableError(f"{what}: {exc}")


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
        # The service account is missing or misconfigured: an operator fixes that,
        # so retry rather than refuse the message.
        raise UnavailableError(f"no Google credentials for the cluster: {exc}") from exc
    return TokenSource(credentials, google.auth.transport.requests.Request)
