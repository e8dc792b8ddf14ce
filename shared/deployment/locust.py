"""The load generator on GKE: a Locust master and its workers, as kustomize input.

The Saxml reference design runs Locust on GKE this way: one master Deployment with a
Service for the workers' connections (5557) and the web UI (8089), and a worker
Deployment whose replicas are the workers. They run in the serving namespace, where
the model servers' Services are, and use the load generator's image
(``services/loadgen/Dockerfile``, built as the ``loadgen`` service's image). Every
worker publishes its records as the ``locust`` workload identity
(``system.WORKLOAD_IDENTITIES``), which may only publish to the metrics topic; the
pods never call the Kubernetes API, so they get no token for it.

A test is started through the master's web API (``POST /swarm`` with the users,
spawn rate, run time, target and test id), after scaling the workers:
``accelops loadtest --cluster`` (``shared.deployment.loadtest``). The Service is
ClusterIP only: the web UI has no authentication of its own, so it is reached
through the Kubernetes API server's service proxy (or ``kubectl port-forward``),
which the API server authorizes. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.config import AccelopsConfig
from shared.deployment.model import WorkloadIdentity
from shared.deployment.system import WORKLOAD_IDENTITIES

__all__ = ["LOCUST_MASTER", "LOCUST_WORKER", "MASTER_PORT", "WEB_PORT", "LocustSite",
           "locust_identity", "locust_objects"]

LOCUST_MASTER = "locust-master"
LOCUST_WORKER = "locust-worker"
MASTER_PORT = 5557  # Locust's default --master-bind-port
WEB_PORT = 8089  # Locust's default --web-port

_PART_OF = {"app.kubernetes.io/part-of": "accelops"}
_COMPONENT = "app.kubernetes.io/component"
# The image's user (services/loadgen/Dockerfile: useradd --uid 10001).
_UID = 10001
_HARDENED = {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": _UID,
             "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}


@dataclass(frozen=True, slots=True)
class LocustSite:
    """The load generator's image (Terraform output ``images.loadgen``) and the
    target a test gets unless it names another in ``POST /swarm``."""

    image: str
    server: str = "triton"
    model: str | None = None


def locust_identity() -> WorkloadIdentity:
    return next(spec for spec in WORKLOAD_IDENTITIES if spec.name == "locust")


def _meta(name: str, namespace: str, component: str) -> dict[str, Any]:
    return {"name": name, "namespace": namespace,
            "labels": {**_PART_OF, "app.kubernetes.io/name": "locust", _COMPONENT: component}}


def _selector(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "locust", _COMPONENT: component}


def _env(site: LocustSite, project: str) -> list[dict[str, str]]:
    env = {"GOOGLE_CLOUD_PROJECT": project, "LOADGEN_SERVER": site.server}
    if site.model is not None:
        env["LOADGEN_MODEL"] = site.model
    return [{"name": k, "value": v} for k, v in env.items()]


def _deployment(name: str, namespace: str, component: str, replicas: int, account: str,
                container: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": _meta(name, namespace, component),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": _selector(component)},
            "template": {
                "metadata": {"labels": {**_PART_OF, **_selector(component)}},
                "spec": {
                    "serviceAccountName": account,
                    # Nothing here calls the Kubernetes API; Workload Identity tokens
                    # come from the GKE metadata server, not from this token.
                    "automountServiceAccountToken": False,
                    "nodeSelector": {"iam.gke.io/gke-metadata-server-enabled": "true"},
                    "containers": [container],
                },
            },
        },
    }


def _container(site: LocustSite, project: str, args: list[str], cpu: str, memory: str,
               **extra: Any) -> dict[str, Any]:
    return {"name": "locust", "image": site.image, "args": args, "env": _env(site, project),
            "resources": {"requests": {"cpu": cpu, "memory": memory},
                          "limits": {"cpu": cpu, "memory": memory}},
            "securityContext": dict(_HARDENED), **extra}


def locust_objects(config: AccelopsConfig, project: str,
                   site: LocustSite) -> list[dict[str, Any]]:
    """The master Deployment and its Service, and the worker Deployment
    (``serving.locust_workers`` replicas). The service account is rendered with the
    other workload identities' (``serving.serving_objects``)."""
    namespace = config.serving.namespace
    account = config.serving.locust_service_account
    # Not headless: the master waits for tests started through its web API, and the
    # workers it has when one starts share its users.
    master = _container(
        site, project, ["--master", "--master-bind-port", str(MASTER_PORT),
                        "--web-port", str(WEB_PORT)], "1", "1Gi",
        ports=[{"name": "master", "containerPort": MASTER_PORT},
               {"name": "web", "containerPort": WEB_PORT}],
        readinessProbe={"httpGet": {"path": "/", "port": WEB_PORT}, "periodSeconds": 10})
    # One Locust worker uses one core (gevent): more load means more replicas.
    worker = _container(
        site, project, ["--worker", "--master-host", LOCUST_MASTER,
                        "--master-port", str(MASTER_PORT)], "1", "1Gi")
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": _meta(LOCUST_MASTER, namespace, "master"),
        "spec": {"type": "ClusterIP", "selector": _selector("master"),
                 "ports": [{"name": "master", "port": MASTER_PORT, "targetPort": MASTER_PORT,
                            "protocol": "TCP"},
                           {"name": "web", "port": WEB_PORT, "targetPort": WEB_PORT,
                            "protocol": "TCP"}]},
    }
    master_deployment = _deployment(LOCUST_MASTER, namespace, "master", 1, account, master)
    # Recreate: two masters, even briefly, would split the workers between two tests.
    master_deployment["spec"]["strategy"] = {"type": "Recreate"}
    return [
        master_deployment, service,
        _deployment(LOCUST_WORKER, namespace, "worker", config.serving.locust_workers,
                    account, worker),
    ]
