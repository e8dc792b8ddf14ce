"""The pods/log subresource of the sandbox Kubernetes API, read with the real client
(``CoreV1Api.read_namespaced_pod_log``), for logs the simulated pod runtime writes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from sandbox.cluster.runtime import ENV_MESSAGE, PodRuntime
from sandbox.common.clock import SimClock
from sandbox.kubeapi import KubeApiServer, install_crds, start_kube_api
from tests.e2e.kubeapi_fixtures import api_client_for

pytestmark = pytest.mark.e2e

NAMESPACE = "research"
START = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
MESSAGE = "loss diverged at step 812: nan in layer 17"


@pytest.fixture
def sim_clock() -> SimClock:
    return SimClock(speed=1e-6, start=START)


@pytest.fixture
def server(sim_clock: SimClock) -> Iterator[KubeApiServer]:
    api = start_kube_api(clock=sim_clock)
    install_crds(api.store)
    api.store.create("", "namespaces", {"metadata": {"name": NAMESPACE}})
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture
def core(server: KubeApiServer, tmp_path: Path) -> Iterator[client.CoreV1Api]:
    api_client = api_client_for(server, tmp_path)
    try:
        yield client.CoreV1Api(api_client)
    finally:
        api_client.close()


def running_pod(server: KubeApiServer, name: str, *, outcome: str = "fail",
                restart_policy: str = "Never", containers: tuple[str, ...] = ("main",),
                message: str | None = MESSAGE, started: bool = True,
                at: datetime = START) -> dict[str, Any]:
    env = [{"name": "ACCELOPS_SANDBOX_RUN_SECONDS", "value": "60"},
           {"name": "ACCELOPS_SANDBOX_OUTCOME", "value": outcome}]
    if message:
        env.append({"name": ENV_MESSAGE, "value": message})
    stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    state = {"running": {"startedAt": stamp}} if started else {
        "waiting": {"reason": "ContainerCreating"}}
    return dict(server.store.create("", "pods", {
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"restartPolicy": restart_policy, "nodeName": "node-1",
                 "containers": [{"name": c, "image": "us-docker.pkg.dev/acme/train:1",
                                 "env": env} for c in containers]},
        "status": {"phase": "Running" if started else "Pending", "startTime": stamp,
                   "containerStatuses": [{"name": c, "restartCount": 0, "state": state,
                                          "ready": started, "imageID": "",
                                          "image": "us-docker.pkg.dev/acme/train:1"}
                                         for c in containers]},
    }, namespace=NAMESPACE))


def run_for(server: KubeApiServer, sim_clock: SimClock, seconds: float) -> None:
    runtime = PodRuntime(server.store, sim_clock)
    runtime.reconcile()
    sim_clock.advance(seconds)
    runtime.reconcile()


def error_of(call: Any) -> tuple[int, str]:
    with pytest.raises(client.ApiException) as caught:
        call()
    return int(caught.value.status), str(json.loads(caught.value.body)["message"])


def test_a_failed_pods_log_ends_with_its_exit_code_and_message_also_its_termination_message(
    server, core, sim_clock
):
    running_pod(server, "trainer-0")

    run_for(server, sim_clock, 61)

    log = core.read_namespaced_pod_log("trainer-0", NAMESPACE)
    lines = log.splitlines()
    assert lines[0].startswith("sandbox runtime: container main started")
    assert lines[-2:] == ["sandbox runtime: exiting with code 1", MESSAGE]
    terminated = core.read_namespaced_pod("trainer-0", NAMESPACE).status \
        .container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.message) == (1, MESSAGE)


def test_tail_lines_timestamps_and_limit_bytes_cut_the_log_as_kube_apiserver_does(
    server, core, sim_clock
):
    running_pod(server, "trainer-1")
    run_for(server, sim_clock, 61)

    tail = core.read_namespaced_pod_log("trainer-1", NAMESPACE, tail_lines=1)
    stamped = core.read_namespaced_pod_log("trainer-1", NAMESPACE, timestamps=True)
    cut = core.read_namespaced_pod_log("trainer-1", NAMESPACE, limit_bytes=10)
    everything = core.read_namespaced_pod_log("trainer-1", NAMESPACE, container="main")

    assert tail == MESSAGE + "\n"
    assert stamped.splitlines()[0].startswith("2026-11-21T08:00:00Z sandbox runtime:")
    assert cut == everything[:10]


def test_a_restarted_container_has_a_fresh_log_and_its_previous_one_stays_readable(
    server, core, sim_clock
):
    running_pod(server, "server-0", restart_policy="OnFailure")
    run_for(server, sim_clock, 61)
    PodRuntime(server.store, sim_clock).reconcile()  # logs the new instance's start

    current = core.read_namespaced_pod_log("server-0", NAMESPACE)
    previous = core.read_namespaced_pod_log("server-0", NAMESPACE, previous=True)

    assert current.splitlines() == [
        "sandbox runtime: container main started (image us-docker.pkg.dev/acme/train:1), "
        "restart 1"]
    assert previous.splitlines()[-1] == MESSAGE


def test_the_api_refuses_what_kube_apiserver_refuses_with_its_words(server, core, sim_clock):
    running_pod(server, "waiting-0", started=False)
    running_pod(server, "pair-0", containers=("main", "sidecar"))
    running_pod(server, "fresh-0", message=None)
    PodRuntime(server.store, sim_clock).reconcile()

    assert error_of(lambda: core.read_namespaced_pod_log("gone", NAMESPACE)) == (
        404, 'pods "gone" not found')
    assert error_of(lambda: core.read_namespaced_pod_log("waiting-0", NAMESPACE)) == (
        400, 'container "main" in pod "waiting-0" is waiting to start: ContainerCreating')
    assert error_of(lambda: core.read_namespaced_pod_log("pair-0", NAMESPACE)) == (
        400, "a container name must be specified for pod pair-0, choose one of: "
             "[main sidecar]")
    assert error_of(lambda: core.read_namespaced_pod_log(
        "fresh-0", NAMESPACE, container="other")) == (
        400, "container other is not valid for pod fresh-0")
    assert error_of(lambda: core.read_namespaced_pod_log(
        "fresh-0", NAMESPACE, previous=True)) == (
        400, 'previous terminated container "main" in pod "fresh-0" not found')


def test_a_deleted_pods_log_is_forgotten_and_a_new_pod_of_that_name_starts_empty(
    server, core, sim_clock
):
    running_pod(server, "again-0")
    run_for(server, sim_clock, 61)
    server.store.delete("", "pods", "again-0", NAMESPACE)
    PodRuntime(server.store, sim_clock).reconcile()
    running_pod(server, "again-0", message=None, at=sim_clock.now())
    PodRuntime(server.store, sim_clock).reconcile()

    log = core.read_namespaced_pod_log("again-0", NAMESPACE)

    assert log.splitlines() == [
        "sandbox runtime: container main started (image us-docker.pkg.dev/acme/train:1)"]
