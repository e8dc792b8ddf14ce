"""Kubernetes access: the one module that imports the ``kubernetes`` client.

One :class:`KubeClient` per process (built on first use, reused by warm
invocations) talks to the cluster named by the environment: from ``KUBECONFIG``
when it is set, otherwise from GKE endpoint discovery (the Container API's
``get_cluster`` for endpoint and CA, a Google access token refreshed before it
expires).

Objects are plain dicts addressed by :class:`Resource`, so built-in kinds and
custom resources (JobSets, Kueue objects) go through one generic path built on the
client's own request machinery (auth, TLS, serialisation). Every client error is
translated here into a domain error: 404 → NotFoundError, 409 → ConflictError,
400/422 → PermanentError, 429 → RateLimitedError, 401/403 → PermissionDeniedError
(a deployment error), 5xx and connection failures → UnavailableError, so business
code decides ack or retry without knowing the client. Writes say more: a create's
409 is AlreadyExistsError, and a 404 on a create or apply is MissingTargetError (a
deployment error: the namespace or CRD is missing). So is any 404 whose body is not a
``Status``: kube-apiserver answers a path no resource type serves (a custom resource
whose CRD is not installed) with Go's plain-text ``404 page not found``, while a
missing object gets a ``Status`` with reason ``NotFound`` — a list of JobSets on a
cluster without the JobSet CRD is the cluster's fault, retried, never "no JobSets".
"""

from __future__ import annotations

import builtins
import contextlib
import email.utils
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from shared import gke
from shared.clients import ClientCache
from shared.config import Settings
from shared.errors import (
    AccelopsError,
    AlreadyExistsError,
    ConfigError,
    ConflictError,
    MissingTargetError,
    NotFoundError,
    PermanentError,
    PermissionDeniedError,
    RateLimitedError,
    UnavailableError,
)
from shared.log import get_logger

__all__ = [
    "CONFIG_MAPS",
    "DEPLOYMENTS",
    "EVENTS",
    "GATEWAYS",
    "HEALTH_CHECK_POLICIES",
    "HORIZONTAL_POD_AUTOSCALERS",
    "HTTPROUTES",
    "JOBSETS",
    "LEASES",
    "NAMESPACES",
    "NODES",
    "PODS",
    "POD_MONITORINGS",
    "REPLICA_SETS",
    "SERVICES",
    "SUBJECT_ACCESS_REVIEWS",
    "WORKLOADS",
    "KubeClient",
    "Resource",
    "get_client",
    "reset_client",
]

log = get_logger("accelops.kube")

# Fail fast: Pub/Sub redelivers with backoff, so a hung connection only wastes the
# ack deadline. (connect, read) seconds.
REQUEST_TIMEOUT = (3.0, 20.0)


@dataclass(frozen=True, slots=True)
class Resource:
    """A Kubernetes resource type, addressed the way the REST API paths are."""

    group: str
    version: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
        if subresource is not None:
            base += f"/{subresource}"
        return base


JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets")
NAMESPACES = Resource("", "v1", "namespaces", namespaced=False)
PODS = Resource("", "v1", "pods")
NODES = Resource("", "v1", "nodes", namespaced=False)
LEASES = Resource("coordination.k8s.io", "v1", "leases")
CONFIG_MAPS = Resource("", "v1", "configmaps")
EVENTS = Resource("", "v1", "events")
SERVICES = Resource("", "v1", "services")
DEPLOYMENTS = Resource("apps", "v1", "deployments")
REPLICA_SETS = Resource("apps", "v1", "replicasets")
HORIZONTAL_POD_AUTOSCALERS = Resource("autoscaling", "v2", "horizontalpodautoscalers")
# Google Cloud Managed Service for Prometheus scrape configuration.
POD_MONITORINGS = Resource("monitoring.googleapis.com", "v1", "podmonitorings")
WORKLOADS = Resource("kueue.x-k8s.io", "v1beta1", "workloads")
# Gateway API (standard channel, which GKE installs) and GKE's health-check policy for
# the load balancer a Gateway programs.
GATEWAYS = Resource("gateway.networking.k8s.io", "v1", "gateways")
HTTPROUTES = Resource("gateway.networking.k8s.io", "v1", "httproutes")
HEALTH_CHECK_POLICIES = Resource("networking.gke.io", "v1", "healthcheckpolicies")
SUBJECT_ACCESS_REVIEWS = Resource("authorization.k8s.io", "v1", "subjectaccessreviews",
                                  namespaced=False)


class KubeClient:
    """Generic CRUD and server-side apply over one ``kubernetes.client.ApiClient``."""

    def __init__(self, api_client: Any) -> None:
        self._api = api_client
        self._server_time: float | None = None

    def server_time(self) -> float | None:
        """The API server's clock (its Date header) at the last response, if any.

        Decisions that compare "now" with timestamps the cluster wrote (a JobSet's
        finish time, say) use this rather than the local clock.
        """
        return self._server_time

    @property
    def host(self) -> str:
        return str(self._api.configuration.host)

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        """The object; raises NotFoundError when it does not exist."""
        return self._request("GET", resource.path(namespace, name))

    def find(self, resource: Resource, name: str,
             namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        try:
            return self.get(resource, name, namespace)
        except NotFoundError:
            return None

    def list(self, resource: Resource, namespace: str | None = None, *,
             label_selector: str | None = None,
             field_selector: str | None = None) -> builtins.list[dict[str, Any]]:
        query = [("labelSelector", label_selector)] if label_selector else []
        if field_selector:
            query.append(("fieldSelector", field_selector))
        body = self._request("GET", resource.path(namespace), query=query)
        items: builtins.list[dict[str, Any]] = body.get("items") or []
        return items

    def create(self, resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        """Create the object: AlreadyExistsError when its name is taken,
        MissingTargetError when its namespace or resource type does not exist."""
        namespace = obj.get("metadata", {}).get("namespace")
        with _writing():
            return self._request("POST", resource.path(namespace), body=obj)

    def replace(self, resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT the object; ConflictError when its resourceVersion is stale."""
        meta = obj["metadata"]
        return self._request("PUT", resource.path(meta.get("namespace"), meta["name"]),
                             body=obj)

    def apply(self, resource: Resource, obj: dict[str, Any], *, field_manager: str,
              force: bool = False) -> dict[str, Any]:
        """Server-side apply: create the object when absent, merge our fields when present.

        MissingTargetError when its namespace or resource type does not exist.
        """
        meta = obj["metadata"]
        query: builtins.list[tuple[str, Any]] = [("fieldManager", field_manager)]
        if force:
            query.append(("force", "true"))
        with _writing(conflict=False):
            return self._request(
                "PATCH", resource.path(meta.get("namespace"), meta["name"]), query=query,
                body=obj, content_type="application/apply-patch+yaml",
            )

    def merge_patch(self, resource: Resource, name: str, namespace: str | None,
                    patch: dict[str, Any]) -> dict[str, Any]:
        """JSON merge patch (RFC 7386: ``None`` removes a key); NotFoundError when the
        object is gone."""
        return self._request("PATCH", resource.path(namespace, name), body=patch,
                             content_type="application/merge-patch+json")

    def scale(self, resource: Resource, name: str, namespace: str,
              replicas: int | None = None) -> dict[str, Any]:
        """The object's ``scale`` subresource (an ``autoscaling/v1`` Scale); with
        ``replicas``, merge-patched to that count first. Only the subresource: RBAC can
        grant ``deployments/scale`` without the Deployment itself. NotFoundError when
        the object is missing."""
        path = resource.path(namespace, name, "scale")
        if replicas is None:
            return self._request("GET", path)
        return self._request("PATCH", path, body={"spec": {"replicas": replicas}},
                             content_type="application/merge-patch+json")

    def service_proxy(self, method: str, namespace: str, service: str, path: str, *,
                      form: builtins.list[tuple[str, str]] | None = None) -> Any:
        """An HTTP request to a Service through the API server's proxy
        (``services/<service>/proxy/<path>``: ``service`` is ``name:port``); the JSON it
        answers. ``form`` goes as ``application/x-www-form-urlencoded``. The API server
        authorizes it as ``services/proxy`` (GET ``get``, POST ``create``) on
        ``name:port``. 503 (no ready endpoint, no such port, the endpoint unreachable)
        is UnavailableError, a missing Service or Endpoints NotFoundError."""
        full = f"{SERVICES.path(namespace)}/{quote(service, safe=':')}/proxy/{path.lstrip('/')}"
        headers = {"Accept": "application/json"}
        if form is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        with _translated(f"{method} {full}"):
            serialized = self._api.param_serialize(
                method=method, resource_path=full, header_params=headers,
                post_params=form, auth_settings=["BearerToken"])
            response = self._api.call_api(*serialized, _request_timeout=REQUEST_TIMEOUT)
            self._note_date(response.headers.get("Date"))
            response.read()
            raw = self._api.response_deserialize(response, {"2XX": "bytearray"}).data
        try:
            return json.loads(bytes(raw or b"") or b"null")
        except ValueError as exc:
            raise UnavailableError(f"{method} {full}: the answer is not JSON: "
                                   f"{bytes(raw or b'')[:200]!r}") from exc

    def delete(self, resource: Resource, name: str, namespace: str | None = None, *,
               resource_version: str | None = None) -> None:
        """Delete the object; an object already gone counts as deleted. With
        ``resource_version``, only that version: ConflictError when it has changed."""
        body: dict[str, Any] = {"propagationPolicy": "Background"}
        if resource_version is not None:
            body["preconditions"] = {"resourceVersion": resource_version}
        with contextlib.suppress(NotFoundError):
            self._request("DELETE", resource.path(namespace, name), body=body)

    def read_log(self, name: str, namespace: str, *, container: str | None = None,
                 tail_lines: int | None = None) -> str:
        """A pod's log (the ``log`` subresource, plain text); NotFoundError when the pod
        is gone, PermanentError (400) when its container has not started."""
        query: builtins.list[tuple[str, Any]] = []
        if container:
            query.append(("container", container))
        if tail_lines is not None:
            query.append(("tailLines", str(tail_lines)))
        path = PODS.path(namespace, name, "log")
        with _translated(f"GET {path}"):
            serialized = self._api.param_serialize(
                method="GET", resource_path=path, query_params=query,
                header_params={"Accept": "text/plain, */*"}, auth_settings=["BearerToken"])
            response = self._api.call_api(*serialized, _request_timeout=REQUEST_TIMEOUT)
            self._note_date(response.headers.get("Date"))
            response.read()
            raw = self._api.response_deserialize(response, {"2XX": "bytearray"}).data
        return bytes(raw or b"").decode("utf-8", errors="replace")

    def _request(self, method: str, path: str, *,
                 query: builtins.list[tuple[str, Any]] | None = None, body: Any = None,
                 content_type: str | None = None) -> dict[str, Any]:
        headers = {"Accept": "application/json",
                   "Content-Type": content_type or "application/json"}
        with _translated(f"{method} {path}"):
            serialized = self._api.param_serialize(
                method=method, resource_path=path, query_params=query or [],
                header_params=headers, body=body, auth_settings=["BearerToken"],
            )
            response = self._api.call_api(*serialized, _request_timeout=REQUEST_TIMEOUT)
            self._note_date(response.headers.get("Date"))
            response.read()
            result = self._api.response_deserialize(response, {"2XX": "object"}).data
        if isinstance(result, (bytes, str)):
            result = json.loads(result or "{}")
        return result if isinstance(result, dict) else {}


    def _note_date(self, header: str | None) -> None:
        if not header:
            return
        with contextlib.suppress(TypeError, ValueError):
            self._server_time = email.utils.parsedate_to_datetime(header).timestamp()


def _status(body: Any) -> dict[str, Any] | None:
    """The ``Status`` object an API error carries, None when the body is not one."""
    try:
        status = json.loads(body) if isinstance(body, (str, bytes)) else None
    except ValueError:
        return None
    return status if isinstance(status, dict) and status.get("kind") == "Status" else None


def _status_message(body: Any) -> str:
    status = _status(body)
    if status is not None and status.get("message"):
        return str(status["message"])
    return str(body or "")[:300]


@contextmanager
def _writing(*, conflict: bool = True) -> Iterator[None]:
    """What a 404 and a 409 mean when writing: the namespace or resource type is missing
    (the cluster's state, so retry), and (for a create) the name is taken."""
    try:
        yield
    except NotFoundError as exc:
        raise MissingTargetError(f"{exc.message} (the namespace or resource type does not "
                                 f"exist)") from exc
    except ConflictError as exc:
        if not conflict:
            raise
        raise AlreadyExistsError(exc.message) from exc


@contextmanager
def _translated(what: str) -> Iterator[None]:
    """Turn the client's exceptions into domain errors, keeping the cause."""
    import urllib3
    from kubernetes.client.exceptions import ApiException

    try:
        yield
    except ApiException as exc:
        code = int(exc.status or 0)
        message = f"{what}: {code} {_status_message(exc.body)}"
        error: AccelopsError
        if code == 404 and _status(exc.body) is None:
            error = MissingTargetError(f"{message} (no such resource type: is its CRD "
                                       "installed? see manifests/controllers)")
        elif code == 404:
            error = NotFoundError(message)
        elif code == 409:
            error = ConflictError(message)
        elif code == 429:
            error = RateLimitedError(message)
        elif code in (400, 422):
            error = PermanentError(message)
        elif code in (401, 403):
            # An RBAC binding or a token an operator must fix: not the event's fault.
            error = PermissionDeniedError(message)
        else:
            error = UnavailableError(message)
        raise error from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise UnavailableError(f"{what}: Kubernetes API unreachable: {exc}") from exc


# --- building the client -------------------------------------------------------------

# One client per cluster a process talks to. pool_schedule reads up to 100 clusters
# (shared.config.offhours.MAX_CLUSTERS) and the home one in every tick, in no fixed
# order: a cache smaller than that evicts clients before their next use, and each
# rebuild costs a get_cluster call, a new connection pool and a CA file.
_clients: ClientCache[KubeClient] = ClientCache(max_entries=128)


def get_client(settings: Settings | None = None) -> KubeClient:
    """The process-wide client for the cluster the settings name (built once)."""
    settings = settings or Settings.from_env()
    key = (settings.kubeconfig, settings.project, settings.location, settings.cluster,
           settings.gke_endpoint)
    return _clients.get(key, lambda: KubeClient(_build_api_client(settings)))


def reset_client() -> None:
    """Forget the cached client (tests that switch clusters)."""
    _clients.reset()


def _build_api_client(settings: Settings) -> Any:
    from kubernetes import client as k8s

    configuration = k8s.Configuration()
    if settings.kubeconfig:
        import yaml
        from kubernetes import config as k8s_config

        try:
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=settings.kubeconfig,
                                        client_configuration=configuration)
        # The loader lets YAML and shape errors escape as they are: any failure to
        # read the file is the same deployment mistake.
        except (k8s_config.ConfigException, OSError, ValueError, TypeError, KeyError,
                AttributeError, yaml.YAMLError) as exc:
            raise ConfigError(f"KUBECONFIG {settings.kubeconfig} is unusable: {exc}",
                              field="KUBECONFIG") from exc
    else:
        if not (settings.location and settings.cluster):
            settings.require("project", "location", "cluster")
        _configure_from_gke(configuration, settings)
    # One quick retry on a dropped connection; anything longer is Pub/Sub's job.
    configuration.retries = 1
    log.debug("kubernetes client ready", host=configuration.host)
    return k8s.ApiClient(configuration)


def _configure_from_gke(configuration: Any, settings: Settings) -> None:
    endpoint = gke.cluster_endpoint(settings)
    configuration.host = endpoint.url
    if endpoint.ca_file:
        configuration.ssl_ca_cert = endpoint.ca_file
    if endpoint.token_source is not None:
        _install_token(configuration, endpoint.token_source)


def _install_token(configuration: Any, token_source: Callable[[], str]) -> None:
    """Authorise requests with a token that is refreshed before each expiry."""

    def refresh(cfg: Any) -> None:
        cfg.api_key["BearerToken"] = token_source()

    configuration.api_key_prefix["BearerToken"] = "Bearer"
    configuration.api_key["BearerToken"] = token_source()
    configuration.refresh_api_key_hook = refresh
