"""The simulated cluster over real sockets: the official kubernetes client for the
Kubernetes API, google-cloud-container (REST) for the GKE API, google-cloud-pubsub
for the FailedScheduling log entries.

The first test runs ``python -m sandbox.cluster`` as its own process at 600x
simulated speed; the others host the servers and the Simulation in-process on a
near-frozen SimClock and move time with ``clock.advance``.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import container_v1
from kubernetes import client, config

from sandbox.cluster import Simulation
from sandbox.common.clock import SimClock
from sandbox.gke import GkeApiServer, GkeState, start_gke_api
from sandbox.kubeapi import KubeApiServer, ObjectStore, install_crds, start_kube_api
from sandbox.pubsub import PubSubServer, start_pubsub
from sandbox.supervisor.provision import install_controllers, wait_for_controllers
from shared.jobspec.tpu import lookup

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
PROJECT, LOCATION, CLUSTER_NAME = "acme", "us-central2-b", "tpu"
CLUSTER = f"projects/{PROJECT}/locations/{LOCATION}/clusters/{CLUSTER_NAME}"
NAMESPACE = "research"
QUEUE = "research-queue"
JOBSET_API = ("jobset.x-k8s.io", "v1alpha2", NAMESPACE, "jobsets")
NodePool = container_v1.NodePool


# ----------------------------------------------------------------------------- builders


def tpu_jobset(name: str, *, slices: int = 2, run_seconds: int = 120) -> dict[str, Any]:
    shape = lookup("v5litepod-16")
    chips = str(shape.chips_per_vm)
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": QUEUE},
                     "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology":
                                     "cloud.google.com/gke-nodepool"}},
        "spec": {
            "suspend": True,
            "failurePolicy": {"maxRestarts": 0},
            "replicatedJobs": [{"name": "slice", "replicas": slices, "template": {"spec": {
                "parallelism": shape.vms, "completions": shape.vms,
                "completionMode": "Indexed", "backoffLimit": 0,
                "template": {"spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": shape.node_selector(),
                    "containers": [{
                        "name": "main", "image": "us-docker.pkg.dev/acme/train:1",
                        "env": [{"name": "ACCELOPS_SANDBOX_RUN_SECONDS",
                                 "value": str(run_seconds)}],
                        "resources": {"requests": {"google.com/tpu": chips},
                                      "limits": {"google.com/tpu": chips}},
                    }],
                }},
            }}}],
        },
    }


def tpu_pool(name: str) -> NodePool:
    return NodePool(
        name=name, initial_node_count=4,
        config=container_v1.NodeConfig(machine_type="ct5lp-hightpu-4t",
                                        labels={"accelops.dev/slice": name}),
        placement_policy=NodePool.PlacementPolicy(
            type_=NodePool.PlacementPolicy.Type.COMPACT, tpu_topology="4x4"))


def install_controllers_with_kubectl(kubeconfig: Path, directory: Path) -> None:
    """Kueue and JobSet as a first deployment installs them, waiting for their webhooks."""
    install_controllers(kubeconfig, directory)
    wait_for_controllers(kubeconfig, None, timeout=30)


def provision_queue(api: client.ApiClient, quota: int = 32) -> None:
    client.CoreV1Api(api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE)))
    custom = client.CustomObjectsApi(api)
    # Kueue keeps a ClusterQueue inactive while a flavor it names has no ResourceFlavor.
    custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "resourceflavors", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
        "metadata": {"name": "tpu"}, "spec": {}})
    custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
        "metadata": {"name": "research-cq"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["google.com/tpu"],
            "flavors": [{"name": "tpu", "resources": [
                {"name": "google.com/tpu", "nominalQuota": quota}]}]}]}})
    custom.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta1", NAMESPACE,
                                           "localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
        "metadata": {"name": QUEUE}, "spec": {"clusterQueue": "research-cq"}})


def container_client(url: str) -> container_v1.ClusterManagerClient:
    return container_v1.ClusterManagerClient(
        transport="rest", credentials=AnonymousCredentials(),
        client_options=ClientOptions(api_endpoint=url))


def wait_for(condition: Callable[[], Any], timeout: float = 15.0, what: str = "") -> Any:
    give_up = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        assert time.monotonic() < give_up, f"timed out waiting for {what or condition}"
        time.sleep(0.05)


def wait_for_operation(gke: container_v1.ClusterManagerClient, op: Any) -> None:
    name = f"projects/{PROJECT}/locations/{LOCATION}/operations/{op.name}"
    wait_for(lambda: gke.get_operation(name=name).status
             == container_v1.Operation.Status.DONE, what=f"operation {op.name}")


def pod_pool(core: client.CoreV1Api, pod: client.V1Pod) -> str:
    node = core.read_node(pod.spec.node_name)
    return str(node.metadata.labels["cloud.google.com/gke-nodepool"])


def condition_of(obj: Any, kind: str) -> Any:
    return next((c for c in obj.status.conditions or [] if c.type == kind), None)


# ----------------------------------------------------------------------------- the process


class ClusterProcess:
    """``python -m sandbox.cluster`` with its printed URLs."""

    def __init__(self, state_dir: Path, pubsub: PubSubServer, topic: str,
                 *extra: str) -> None:
        self.kubeconfig = state_dir / "kubeconfig"
        command = [sys.executable, "-m", "sandbox.cluster", "--kube-port", "0",
                   "--gke-port", "0", "--state-dir", str(state_dir), "--speed", "600",
                   "--project", PROJECT, "--location", LOCATION, "--cluster", CLUSTER_NAME,
                   "--kubeconfig", str(self.kubeconfig),
                   "--pubsub-host", pubsub.address, "--unschedulable-topic", topic, *extra]
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                            os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        urls: dict[str, str] = {}
        give_up = time.monotonic() + 120  # a bound for a busy machine; ends once both listen
        while not {"kubernetes", "gke"} <= urls.keys():
            assert time.monotonic() < give_up, "sandbox.cluster did not start:\n" + self.log
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                assert self.process.poll() is None, "sandbox.cluster exited:\n" + self.log
                continue
            word, _, rest = line.strip().partition(" ")
            if word in ("kubernetes", "gke") and rest.startswith("http://127.0.0.1:"):
                urls[word] = rest
        self.kube_url, self.gke_url = urls["kubernetes"], urls["gke"]

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)
            self.lines.put(line)

    @property
    def log(self) -> str:
        return "".join(self.output)

    def stop(self) -> int:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            return self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            return self.process.wait()


@pytest.fixture
def pubsub(monkeypatch: pytest.MonkeyPatch) -> Iterator[PubSubServer]:
    server = start_pubsub("127.0.0.1", 0, pull_wait_seconds=0.3)
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", server.address)
    try:
        yield server
    finally:
        server.stop(grace=0.5)


def test_the_cluster_process_runs_a_queued_jobset_on_pools_created_through_the_gke_api(
    tmp_path: Path, pubsub: PubSubServer
):
    from google.cloud import pubsub_v1

    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    topic = publisher.topic_path(PROJECT, "unschedulable-pods")
    subscription = subscriber.subscription_path(PROJECT, "unschedulable-pods-test")
    publisher.create_topic(name=topic)
    subscriber.create_subscription(name=subscription, topic=topic)
    process = ClusterProcess(tmp_path / "state", pubsub, "unschedulable-pods")
    try:
        api = config.new_client_from_config(config_file=str(process.kubeconfig))
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        gke = container_client(process.gke_url)
        assert gke.get_cluster(name=CLUSTER).endpoint == process.kube_url
        install_controllers_with_kubectl(process.kubeconfig, tmp_path / "controllers")
        provision_queue(api)
        custom.create_namespaced_custom_object(*JOBSET_API,
                                               tpu_jobset("llama", run_seconds=1200))

        # Admitted, but no TPU nodes yet: every pod is unschedulable, once.
        waiting = wait_for(lambda: [p for p in core.list_namespaced_pod(NAMESPACE).items
                                    if condition_of(p, "PodScheduled")] or None,
                           what="unschedulable pods")
        wait_for(lambda: len(core.list_namespaced_pod(NAMESPACE).items) == 8)
        failed = wait_for(lambda: len(core.list_namespaced_event(
            NAMESPACE, field_selector="reason=FailedScheduling").items) == 8 or None)
        assert failed
        assert condition_of(waiting[0], "PodScheduled").reason == "Unschedulable"
        entries: list[dict[str, Any]] = []

        def pulled() -> bool:
            reply = subscriber.pull(subscription=subscription, max_messages=20, timeout=5)
            entries.extend(json.loads(m.message.data) for m in reply.received_messages)
            if reply.received_messages:
                subscriber.acknowledge(subscription=subscription,
                                       ack_ids=[m.ack_id for m in reply.received_messages])
            return len(entries) >= 8

        wait_for(pulled, what="8 FailedScheduling log entries")
        assert {e["resource"]["type"] for e in entries} == {"k8s_pod"}
        assert {e["jsonPayload"]["reason"] for e in entries} == {"FailedScheduling"}
        assert {e["resource"]["labels"]["namespace_name"] for e in entries} == {NAMESPACE}
        assert len({e["resource"]["labels"]["pod_name"] for e in entries}) == 8

        # Two slice pools through the Container API: the slices start, one per pool.
        for name in ("slice-a", "slice-b"):
            op = gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool(name))
            wait_for_operation(gke, op)
        nodes = wait_for(lambda: len(core.list_node().items) == 8 and core.list_node().items)
        assert {n.metadata.labels["cloud.google.com/gke-tpu-topology"] for n in nodes} == {"4x4"}
        assert {n.status.allocatable["google.com/tpu"] for n in nodes} == {"4"}
        running = wait_for(lambda: [p for p in core.list_namespaced_pod(NAMESPACE).items
                                    if p.status.phase in ("Running", "Succeeded")]
                           if len([p for p in core.list_namespaced_pod(NAMESPACE).items
                                   if p.spec.node_name]) == 8 else None,
                           what="8 bound pods")
        pools = {p.metadata.labels["batch.kubernetes.io/job-name"]: set() for p in running}
        for pod in running:
            pools[pod.metadata.labels["batch.kubernetes.io/job-name"]].add(pod_pool(core, pod))
        assert sorted(map(sorted, pools.values())) == [["slice-a"], ["slice-b"]]

        def completed() -> bool:
            body = custom.get_namespaced_custom_object(*JOBSET_API, "llama")
            return any(c["type"] == "Completed" and c["status"] == "True"
                       for c in body.get("status", {}).get("conditions", []))

        wait_for(completed, what="the JobSet to complete")

        op = gke.delete_node_pool(name=f"{CLUSTER}/nodePools/slice-a")
        wait_for_operation(gke, op)
        wait_for(lambda: len(core.list_node().items) == 4, what="slice-a's nodes to go")
    finally:
        assert process.stop() == 0, process.log
        publisher.stop()
        subscriber.close()
    assert "Traceback" not in process.log, process.log
    saved = json.loads((tmp_path / "state" / "kube-state.json").read_text())
    assert any(o["object"]["metadata"]["name"] == "llama" for o in saved["objects"])
    assert (tmp_path / "state" / "gke-state.json").exists()
    stopped_at = json.loads((tmp_path / "state" / "clock.json").read_text())["time"]

    # Started again on the same state: the finished JobSet, the remaining pool and its
    # nodes are still there, and simulated time goes on from where it stopped.
    again = ClusterProcess(tmp_path / "state", pubsub, "unschedulable-pods")
    try:
        api = config.new_client_from_config(config_file=str(again.kubeconfig))
        body = client.CustomObjectsApi(api).get_namespaced_custom_object(*JOBSET_API, "llama")
        assert body["status"]["terminalState"] == "Completed"
        nodes = client.CoreV1Api(api).list_node().items
        assert {n.metadata.labels["cloud.google.com/gke-nodepool"] for n in nodes} \
            == {"slice-b"}
        [pool] = container_client(again.gke_url).list_node_pools(parent=CLUSTER).node_pools
        assert pool.name == "slice-b"
    finally:
        assert again.stop() == 0, again.log
    assert json.loads((tmp_path / "state" / "clock.json").read_text())["time"] > stopped_at


def test_a_schedule_flag_makes_the_cluster_process_publish_ticks_with_attributes_and_data(
    tmp_path: Path, pubsub: PubSubServer
):
    from google.cloud import pubsub_v1

    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    for name in ("unschedulable-pods", "ticks"):
        publisher.create_topic(name=publisher.topic_path(PROJECT, name))
    subscription = subscriber.subscription_path(PROJECT, "ticks-test")
    subscriber.create_subscription(name=subscription,
                                   topic=publisher.topic_path(PROJECT, "ticks"))
    # At 600x a simulated minute is a tenth of a real second.
    process = ClusterProcess(
        tmp_path / "state", pubsub, "unschedulable-pods",
        "--schedule=ticks|* * * * *|Europe/Berlin|trigger=schedule,mode=cleanup-only"
        '|{"from": "cron"}')
    try:
        reply = wait_for(lambda: subscriber.pull(subscription=subscription, max_messages=5,
                                                 timeout=5).received_messages,
                         what="a scheduled tick")
        message = reply[0].message
        assert json.loads(message.data) == {"from": "cron"}
        assert dict(message.attributes) == {"trigger": "schedule", "mode": "cleanup-only"}
    finally:
        assert process.stop() == 0, process.log
        publisher.stop()
        subscriber.close()
    assert "Traceback" not in process.log, process.log


# ----------------------------------------------------------------------------- in-process


class InProcessCluster:
    def __init__(self, tmp_path: Path) -> None:
        self.clock = SimClock(speed=1e-6, start=datetime(2026, 11, 21, 8, tzinfo=UTC))
        self.store = ObjectStore(clock=self.clock)
        self.kube: KubeApiServer = start_kube_api(clock=self.clock, store=self.store)
        install_crds(self.kube.store)
        self.state = GkeState(self.clock)
        self.state.add_cluster(PROJECT, LOCATION, CLUSTER_NAME, self.kube.url)
        self.gke_server: GkeApiServer = start_gke_api(self.state)
        self.simulation = Simulation(self.store, self.clock, gke_state=self.state,
                                     cluster=CLUSTER, tick=0.01).start()
        kubeconfig = self.kube.write_kubeconfig(tmp_path / "kubeconfig")
        self.api = config.new_client_from_config(config_file=str(kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.gke = container_client(self.gke_server.url)

    def add_pool(self, name: str) -> None:
        op = self.gke.create_node_pool(parent=CLUSTER, node_pool=tpu_pool(name))
        self.clock.advance(181)
        wait_for_operation(self.gke, op)

    def close(self) -> None:
        self.simulation.stop()
        self.gke_server.stop()
        self.api.close()
        self.kube.stop()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[InProcessCluster]:
    running = InProcessCluster(tmp_path)
    try:
        yield running
    finally:
        running.close()


def test_deleting_a_node_pool_through_the_gke_api_fails_the_pods_running_on_it(cluster):
    provision_queue(cluster.api)
    cluster.add_pool("slice-a")
    cluster.add_pool("slice-b")
    cluster.custom.create_namespaced_custom_object(
        *JOBSET_API, tpu_jobset("llama", run_seconds=86400))
    wait_for(lambda: [p.status.phase for p in cluster.core.list_namespaced_pod(NAMESPACE).items]
             == ["Running"] * 8, what="8 running pods")

    op = cluster.gke.delete_node_pool(name=f"{CLUSTER}/nodePools/slice-a")
    cluster.clock.advance(61)
    wait_for_operation(cluster.gke, op)

    def lost() -> list[client.V1Pod]:
        return [p for p in cluster.core.list_namespaced_pod(NAMESPACE).items
                if p.status.reason == "NodeLost"]

    failed = wait_for(lambda: len(lost()) == 4 and lost(), what="4 lost pods")
    assert {p.status.phase for p in failed} == {"Failed"}
    assert all(condition_of(p, "DisruptionTarget").status == "True" for p in failed)
    assert {n.metadata.labels["cloud.google.com/gke-nodepool"]
            for n in cluster.core.list_node().items} == {"slice-b"}


def test_deleting_a_jobset_through_the_api_removes_its_jobs_and_pods(cluster):
    provision_queue(cluster.api)
    cluster.add_pool("slice-a")
    cluster.add_pool("slice-b")
    cluster.custom.create_namespaced_custom_object(
        *JOBSET_API, tpu_jobset("llama", run_seconds=86400))
    wait_for(lambda: len(cluster.core.list_namespaced_pod(NAMESPACE).items) == 8)
    assert len(cluster.batch.list_namespaced_job(NAMESPACE).items) == 2

    cluster.custom.delete_namespaced_custom_object(
        *JOBSET_API, "llama", body=client.V1DeleteOptions(propagation_policy="Foreground"))

    wait_for(lambda: not cluster.core.list_namespaced_pod(NAMESPACE).items,
             what="the pods to go")
    assert cluster.batch.list_namespaced_job(NAMESPACE).items == []


def test_suspending_a_running_jobset_through_the_api_removes_its_pods(cluster):
    cluster.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
        name=NAMESPACE)))
    cluster.add_pool("slice-a")
    body = tpu_jobset("manual", slices=1, run_seconds=86400)
    del body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]  # not managed by Kueue
    body["spec"]["suspend"] = False
    cluster.custom.create_namespaced_custom_object(*JOBSET_API, body)
    wait_for(lambda: [p.status.phase for p in cluster.core.list_namespaced_pod(NAMESPACE).items]
             == ["Running"] * 4, what="4 running pods")

    cluster.custom.patch_namespaced_custom_object(*JOBSET_API, "manual",
                                                  {"spec": {"suspend": True}})

    wait_for(lambda: not cluster.core.list_namespaced_pod(NAMESPACE).items,
             what="the pods to go")
    [job] = cluster.batch.list_namespaced_job(NAMESPACE).items
    assert job.spec.suspend is True
