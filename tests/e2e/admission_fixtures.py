"""A sandbox Kubernetes API with Kueue and JobSet installed, in process, for admission tests.

:class:`ControllersCluster` is what ``manifests/controllers`` leaves on a cluster: the
pinned CRDs, the controllers' Deployments, Services and webhook configurations (the
sandbox's own copies, written straight into the store here; one test applies them
with kubectl as the sandbox does), and the controller managers of the cluster
simulation, driven by hand on a simulated clock: :meth:`start_controllers` is the
moment their pods turn ready. Test modules import what they use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client, config

from sandbox.cluster.managers import ControllerManagers
from sandbox.common.clock import SimClock
from sandbox.kubeapi import KubeApiServer, ObjectStore, install_crds, start_kube_api
from sandbox.kubeapi.crdfiles import controller_crd_files, gke_crd_files
from tests.controller_manifests import store_controller_manifests

KUEUE = ("kueue.x-k8s.io", "v1beta1")
JOBSET = ("jobset.x-k8s.io", "v1alpha2")
NAMESPACE = "research"


class ControllersCluster:
    """An API server whose store has the controllers installed; see the module docstring."""

    def __init__(self, directory: Path, *, install: bool = True) -> None:
        self.clock = SimClock(speed=1.0)
        self.store = ObjectStore(clock=self.clock)
        self.server: KubeApiServer = start_kube_api(store=self.store)
        install_crds(self.store, gke_crd_files())
        self.managers = ControllerManagers(self.store, self.clock)
        self.kubeconfig = self.server.write_kubeconfig(directory / "kubeconfig")
        self.api = config.new_client_from_config(config_file=str(self.kubeconfig))
        self.custom = client.CustomObjectsApi(self.api)
        self.core = client.CoreV1Api(self.api)
        if install:
            self.install()

    def install(self) -> None:
        """What ``kubectl apply -k manifests/controllers`` creates."""
        install_crds(self.store, controller_crd_files())
        store_controller_manifests(self.store)
        self.managers.reconcile()

    def start_controllers(self) -> None:
        """The managers' pods start and pass their first readiness probe."""
        self.clock.advance(self.managers.start_seconds)
        self.managers.reconcile()

    def namespace(self, name: str = NAMESPACE) -> str:
        if self.store.try_get("", "namespaces", name) is None:
            self.core.create_namespace({"metadata": {"name": name}})
        return name

    def stop(self) -> None:
        self.api.close()
        self.server.stop()

    # ------------------------------------------------------------------ shorthand

    def create_cluster_object(self, plural: str, body: dict[str, Any], **kwargs: Any) -> Any:
        return self.custom.create_cluster_custom_object(*KUEUE, plural, body, **kwargs)

    def create_jobset(self, body: dict[str, Any], **kwargs: Any) -> Any:
        return self.custom.create_namespaced_custom_object(*JOBSET, self.namespace(),
                                                           "jobsets", body, **kwargs)

    def replace_jobset(self, body: dict[str, Any]) -> Any:
        return self.custom.replace_namespaced_custom_object(
            *JOBSET, self.namespace(), "jobsets", body["metadata"]["name"], body)


def cluster_queue(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": [{
        "coveredResources": ["google.com/tpu"],
        "flavors": [{"name": "tpu-v5-lite-podslice",
                     "resources": [{"name": "google.com/tpu", "nominalQuota": 64}]}]}]}
    body.update(spec)
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
            "metadata": {"name": name}, "spec": body}


def jobset(name: str, *, labels: dict[str, str] | None = None, replicas: int = 2,
           completions: int = 4, **spec: Any) -> dict[str, Any]:
    """A JobSet like accelops renders: one replicated job of ``replicas`` slices."""
    template = {"metadata": {"labels": {"app": name}},
                "spec": {"restartPolicy": "Never", "containers": [
                    {"name": "main", "image": "us-docker.pkg.dev/acme/train:1"}]}}
    body: dict[str, Any] = {"replicatedJobs": [{
        "name": "slice", "replicas": replicas,
        "template": {"spec": {"parallelism": completions, "completions": completions,
                              "backoffLimit": 0, "template": template}}}]}
    body.update(spec)
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "labels": labels or {}}, "spec": body}
