"""The sandbox's own copies of the CRDs of the pinned controllers, and installing them.

``sandbox/kubeapi/crds/<group>_<plural>.yaml`` are the upstream CRD files, verbatim:
JobSet v0.7.2 and Kueue v0.10.1 (what ``manifests/controllers`` installs),
PodMonitoring (which GKE's managed collection installs in every cluster) and the
Gateway API's standard channel at bundle v1.2.1 (GatewayClass, Gateway, HTTPRoute,
ReferenceGrant: what GKE installs with the Gateway API enabled) with GKE's
HealthCheckPolicy (gke-gateway-api v1.4.0); ``crds/SOURCES.md`` names the tag and
commit of each file. A
cluster gets them the way a real one does: the sandbox applies the controllers'
CRDs with ``kubectl`` together with their Deployments and webhooks
(:mod:`sandbox.supervisor.provision`), while the GKE-provided ones exist from the cluster's
start (:mod:`sandbox.cluster.__main__`). :func:`install_crds` writes them straight
into a store, for tests that start a bare Kubernetes API and need the kinds served.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from pathlib import Path

from sandbox.kubeapi.crd_schema import CRD_DIRECTORY, crd_document
from sandbox.kubeapi.errors import ApiError, JsonObject
from sandbox.kubeapi.registry import CRD_GROUP, CRD_RESOURCE, accepted_status
from sandbox.kubeapi.store import ObjectStore

__all__ = ["CRD_DIRECTORY", "controller_crd_files", "crd_files", "gke_crd_files", "install_crds",
           "load_crd"]

CONTROLLER_GROUPS = ("jobset.x-k8s.io", "kueue.x-k8s.io")
GKE_GROUPS = ("monitoring.googleapis.com", "gateway.networking.k8s.io", "networking.gke.io")


def crd_files(groups: Iterable[str] | None = None) -> list[Path]:
    """The CRD files of ``groups`` (all of them when None), by name."""
    wanted = None if groups is None else tuple(groups)
    return sorted(path for path in CRD_DIRECTORY.glob("*.yaml")
                  if wanted is None or path.name.split("_", 1)[0] in wanted)


def controller_crd_files() -> list[Path]:
    """What ``manifests/controllers`` installs: the JobSet and Kueue CRDs."""
    return crd_files(CONTROLLER_GROUPS)


def gke_crd_files() -> list[Path]:
    """What every GKE cluster has from the start: managed collection's PodMonitoring, and
    the Gateway API's kinds and GKE's HealthCheckPolicy (the cluster enables the Gateway
    API; ``terraform/modules/gke``)."""
    return crd_files(GKE_GROUPS)


def load_crd(path: Path) -> JsonObject:
    """One CRD file as an object of its own (the file is parsed once per process, for
    this and for the schemas of :mod:`sandbox.kubeapi.crd_schema`)."""
    return copy.deepcopy(crd_document(path))


def install_crds(store: ObjectStore, files: Iterable[Path] | None = None) -> list[str]:
    """Store the CRDs of ``files`` (every CRD file when None) as established, like
    ``kubectl apply`` of them followed by the apiextensions controllers; CRDs already
    there are kept. Returns the names installed now."""
    installed: list[str] = []
    for path in crd_files() if files is None else files:
        crd = load_crd(path)
        crd["status"] = accepted_status(crd, store.now())
        try:
            store.create(CRD_GROUP, CRD_RESOURCE, crd)
        except ApiError as exc:
            if exc.code != 409:
                raise
            continue
        installed.append(str(crd["metadata"]["name"]))
    return installed
