"""Fixtures for driving the sandbox Kubernetes API with the real client.

Kept out of conftest.py (shared by other e2e suites); test modules import
what they use. Every server binds 127.0.0.1 on a free port and is stopped at
teardown; every client comes from the kubeconfig the server writes, the way
code under test builds its client on GKE. ``kube_api`` is a cluster with the pinned
CRDs installed (JobSet, Kueue, PodMonitoring) but no controllers, so no webhooks.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from sandbox.kubeapi import KubeApiServer, install_crds, start_kube_api

FIXED_NOW = datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC)
JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_VERSION = "v1alpha2"
NAMESPACE = "team-a"
JOB_TEMPLATE: dict[str, Any] = {"spec": {"template": {"spec": {
    "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}}}


class FakeClock:
    """A settable clock, standing in for the simulated clock."""

    def __init__(self, now: datetime = FIXED_NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def api_client_for(server: KubeApiServer, directory: Path) -> client.ApiClient:
    """An ApiClient built from a kubeconfig written by ``server``."""
    kubeconfig = server.write_kubeconfig(directory / f"kubeconfig-{server.port}")
    return config.new_client_from_config(config_file=str(kubeconfig))


def jobset(name: str, **extra: Any) -> dict[str, Any]:
    """A minimal JobSet body the JobSet CRD accepts (a replicated job needs a template,
    whose pods need a container)."""
    body: dict[str, Any] = {
        "apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": 1,
                                     "template": JOB_TEMPLATE}]},
    }
    body.update(extra)
    return body


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def kube_api(clock: FakeClock) -> Iterator[KubeApiServer]:
    server = start_kube_api(clock=clock)
    install_crds(server.store)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def kube_client(kube_api: KubeApiServer, tmp_path: Path) -> Iterator[client.ApiClient]:
    api_client = api_client_for(kube_api, tmp_path)
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture
def core(kube_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(kube_client)


@pytest.fixture
def custom(kube_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(kube_client)


@pytest.fixture
def namespace(core: client.CoreV1Api) -> str:
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE)))
    return NAMESPACE


class JobSets:
    """Shorthand for CustomObjectsApi calls on namespaced JobSets."""

    def __init__(self, api: client.CustomObjectsApi, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.args = (JOBSET_GROUP, JOBSET_VERSION, namespace, "jobsets")

    def create(self, body: dict[str, Any]) -> Any:
        return self.api.create_namespaced_custom_object(*self.args, body)

    def get(self, name: str) -> Any:
        return self.api.get_namespaced_custom_object(*self.args, name)

    def list(self, **kwargs: Any) -> list[str]:
        listed = self.api.list_namespaced_custom_object(*self.args, **kwargs)
        return [item["metadata"]["name"] for item in listed["items"]]

    def replace(self, name: str, body: dict[str, Any]) -> Any:
        return self.api.replace_namespaced_custom_object(*self.args, name, body)

    def patch(self, name: str, body: Any, **kwargs: Any) -> Any:
        return self.api.patch_namespaced_custom_object(*self.args, name, body, **kwargs)

    def replace_status(self, name: str, body: dict[str, Any]) -> Any:
        return self.api.replace_namespaced_custom_object_status(*self.args, name, body)

    def patch_status(self, name: str, body: Any) -> Any:
        return self.api.patch_namespaced_custom_object_status(*self.args, name, body)

    def delete(self, name: str) -> Any:
        return self.api.delete_namespaced_custom_object(*self.args, name)


@pytest.fixture
def jobsets(custom: client.CustomObjectsApi, namespace: str) -> JobSets:
    return JobSets(custom, namespace)
