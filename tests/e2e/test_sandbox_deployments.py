"""Deployments whose pods are real processes, over real sockets.

The sandbox Kubernetes API and the Simulation run in process on a near-frozen
SimClock (tests move simulated time with ``clock.advance``); the official
kubernetes client creates and patches Deployments, Services and HPAs the way
a model deployer does, and plain HTTP clients talk to the Service's host port.
Each pod runs the stdlib echo server (:mod:`sandbox.cluster.echoserver`),
which starts in tens of milliseconds, at pod time scale 0.05 (a readiness
``periodSeconds: 1`` probes every 50 ms, a ``preStop`` sleep of 5 s takes
0.25 s).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import container_v1
from kubernetes import client, config

from sandbox.cluster import Simulation
from sandbox.cluster.echo import ECHO_IMAGE, ECHO_IMAGE_KEY, EchoLauncher
from sandbox.common.clock import SimClock
from sandbox.gke import GkeState, start_gke_api
from sandbox.kubeapi import KubeApiServer, ObjectStore, install_crds, start_kube_api
from tests.e2e.conftest import wait_for
from tests.e2e.kubeapi_auth_fixtures import KUBECTL

pytestmark = pytest.mark.e2e

CLUSTER = "projects/acme/locations/us-central1-a/clusters/serve"
NAMESPACE = "serving"
GPU = "nvidia.com/gpu"
DEADLINE = 120


# ----------------------------------------------------------------------------- builders


def pod_template(version: str, *extra_args: str) -> dict[str, Any]:
    """Shaped like a model server's pod: GPU, named ports, probes, preStop, grace."""
    return {
        "metadata": {"labels": {"app": "toy-lm"}},
        "spec": {
            "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
            "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
            "terminationGracePeriodSeconds": 30,
            "containers": [{
                "name": "server",
                "image": ECHO_IMAGE,
                "args": [f"--version={version}", *extra_args],
                "terminationMessagePolicy": "FallbackToLogsOnError",
                "ports": [{"name": "http", "containerPort": 8000},
                          {"name": "metrics", "containerPort": 8002}],
                "resources": {"limits": {GPU: "1"}},
                "readinessProbe": {"httpGet": {"path": "/v2/health/ready", "port": "http"},
                                   "periodSeconds": 1},
                "livenessProbe": {"httpGet": {"path": "/v2/health/live", "port": "http"},
                                  "initialDelaySeconds": 2, "periodSeconds": 1},
                "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep 5"]}}},
            }],
        },
    }


def deployment(version: str = "v1", replicas: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "toy-lm", "namespace": NAMESPACE},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "toy-lm"}},
            "progressDeadlineSeconds": DEADLINE,
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": pod_template(version),
        },
    }


def service() -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "toy-lm", "namespace": NAMESPACE},
        "spec": {"type": "LoadBalancer", "selector": {"app": "toy-lm"},
                 "ports": [{"name": "http", "port": 8000, "targetPort": "http"},
                           {"name": "metrics", "port": 8002, "targetPort": "metrics"}]},
    }


def gpu_pool(nodes: int) -> dict[str, Any]:
    return {"name": "l4", "nodeCount": nodes, "status": "RUNNING",
            "config": {"machineType": "g2-standard-8", "accelerators": [
                {"acceleratorType": "nvidia-l4", "acceleratorCount": "1"}]}}


# ----------------------------------------------------------------------------- cluster


class ServingCluster:
    """Kubernetes API + Simulation with the echo launcher, and clients for both."""

    def __init__(self, tmp_path: Path, *, max_processes: int = 3) -> None:
        self.clock = SimClock(speed=1e-6, start=datetime(2026, 11, 21, 8, tzinfo=UTC))
        self.store = ObjectStore(clock=self.clock)
        self.kube: KubeApiServer = start_kube_api(clock=self.clock, store=self.store)
        install_crds(self.kube.store)
        self.launcher = EchoLauncher(tmp_path / "containers")
        self.simulation = Simulation(
            self.store, self.clock, cluster=CLUSTER, tick=0.01,
            launchers={ECHO_IMAGE_KEY: self.launcher}, max_processes=max_processes,
            pod_time_scale=0.05).start()
        self.simulation.on_pool_event("POOL_RUNNING", CLUSTER, gpu_pool(nodes=4))
        self.kubeconfig = self.kube.write_kubeconfig(tmp_path / "kubeconfig")
        self.api = config.new_client_from_config(config_file=str(self.kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
            name=NAMESPACE)))

    def close(self) -> None:
        self.simulation.stop()
        self.api.close()
        self.kube.stop()

    def deploy(self, body: dict[str, Any]) -> None:
        self.apps.create_namespaced_deployment(NAMESPACE, body)
        self.core.create_namespaced_service(NAMESPACE, service())

    def deployment(self) -> Any:
        return self.apps.read_namespaced_deployment("toy-lm", NAMESPACE)

    def change_template(self, template: dict[str, Any]) -> None:
        self.apps.patch_namespaced_deployment("toy-lm", NAMESPACE,
                                              {"spec": {"template": template}})

    def pods(self) -> list[Any]:
        return list(self.core.list_namespaced_pod(NAMESPACE, label_selector="app=toy-lm").items)

    def url(self, path: str = "/echo") -> str:
        body = self.core.read_namespaced_service("toy-lm", NAMESPACE)
        ports = json.loads(body.metadata.annotations["sandbox.accelops.dev/host-ports"])
        return f"http://127.0.0.1:{ports['http']}{path}"

    def rolled_out(self, replicas: int = 2, *, timeout: float = 20.0) -> Any:
        """Wait until every replica is updated and available, and only those run."""
        def done() -> Any:
            body = self.deployment()
            status = body.status
            if status is None:  # not yet seen by the controller
                return None
            progressing = condition(body, "Progressing")
            finished = (status.observed_generation == body.metadata.generation
                        and status.replicas == status.updated_replicas == replicas
                        and status.available_replicas == replicas
                        and progressing is not None
                        and progressing.reason == "NewReplicaSetAvailable"
                        and len(self.pods()) == replicas)
            return body if finished else None

        body = wait_for(done, timeout=timeout)
        assert body, f"not rolled out: {self.deployment().status}"
        return body


def condition(body: Any, kind: str) -> Any:
    conditions = body.status.conditions if body.status is not None else None
    return next((c for c in conditions or [] if c.type == kind), None)


def version_of(pod: Any) -> str:
    return next(a.split("=", 1)[1] for a in pod.spec.containers[0].args
                if a.startswith("--version="))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ServingCluster]:
    running = ServingCluster(tmp_path)
    try:
        yield running
    finally:
        running.close()


class RequestLoop:
    """Clients sending requests through the Service until stopped, counting outcomes.

    One client sends quick ``/echo`` requests on a kept-alive connection, one sends
    ``/slow`` requests that are still in flight when their pod starts terminating.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.versions: list[str] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(path,), daemon=True)
                         for path in ("/echo", "/slow?seconds=0.4")]

    def __enter__(self) -> RequestLoop:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def _run(self, path: str) -> None:
        with requests.Session() as session:
            while not self._stop.is_set():
                try:
                    reply = session.get(self.url + path, timeout=5)
                except requests.RequestException as exc:
                    self.failures.append(f"{path}: {exc}")
                    continue
                if reply.status_code == 200:
                    self.versions.append(reply.json()["version"])
                else:
                    self.failures.append(f"{path}: {reply.status_code} {reply.text}")


# ----------------------------------------------------------------------------- tests


def test_a_deployment_becomes_available_and_answers_through_its_service_host_port(cluster):
    cluster.deploy(deployment())
    body = cluster.rolled_out()

    assert condition(body, "Available").reason == "MinimumReplicasAvailable"
    assert body.metadata.annotations["deployment.kubernetes.io/revision"] == "1"
    svc = cluster.core.read_namespaced_service("toy-lm", NAMESPACE)
    host_ports = json.loads(svc.metadata.annotations["sandbox.accelops.dev/host-ports"])
    [ingress] = svc.status.load_balancer.ingress
    assert ingress.ip == "127.0.0.1"
    assert [p.port for p in ingress.ports] == [host_ports["http"], host_ports["metrics"]]
    replies = [requests.get(cluster.url(), timeout=5).json() for _ in range(6)]
    assert {r["version"] for r in replies} == {"v1"}
    assert len({r["pid"] for r in replies}) == 2  # round-robin over both pods
    endpoints = cluster.core.read_namespaced_endpoints("toy-lm", NAMESPACE)
    assert len(endpoints.subsets[0].addresses) == 2

    with requests.get(cluster.url("/stream?events=3&interval=0.3"), stream=True,
                      timeout=5) as stream:
        started = time.monotonic()
        lines = stream.iter_lines()
        first = next(line for line in lines if line)
        first_after = time.monotonic() - started
        rest = [line for line in lines if line]
    assert json.loads(first.removeprefix(b"data: "))["index"] == 0
    assert first_after < 0.3  # the first event arrived before the stream ended
    assert [json.loads(line.removeprefix(b"data: "))["index"] for line in rest] == [1, 2]

    cluster.apps.delete_namespaced_deployment("toy-lm", NAMESPACE)
    assert wait_for(lambda: not cluster.pods() and not cluster.launcher.running(), timeout=60)
    assert requests.get(cluster.url(), timeout=5).status_code == 503


def test_a_template_change_rolls_out_without_a_failed_request_and_ends_on_the_new_version(
        cluster):
    cluster.deploy(deployment("v1"))
    cluster.rolled_out()

    with RequestLoop(cluster.url("")) as loop:
        time.sleep(0.5)
        cluster.change_template(pod_template("v2", "--ready-after=0.5"))  # answers 503 first
        body = cluster.rolled_out()
        if KUBECTL:
            subprocess.run([KUBECTL, "--kubeconfig", str(cluster.kubeconfig), "-n", NAMESPACE,
                            "rollout", "status", "deployment/toy-lm", "--timeout=20s"],
                           check=True, capture_output=True, timeout=30)
        time.sleep(0.5)

    assert loop.failures == []
    assert len(loop.versions) > 20
    assert {"v1", "v2"} <= set(loop.versions)
    assert body.metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    assert {version_of(p) for p in cluster.pods()} == {"v2"}
    replies = [requests.get(cluster.url(), timeout=5).json()["version"] for _ in range(10)]
    assert set(replies) == {"v2"}
    sets = cluster.apps.list_namespaced_replica_set(NAMESPACE).items
    assert sorted(rs.spec.replicas for rs in sets) == [0, 2]


def test_a_version_that_fails_at_start_keeps_the_old_one_serving_until_a_rollback(cluster):
    cluster.deploy(deployment("v1"))
    cluster.rolled_out()

    with RequestLoop(cluster.url("")) as loop:
        cluster.change_template(pod_template("v2", "--fail-at-start"))

        def crash_looping() -> Any:
            for pod in cluster.pods():
                [status] = pod.status.container_statuses or [None]
                if version_of(pod) == "v2" and status is not None and status.restart_count \
                        and status.state.waiting is not None \
                        and status.state.waiting.reason == "CrashLoopBackOff":
                    return status
            return None

        status = wait_for(crash_looping, timeout=60)
        assert status, [p.status.container_statuses for p in cluster.pods()]
        last = status.last_state.terminated
        assert (last.exit_code, last.reason) == (1, "Error")
        assert "loading the model failed" in last.message
        body = cluster.deployment()
        assert condition(body, "Progressing").reason == "ReplicaSetUpdated"
        assert condition(body, "Available").status == "True"
        assert (body.status.updated_replicas, body.status.ready_replicas) == (1, 2)

        cluster.clock.advance(DEADLINE + 1)
        timed_out = wait_for(lambda: condition(cluster.deployment(), "Progressing").reason
                             == "ProgressDeadlineExceeded", timeout=60)
        assert timed_out
        assert condition(cluster.deployment(), "Progressing").status == "False"

        cluster.change_template(pod_template("v1"))
        body = cluster.rolled_out()

    assert loop.failures == []
    assert set(loop.versions) == {"v1"}
    assert body.metadata.annotations["deployment.kubernetes.io/revision"] == "3"
    assert {version_of(p) for p in cluster.pods()} == {"v1"}


def test_pods_added_by_the_autoscaler_run_the_current_template(cluster):
    cluster.deploy(deployment("v1", replicas=1))
    cluster.rolled_out(replicas=1)
    cluster.change_template(pod_template("v2"))
    cluster.rolled_out(replicas=1)

    client.AutoscalingV2Api(cluster.api).create_namespaced_horizontal_pod_autoscaler(
        NAMESPACE, {
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "toy-lm"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": "toy-lm"},
                     "minReplicas": 2, "maxReplicas": 3,
                     "metrics": [{"type": "Pods", "pods": {
                         "metric": {"name": "nv_inference_queue_duration_us"},
                         "target": {"type": "AverageValue", "averageValue": "50000"}}}]}})
    cluster.rolled_out(replicas=2)

    replies = [requests.get(cluster.url(), timeout=5).json() for _ in range(6)]
    assert {r["version"] for r in replies} == {"v2"}
    assert len({r["pid"] for r in replies}) == 2
    hpa = client.AutoscalingV2Api(cluster.api).read_namespaced_horizontal_pod_autoscaler(
        "toy-lm", NAMESPACE)
    assert (hpa.status.current_replicas, hpa.status.desired_replicas) == (2, 2)


def test_a_killed_process_is_restarted_and_serves_again(cluster):
    cluster.deploy(deployment("v1", replicas=1))
    cluster.rolled_out(replicas=1)
    [process] = cluster.launcher.running()
    before = requests.get(cluster.url(), timeout=5).json()["pid"]

    os.kill(process.pid, signal.SIGKILL)

    def restarted() -> Any:
        [pod] = cluster.pods()
        [status] = pod.status.container_statuses
        return status if status.restart_count == 1 and status.ready else None

    status = wait_for(restarted, timeout=60)
    assert status, cluster.pods()[0].status.container_statuses
    assert (status.last_state.terminated.exit_code,
            status.last_state.terminated.reason) == (137, "Error")
    after = requests.get(cluster.url(), timeout=5).json()
    assert after["version"] == "v1"
    assert after["pid"] != before


def test_pods_beyond_the_process_limit_wait_in_container_creating(tmp_path):
    cluster = ServingCluster(tmp_path, max_processes=2)
    most = 0
    sampling = threading.Event()

    def sample() -> None:
        nonlocal most
        while not sampling.is_set():
            most = max(most, len(cluster.launcher.running()))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        cluster.deploy(deployment("v1", replicas=3))

        def one_waiting() -> Any:
            pods = cluster.pods()
            ready = [p for p in pods if p.status.container_statuses
                     and p.status.container_statuses[0].ready]
            waiting = [p for p in pods if p.status.phase == "Pending"
                       and p.status.container_statuses]
            return waiting[0] if len(ready) == 2 and len(waiting) == 1 else None

        pod = wait_for(one_waiting, timeout=60)
        assert pod, [p.status for p in cluster.pods()]
        waiting = pod.status.container_statuses[0].state.waiting
        assert waiting.reason == "ContainerCreating"
        assert "at most 2 sandbox processes" in waiting.message

        cluster.core.delete_namespaced_pod(
            next(p.metadata.name for p in cluster.pods() if p.status.phase == "Running"),
            NAMESPACE)
        assert wait_for(lambda: len(cluster.launcher.launched) == 3
                        and cluster.deployment().status.ready_replicas == 2, timeout=60)
    finally:
        sampling.set()
        sampler.join(timeout=5)
        cluster.close()
    assert most == 2


def test_hpas_and_pod_monitorings_are_served_at_their_api_versions(cluster):
    groups = {g.name: g for g in client.ApisApi(cluster.api).get_api_versions().groups}
    assert groups["autoscaling"].preferred_version.version == "v2"
    assert groups["monitoring.googleapis.com"].preferred_version.version == "v1"

    created = client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
        "monitoring.googleapis.com", "v1", NAMESPACE, "podmonitorings", {
            "apiVersion": "monitoring.googleapis.com/v1", "kind": "PodMonitoring",
            "metadata": {"name": "toy-lm"},
            "spec": {"selector": {"matchLabels": {"app": "toy-lm"}},
                     "endpoints": [{"port": "metrics", "interval": "15s"}]}})

    assert created["kind"] == "PodMonitoring"
    resources = client.CustomObjectsApi(cluster.api).get_api_resources(
        "monitoring.googleapis.com", "v1").resources
    assert {(r.name, r.kind, r.namespaced) for r in resources} >= {
        ("podmonitorings", "PodMonitoring", True)}


def test_a_gpu_node_pool_created_through_the_gke_api_becomes_gpu_nodes(tmp_path):
    clock = SimClock(speed=1e-6, start=datetime(2026, 11, 21, 8, tzinfo=UTC))
    store = ObjectStore(clock=clock)
    kube = start_kube_api(clock=clock, store=store)
    install_crds(kube.store)
    state = GkeState(clock)
    state.add_cluster("acme", "us-central1-a", "serve", kube.url)
    gke_server = start_gke_api(state)
    simulation = Simulation(store, clock, gke_state=state, cluster=CLUSTER, tick=0.01).start()
    try:
        gke = container_v1.ClusterManagerClient(
            transport="rest", credentials=AnonymousCredentials(),
            client_options=ClientOptions(api_endpoint=gke_server.url))
        operation = gke.create_node_pool(parent=CLUSTER, node_pool=container_v1.NodePool(
            name="l4", initial_node_count=2,
            config=container_v1.NodeConfig(
                machine_type="g2-standard-8",
                accelerators=[container_v1.AcceleratorConfig(
                    accelerator_count=1, accelerator_type="nvidia-l4")])))
        clock.advance(300)
        name = f"projects/acme/locations/us-central1-a/operations/{operation.name}"
        assert wait_for(lambda: gke.get_operation(name=name).status
                        == container_v1.Operation.Status.DONE, timeout=60)
        api = config.new_client_from_config(
            config_file=str(kube.write_kubeconfig(tmp_path / "kubeconfig")))
        nodes = wait_for(lambda: client.CoreV1Api(api).list_node().items, timeout=60)
        api.close()
    finally:
        simulation.stop()
        gke_server.stop()
        kube.stop()

    assert len(nodes) == 2
    for node in nodes:
        assert node.metadata.labels["cloud.google.com/gke-accelerator"] == "nvidia-l4"
        assert node.status.allocatable[GPU] == "1"
        assert [(t.key, t.value, t.effect) for t in node.spec.taints] \
            == [(GPU, "present", "NoSchedule")]
