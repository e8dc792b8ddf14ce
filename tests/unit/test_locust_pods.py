"""The load generator's containers translated for this machine (sandbox.cluster.locust):
the rendered master and worker arguments, and what the launcher refuses."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.cluster.locust import (
    LOADGEN_IMAGE,
    LOADGEN_IMAGE_KEY,
    locust_arguments,
    master_address,
)
from sandbox.cluster.objects import PODS, SERVICES
from sandbox.kubeapi import ObjectStore
from shared.config import AccelopsConfig
from shared.deployment.locust import LocustSite, locust_objects

OBJECTS = locust_objects(AccelopsConfig(), "acme-ml", LocustSite(LOADGEN_IMAGE))
MASTER, SERVICE, WORKER = OBJECTS


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    return dict(deployment["spec"]["template"]["spec"]["containers"][0])


def no_master(namespace: str, host: str, port: int) -> int:
    raise AssertionError("a master resolves no master")


def test_the_sandbox_image_is_one_the_launcher_runs() -> None:
    assert LOADGEN_IMAGE_KEY in container(MASTER)["image"]


def test_the_master_binds_its_ports_on_loopback_at_their_host_ports() -> None:
    args = locust_arguments(container(MASTER), {5557: 40001, 8089: 40002}, "serving",
                            no_master)

    assert args == ["--master", "--master-bind-port", "40001", "--web-port", "40002",
                    "--master-bind-host", "127.0.0.1", "--web-host", "127.0.0.1"]


def test_a_worker_reaches_the_master_pod_the_service_selects() -> None:
    store = ObjectStore()
    store.create("", "namespaces", {"metadata": {"name": "serving"}})
    store.create(*SERVICES, SERVICE, namespace="serving")
    pod = {"metadata": {"name": "locust-master-abc", "namespace": "serving",
                        "labels": dict(MASTER["spec"]["selector"]["matchLabels"]),
                        "annotations": {"sandbox.accelops.dev/host-ports":
                                        '{"5557": 40001, "8089": 40002}'}},
           "spec": {"containers": [container(MASTER)]}}
    store.create(*PODS, pod, namespace="serving")

    args = locust_arguments(container(WORKER), {}, "serving", master_address(store))

    assert args == ["--worker", "--master-host", "127.0.0.1", "--master-port", "40001"]


def test_a_worker_before_its_master_pod_fails_to_start_and_says_why() -> None:
    store = ObjectStore()
    store.create("", "namespaces", {"metadata": {"name": "serving"}})
    store.create(*SERVICES, SERVICE, namespace="serving")

    with pytest.raises(ValueError, match="selects no master pod with port 5557 yet"):
        locust_arguments(container(WORKER), {}, "serving", master_address(store))


@pytest.mark.parametrize(("change", "message"), [
    ({"command": ["sh", "-c", "true"]}, "a command cannot be run here"),
    ({"args": ["--master", "--web-host", "0.0.0.0"]}, "'--web-host' is not one"),
    ({"args": ["--master", "--worker"]}, "exactly one"),
    ({"args": ["--master", "--web-port", "9000"]}, "9000 is not a containerPort"),
])
def test_what_does_not_fit_this_machine_is_refused(change: dict[str, Any],
                                                   message: str) -> None:
    with pytest.raises(ValueError, match=message):
        locust_arguments({**container(MASTER), **change}, {5557: 1, 8089: 2}, "serving",
                         no_master)
