"""The serving namespace's standing objects, as kustomize input for the overlay.

What ``deploy_model`` and the model servers expect to find before the first upload:
the serving namespace; the Kubernetes service accounts Triton and Saxml run as,
annotated for Workload Identity with the Google service accounts Terraform creates
(``system.WORKLOAD_IDENTITIES``); and one Sax cell — its admin server and the Saxml
HTTP proxy (the ai-on-gke ``saxml-on-gke`` images), with a ConfigMap that says
where the cell keeps its state. Triton Deployments are not here: ``deploy_model``
renders one per model release.

The Sax cell's state lives in a bucket of its own (``gs://<sax bucket>/sax-root``,
``sax-fs-root``), not in the releases bucket: the admin server rewrites and deletes
its state files, which needs object delete — on the releases bucket that would let
Saxml alter immutable releases — and with the Eventarc route every write there
would also wake ``deploy_model``.

The proxy's Service is an internal load balancer: ``reconcile_models`` runs outside
the cluster (Cloud Run) and reaches it through the VPC. Pure.

The serving Gateway (``serving.gateway``, GKE class ``serving.gateway_class``) stands
here too: every Triton model's HTTPRoute attaches to it (shared/serving/gateway.py), so
it exists before the first upload, and the load balancer it programs outlives any
release.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.config import AccelopsConfig
from shared.deployment import system
from shared.deployment.model import WorkloadIdentity
from shared.serving.gateway import render_gateway
from shared.serving.saxml_cell import SAXML_CONFIG_MAP

__all__ = [
    "ADMIN_PORT",
    "DEFAULT_ADMIN_IMAGE",
    "DEFAULT_PROXY_IMAGE",
    "PROXY_PORT",
    "SAXML_ADMIN",
    "SAXML_PROXY",
    "SAX_ROOT_FOLDER",
    "SaxmlSite",
    "identity_namespaces",
    "sax_bucket_name",
    "saxml_team_namespace",
    "serving_objects",
    "workload_identity_email",
]

# Names and ports the code and the docs may rely on (the proxy's in-cluster address
# is http://sax-proxy.<serving namespace>.svc.cluster.local:8888).
SAXML_ADMIN = "sax-admin"
SAXML_PROXY = "sax-proxy"
ADMIN_PORT = 10000  # the admin server's gRPC port (the image's default PORT)
PROXY_PORT = 8888  # the HTTP proxy's port (its image runs uvicorn on 8888)
# Fixed by the admin server image: --sax_root=gs://$GSBUCKET/sax-root.
SAX_ROOT_FOLDER = "sax-root"

# Terraform's modules/buckets names the Sax bucket "<prefix>-sax" with the default
# prefix "<project>-accelops" (a test holds the two together).
SAX_BUCKET_SUFFIX = "-accelops-sax"

DEFAULT_ADMIN_IMAGE = "us-docker.pkg.dev/cloud-tpu-images/inference/sax-admin-server:v1.2.0"
DEFAULT_PROXY_IMAGE = "us-docker.pkg.dev/cloud-tpu-images/inference/sax-http:v1.0.0"

_PART_OF = {"app.kubernetes.io/part-of": "accelops"}
_WORKLOAD_IDENTITY = "iam.gke.io/gcp-service-account"
# Internal passthrough load balancer: an address in the cluster's VPC, not public.
_INTERNAL_LB = {"networking.gke.io/load-balancer-type": "Internal"}
# The servers need no privileges (ai-on-gke's example runs the admin privileged;
# nothing in it needs that).
_HARDENED = {"allowPrivilegeEscalation": False}


def sax_bucket_name(project: str) -> str:
    """The Sax bucket Terraform creates for ``project`` with its default name prefix."""
    return f"{project}{SAX_BUCKET_SUFFIX}"


@dataclass(frozen=True, slots=True)
class SaxmlSite:
    """Where the Sax cell keeps its state, and the images of its admin server and
    HTTP proxy (``accelops manifests render --sax-bucket/--saxml-*-image``)."""

    bucket: str
    admin_image: str = DEFAULT_ADMIN_IMAGE
    proxy_image: str = DEFAULT_PROXY_IMAGE

    @property
    def sax_root(self) -> str:
        return f"gs://{self.bucket}/{SAX_ROOT_FOLDER}"


def workload_identity_email(spec: WorkloadIdentity, project: str) -> str:
    return f"{spec.service_account}@{project}.iam.gserviceaccount.com"


def identity_namespaces(spec: WorkloadIdentity, config: AccelopsConfig) -> list[str]:
    """The namespaces the identity's Kubernetes service account is created in."""
    found = []
    for scope in spec.scopes:
        if scope == "serving_namespace":
            found.append(config.serving.namespace)
        elif (team := saxml_team_namespace(config)) is not None:
            found.append(team)
    return found


def saxml_team_namespace(config: AccelopsConfig) -> str | None:
    """The namespace of serving.saxml_team (None when unset). The team must be one
    the config defines: config validation happens where the config is rendered."""
    team = config.serving.saxml_team
    return None if team is None else config.teams[team].namespace


def _meta(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {**_PART_OF, **labels}
    return meta


def _service_accounts(config: AccelopsConfig, project: str) -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": {**_meta(spec.kubernetes_service_account, namespace),
                          "annotations": {_WORKLOAD_IDENTITY:
                                          workload_identity_email(spec, project)}}}
            for spec in system.WORKLOAD_IDENTITIES
            for namespace in identity_namespaces(spec, config)]


def _server(name: str, namespace: str, image: str, account: str, port: int,
            probe: dict[str, Any], env: dict[str, str], resources: dict[str, str],
            strategy: str) -> dict[str, Any]:
    """A one-replica Deployment of a Sax cell server reading the cell's ConfigMap."""
    labels = {"app.kubernetes.io/name": name}
    container: dict[str, Any] = {
        "name": name, "image": image,
        "ports": [{"name": "serve", "containerPort": port}],
        "envFrom": [{"configMapRef": {"name": SAXML_CONFIG_MAP}}],
        **({"env": [{"name": k, "value": v} for k, v in env.items()]} if env else {}),
        "readinessProbe": {**probe, "periodSeconds": 10},
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "securityContext": {**_HARDENED, "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
    }
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": _meta(name, namespace, **labels),
        "spec": {
            "replicas": 1,
            "strategy": {"type": strategy},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": {**_PART_OF, **labels}},
                "spec": {
                    "serviceAccountName": account,
                    # Only nodes with the GKE metadata server hand out Workload
                    # Identity tokens; elsewhere the servers could not read GCS.
                    "nodeSelector": {"iam.gke.io/gke-metadata-server-enabled": "true"},
                    "containers": [container],
                },
            },
        },
    }


def _service(name: str, namespace: str, port: int, *, internal_lb: bool) -> dict[str, Any]:
    meta = _meta(name, namespace, **{"app.kubernetes.io/name": name})
    spec: dict[str, Any] = {"selector": {"app.kubernetes.io/name": name},
                            "ports": [{"name": "serve", "port": port, "targetPort": port,
                                       "protocol": "TCP"}]}
    if internal_lb:
        meta["annotations"] = dict(_INTERNAL_LB)
        spec["type"] = "LoadBalancer"
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}


def serving_objects(config: AccelopsConfig, project: str, site: SaxmlSite,
                    namespace_labels: dict[str, str]) -> list[dict[str, Any]]:
    """The serving namespace (with ``namespace_labels``), the servers' service
    accounts, the Sax cell (ConfigMap, admin server, HTTP proxy) and the serving
    Gateway."""
    namespace = config.serving.namespace
    account = config.serving.saxml_service_account
    cell = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": _meta(SAXML_CONFIG_MAP, namespace),
            "data": {"GSBUCKET": site.bucket, "SAX_ROOT": site.sax_root,
                     "SAX_CELL": config.serving.saxml_cell}}
    # Recreate: never two admin servers on one sax-root, not even during a rollout.
    admin = _server(SAXML_ADMIN, namespace, site.admin_image, account, ADMIN_PORT,
                    {"tcpSocket": {"port": ADMIN_PORT}}, {"PORT": str(ADMIN_PORT)},
                    {"cpu": "500m", "memory": "1Gi"}, "Recreate")
    proxy = _server(SAXML_PROXY, namespace, site.proxy_image, account, PROXY_PORT,
                    {"httpGet": {"path": "/", "port": PROXY_PORT}}, {},
                    {"cpu": "1", "memory": "2Gi"}, "RollingUpdate")
    return [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": _meta(namespace, **namespace_labels)},
        *_service_accounts(config, project),
        cell, admin, _service(SAXML_ADMIN, namespace, ADMIN_PORT, internal_lb=False),
        proxy, _service(SAXML_PROXY, namespace, PROXY_PORT, internal_lb=True),
        render_gateway(config.serving, _PART_OF),
    ]
