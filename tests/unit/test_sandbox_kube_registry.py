"""Which custom types the sandbox Kubernetes API serves: those of the stored CRDs."""

from __future__ import annotations

from sandbox.kubeapi import ObjectStore, install_crds
from sandbox.kubeapi.crdfiles import CRD_DIRECTORY, controller_crd_files, gke_crd_files, load_crd
from sandbox.kubeapi.registry import version_priority


def test_versions_sort_by_kubernetes_priority_ga_then_beta_then_alpha() -> None:
    versions = ["v1alpha1", "v1beta1", "v2", "foo", "v1", "v1beta2", "v2beta1", "v10alpha1"]

    assert sorted(versions, key=version_priority) == [
        "v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v10alpha1", "v1alpha1", "foo"]


def test_a_store_without_crds_serves_no_custom_type() -> None:
    store = ObjectStore()

    assert not store.types.serves("kueue.x-k8s.io", "v1beta1", "clusterqueues")
    assert store.types.serves("apps", "v1", "deployments")


def test_a_stored_crd_gives_its_kind_scope_and_served_versions() -> None:
    store = ObjectStore()
    install_crds(store, [CRD_DIRECTORY / "jobset.x-k8s.io_jobsets.yaml"])

    custom = store.types.custom("jobset.x-k8s.io", "jobsets")

    assert custom is not None
    assert (custom.info.kind, custom.info.namespaced, custom.versions) == (
        "JobSet", True, ("v1alpha2",))
    assert custom.status_versions == {"v1alpha2"}
    assert store.kind_of("jobset.x-k8s.io", "jobsets") == "JobSet"
    assert not store.types.serves("jobset.x-k8s.io", "v1", "jobsets")


def test_a_deleted_crd_stops_its_kind_from_being_served() -> None:
    store = ObjectStore()
    install_crds(store, [CRD_DIRECTORY / "kueue.x-k8s.io_clusterqueues.yaml"])
    served = store.types.serves("kueue.x-k8s.io", "v1beta1", "clusterqueues")

    store.delete("apiextensions.k8s.io", "customresourcedefinitions",
                 "clusterqueues.kueue.x-k8s.io")

    assert served
    assert not store.types.serves("kueue.x-k8s.io", "v1beta1", "clusterqueues")


def test_the_crd_copies_are_what_the_pinned_releases_and_gke_install() -> None:
    names = {load_crd(path)["metadata"]["name"] for path in controller_crd_files()}

    assert names == {"jobsets.jobset.x-k8s.io", "clusterqueues.kueue.x-k8s.io",
                     "localqueues.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io",
                     "workloadpriorityclasses.kueue.x-k8s.io", "workloads.kueue.x-k8s.io"}
    assert [load_crd(p)["metadata"]["name"] for p in gke_crd_files()] == [
        "gatewayclasses.gateway.networking.k8s.io", "gateways.gateway.networking.k8s.io",
        "httproutes.gateway.networking.k8s.io", "referencegrants.gateway.networking.k8s.io",
        "podmonitorings.monitoring.googleapis.com", "healthcheckpolicies.networking.gke.io"]
