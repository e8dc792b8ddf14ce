"""Watching collections of the sandbox Kubernetes API with the official client."""

from __future__ import annotations

import json
import threading
import urllib.request
from typing import Any

import pytest
from kubernetes import client, watch

from sandbox.kubeapi import KubeApiServer
from tests.e2e import kubeapi_fixtures as fx

clock = fx.clock
kube_api = fx.kube_api
kube_client = fx.kube_client
core = fx.core
namespace = fx.namespace

pytestmark = pytest.mark.e2e


def config_map(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}


def test_a_watch_from_a_lists_resource_version_sees_what_changed_after_it(
        core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, config_map("before"))
    listed = core.list_namespaced_config_map(namespace)
    core.create_namespaced_config_map(namespace, config_map("after"))
    core.patch_namespaced_config_map("after", namespace, {"data": {"k": "w"}})
    core.delete_namespaced_config_map("after", namespace)

    events = [(e["type"], e["object"].metadata.name) for e in watch.Watch().stream(
        core.list_namespaced_config_map, namespace,
        resource_version=listed.metadata.resource_version, timeout_seconds=1)]

    assert events == [("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "after")]


def test_a_watch_delivers_a_change_made_while_it_waits(
        core: client.CoreV1Api, namespace: str) -> None:
    listed = core.list_namespaced_config_map(namespace)
    stream = watch.Watch()
    seen: list[tuple[str, str]] = []

    def follow() -> None:
        for event in stream.stream(core.list_namespaced_config_map, namespace,
                                   resource_version=listed.metadata.resource_version,
                                   timeout_seconds=10):
            seen.append((event["type"], event["object"].metadata.name))
            stream.stop()

    follower = threading.Thread(target=follow)
    follower.start()
    core.create_namespaced_config_map(namespace, config_map("late"))
    follower.join(timeout=15)

    assert seen == [("ADDED", "late")]


def test_a_watch_without_a_resource_version_starts_with_the_current_objects(
        core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, config_map("one", tier="a"))
    core.create_namespaced_config_map(namespace, config_map("two", tier="b"))

    events = [(e["type"], e["object"].metadata.name) for e in watch.Watch().stream(
        core.list_namespaced_config_map, namespace, label_selector="tier=b",
        timeout_seconds=1)]

    assert events == [("ADDED", "two")]


def test_a_watch_from_a_resource_version_before_the_servers_history_is_expired(
        kube_api: KubeApiServer, namespace: str) -> None:
    url = f"{kube_api.url}/api/v1/namespaces/{namespace}/configmaps?watch=true&" \
          "resourceVersion=1&timeoutSeconds=1"
    kube_api.store.restore(kube_api.store.snapshot())  # as after a restart: no history
    kube_api.router.watches.close()
    kube_api.router.watches.open()

    with urllib.request.urlopen(url, timeout=5) as response:
        lines = [json.loads(line) for line in response.read().splitlines()]

    assert response.status == 200
    assert [line["type"] for line in lines] == ["ERROR"]
    assert (lines[0]["object"]["code"], lines[0]["object"]["reason"]) == (410, "Expired")
    assert lines[0]["object"]["message"].startswith("too old resource version: 1 (")
