"""Deployments, ReplicaSets, the HPA, GPU nodes and the process kubelet, in process.

No sockets and no real processes: containers are fake processes, probes a fake
prober that answers by the version a pod runs, and real time a clock the test
moves (``Simulation(real_clock=...)`` runs probes and stops on the pass
thread). Simulated time is practically frozen and moved with ``clock.advance``.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sandbox.cluster import Simulation
from sandbox.cluster.__main__ import launchers, parse_args
from sandbox.cluster.probes import ProbeSpec, probe_spec
from sandbox.cluster.rollout import resolve_int_or_percent, template_hash
from sandbox.common.clock import SimClock
from sandbox.kubeapi import ObjectStore

CLUSTER = "projects/acme/locations/us-central1-a/clusters/serve"
NAMESPACE = "serving"
START = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
IMAGE = "localhost/sandbox-echo:1"
DEPLOYMENTS = ("apps", "deployments")
REPLICASETS = ("apps", "replicasets")
GPU = "nvidia.com/gpu"


# ----------------------------------------------------------------------------- fakes


class RealClock:
    """Real (monotonic) time as the test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeProcess:
    def __init__(self, version: str, exits_with: int | None, history: list[str]) -> None:
        self.version = version
        self.code = exits_with
        self.stopped_with: float | None = None
        self.history = history
        history.append(f"start {version}")

    def alive(self) -> bool:
        return self.code is None

    def exit_code(self) -> int | None:
        return self.code

    def stop(self, grace_seconds: float) -> None:
        self.stopped_with = grace_seconds
        if self.code is None:
            self.code = 143
            self.history.append(f"stop {self.version}")

    def log_tail(self, lines: int = 20) -> str:
        return f"loading {self.version}\nerror: model {self.version} failed to load"


class FakeLauncher:
    """Starts fake processes; versions in ``crashing`` exit at once with code 1."""

    def __init__(self) -> None:
        self.started: list[FakeProcess] = []
        self.crashing: set[str] = set()
        self.history: list[str] = []

    def __call__(self, pod: Any, container: Any, ports: Any) -> FakeProcess:
        version = version_of(container)
        process = FakeProcess(version, 1 if version in self.crashing else None, self.history)
        self.started.append(process)
        return process

    def running(self) -> list[FakeProcess]:
        return [p for p in self.started if p.alive()]


class FakeProber:
    """Readiness by the version behind the probed host port; liveness by ``dead``."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.ready: set[str] = {"v1"}
        self.dead: set[str] = set()

    def __call__(self, spec: ProbeSpec, host_port: int | None) -> bool:
        for pod in self.store.list("", "pods"):
            ports = json.loads(pod["metadata"].get("annotations", {})
                               .get("sandbox.accelops.dev/host-ports") or "{}")
            if host_port in ports.values():
                version = version_of(pod["spec"]["containers"][0])
                if spec.path == "/v2/health/live":
                    return version not in self.dead
                return version in self.ready
        return False


def version_of(container: Any) -> str:
    return next((a.split("=", 1)[1] for a in container.get("args") or []
                 if a.startswith("--version=")), "v1")


# ----------------------------------------------------------------------------- builders


def gpu_pool(nodes: int = 3) -> dict[str, Any]:
    return {"name": "l4", "nodeCount": nodes, "status": "RUNNING",
            "config": {"machineType": "g2-standard-8", "accelerators": [
                {"acceleratorType": "nvidia-l4", "acceleratorCount": "1"}]}}


def pod_template(version: str) -> dict[str, Any]:
    """A pod template shaped like the model server's: GPU, probes, preStop."""
    return {
        "metadata": {"labels": {"app": "toy"}},
        "spec": {
            "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
            "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
            "terminationGracePeriodSeconds": 30,
            "containers": [{
                "name": "server", "image": IMAGE, "args": [f"--version={version}"],
                "terminationMessagePolicy": "FallbackToLogsOnError",
                "ports": [{"name": "http", "containerPort": 8000}],
                "resources": {"limits": {GPU: 1}},
                "readinessProbe": {"httpGet": {"path": "/v2/health/ready", "port": "http"},
                                   "periodSeconds": 1},
                "livenessProbe": {"httpGet": {"path": "/v2/health/live", "port": "http"},
                                  "periodSeconds": 1, "failureThreshold": 2},
            }],
        },
    }


def deployment(version: str = "v1", replicas: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "toy", "namespace": NAMESPACE},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "toy"}},
            "progressDeadlineSeconds": 600,
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": pod_template(version),
        },
    }


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture
def clock() -> SimClock:
    return SimClock(speed=1e-6, start=START)


@pytest.fixture
def store(clock: SimClock) -> ObjectStore:
    store = ObjectStore(clock=clock)
    store.create("", "namespaces", {"metadata": {"name": NAMESPACE}})
    return store


@pytest.fixture
def real() -> RealClock:
    return RealClock()


@pytest.fixture
def launcher() -> FakeLauncher:
    return FakeLauncher()


@pytest.fixture
def prober(store: ObjectStore) -> FakeProber:
    return FakeProber(store)


@pytest.fixture
def sim(store: ObjectStore, clock: SimClock, real: RealClock, launcher: FakeLauncher,
        prober: FakeProber) -> Simulation:
    simulation = Simulation(store, clock, cluster=CLUSTER, launchers={"sandbox-echo": launcher},
                            prober=prober, real_clock=real, pod_time_scale=0.1)
    simulation.on_pool_event("POOL_RUNNING", CLUSTER, gpu_pool())
    simulation.settle()
    return simulation


def converge(sim: Simulation, real: RealClock, steps: int = 8, step: float = 1.0) -> None:
    """Let real time pass in steps, probing and reconciling after each."""
    for _ in range(steps):
        real.now += step
        sim.kubelet.probes.tick()
        sim.settle()


def get_deployment(store: ObjectStore) -> dict[str, Any]:
    return store.get(*DEPLOYMENTS, "toy", NAMESPACE)


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


def pods(store: ObjectStore) -> list[dict[str, Any]]:
    return store.list("", "pods", NAMESPACE)


def versions(store: ObjectStore) -> list[str]:
    return sorted(version_of(p["spec"]["containers"][0]) for p in pods(store))


def replica_sets(store: ObjectStore) -> dict[str, int]:
    return {version_of(rs["spec"]["template"]["spec"]["containers"][0]): rs["spec"]["replicas"]
            for rs in store.list(*REPLICASETS, NAMESPACE)}


def change_template(store: ObjectStore, version: str) -> None:
    store.patch(*DEPLOYMENTS, "toy", {"spec": {"template": pod_template(version)}},
                namespace=NAMESPACE)


def rolled_out(store: ObjectStore, sim: Simulation, real: RealClock) -> dict[str, Any]:
    store.create(*DEPLOYMENTS, deployment(), namespace=NAMESPACE)
    converge(sim, real)
    return get_deployment(store)


# ----------------------------------------------------------------------------- rollouts


def test_a_new_deployment_runs_its_replicas_from_one_replicaset_named_by_the_template_hash(
        store, sim, real, launcher):
    body = rolled_out(store, sim, real)

    [rs] = store.list(*REPLICASETS, NAMESPACE)
    digest = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"toy-{digest}"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "toy", "pod-template-hash": digest}
    assert rs["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    assert body["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    status = body["status"]
    assert (status["replicas"], status["updatedReplicas"], status["readyReplicas"],
            status["availableReplicas"]) == (2, 2, 2, 2)
    assert "unavailableReplicas" not in status  # zero counts are omitted, as the API does
    assert status["observedGeneration"] == body["metadata"]["generation"]
    assert condition(body, "Available")["reason"] == "MinimumReplicasAvailable"
    assert condition(body, "Progressing")["reason"] == "NewReplicaSetAvailable"
    assert len(launcher.running()) == 2
    for pod in pods(store):
        assert pod["metadata"]["name"].startswith(f"toy-{digest}-")
        assert pod["status"]["phase"] == "Running"
        assert pod["status"]["containerStatuses"][0]["ready"] is True


def test_a_template_change_surges_one_pod_and_keeps_the_old_ones_until_it_is_ready(
        store, sim, real, launcher, prober):
    rolled_out(store, sim, real)

    change_template(store, "v2")
    converge(sim, real)

    body = get_deployment(store)
    assert replica_sets(store) == {"v1": 2, "v2": 1}
    assert versions(store) == ["v1", "v1", "v2"]
    status = body["status"]
    assert (status["replicas"], status["updatedReplicas"], status["readyReplicas"],
            status["availableReplicas"], status["unavailableReplicas"]) == (3, 1, 2, 2, 1)
    assert condition(body, "Progressing")["reason"] == "ReplicaSetUpdated"
    assert condition(body, "Available")["status"] == "True"

    prober.ready.add("v2")
    converge(sim, real)

    body = get_deployment(store)
    assert replica_sets(store) == {"v1": 0, "v2": 2}
    assert versions(store) == ["v2", "v2"]
    assert body["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    assert condition(body, "Progressing")["reason"] == "NewReplicaSetAvailable"
    assert sorted(p.version for p in launcher.running()) == ["v2", "v2"]
    assert all(p.stopped_with is not None for p in launcher.started if p.version == "v1")


def test_a_version_that_never_gets_ready_times_out_while_the_old_pods_keep_serving(
        store, sim, real, clock, launcher):
    rolled_out(store, sim, real)
    launcher.crashing.add("v2")

    change_template(store, "v2")
    converge(sim, real)
    clock.advance(601)
    converge(sim, real, steps=2)

    body = get_deployment(store)
    progressing = condition(body, "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("False", "ProgressDeadlineExceeded")
    assert progressing["message"].endswith("has timed out progressing.")
    assert condition(body, "Available")["status"] == "True"
    assert replica_sets(store) == {"v1": 2, "v2": 1}
    ready = [p for p in pods(store) if p["status"]["containerStatuses"][0]["ready"]]
    assert sorted(version_of(p["spec"]["containers"][0]) for p in ready) == ["v1", "v1"]


def test_patching_the_template_back_rolls_back_to_the_old_replicaset_with_a_new_revision(
        store, sim, real, launcher):
    rolled_out(store, sim, real)
    launcher.crashing.add("v2")
    change_template(store, "v2")
    converge(sim, real)

    change_template(store, "v1")
    converge(sim, real)

    body = get_deployment(store)
    assert replica_sets(store) == {"v1": 2, "v2": 0}
    assert versions(store) == ["v1", "v1"]
    old = next(rs for rs in store.list(*REPLICASETS, NAMESPACE)
               if version_of(rs["spec"]["template"]["spec"]["containers"][0]) == "v1")
    assert old["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    assert old["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"] == "1"
    assert body["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    assert condition(body, "Progressing")["reason"] == "NewReplicaSetAvailable"


def test_recreate_stops_every_old_pod_before_starting_the_new_ones(store, sim, real, launcher):
    body = deployment()
    body["spec"]["strategy"] = {"type": "Recreate"}
    store.create(*DEPLOYMENTS, body, namespace=NAMESPACE)
    converge(sim, real)

    change_template(store, "v2")
    converge(sim, real)

    assert versions(store) == ["v2", "v2"]
    assert launcher.history == ["start v1", "start v1", "stop v1", "stop v1",
                                "start v2", "start v2"]


def test_changing_only_the_replicas_adds_pods_of_the_current_template(store, sim, real):
    store.create(*DEPLOYMENTS, deployment(replicas=1), namespace=NAMESPACE)
    converge(sim, real)

    store.patch(*DEPLOYMENTS, "toy", {"spec": {"replicas": 3}}, namespace=NAMESPACE)
    converge(sim, real)

    assert versions(store) == ["v1", "v1", "v1"]
    assert len(store.list(*REPLICASETS, NAMESPACE)) == 1


def test_deleting_a_deployment_takes_its_replicasets_pods_and_processes(
        store, sim, real, launcher):
    rolled_out(store, sim, real)

    store.delete(*DEPLOYMENTS, "toy", NAMESPACE)
    converge(sim, real, steps=3)

    assert store.list(*REPLICASETS, NAMESPACE) == []
    assert pods(store) == []
    assert launcher.running() == []


# ----------------------------------------------------------------------------- kubelet


def test_a_crashing_container_waits_in_crash_loop_back_off_with_its_last_exit(
        store, sim, real, launcher):
    launcher.crashing.add("v1")
    store.create(*DEPLOYMENTS, deployment(replicas=1), namespace=NAMESPACE)
    converge(sim, real, steps=2, step=0.0)  # exits, is restarted at once, exits again

    [pod] = pods(store)
    [status] = pod["status"]["containerStatuses"]
    assert pod["status"]["phase"] == "Running"
    assert status["restartCount"] == 1
    assert status["ready"] is False
    assert status["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert status["state"]["waiting"]["message"].startswith(
        "back-off 10s restarting failed container=server pod=")
    last = status["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"]) == (1, "Error")
    assert last["message"].endswith("error: model v1 failed to load")
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ContainersNotReady")

    converge(sim, real, steps=1, step=1.0)  # 10 s back-off at time scale 0.1
    [status] = pods(store)[0]["status"]["containerStatuses"]
    assert status["restartCount"] == 2
    assert status["state"]["waiting"]["message"].startswith("back-off 20s")


def test_a_failing_liveness_probe_restarts_the_container(store, sim, real, launcher, prober):
    store.create(*DEPLOYMENTS, deployment(replicas=1), namespace=NAMESPACE)
    converge(sim, real)
    prober.dead.add("v1")

    converge(sim, real, steps=3)

    [status] = pods(store)[0]["status"]["containerStatuses"]
    assert status["restartCount"] == 1
    assert status["lastState"]["terminated"]["exitCode"] == 143
    assert launcher.started[0].stopped_with is not None
    assert len(launcher.started) == 2


def test_a_deleted_pod_stays_terminating_and_out_of_endpoints_until_its_process_stopped(
        store, sim, real, launcher):
    store.create(*DEPLOYMENTS, deployment(replicas=1), namespace=NAMESPACE)
    store.create("", "services", {"apiVersion": "v1", "kind": "Service", "metadata": {
        "name": "toy", "namespace": NAMESPACE}, "spec": {"selector": {"app": "toy"}, "ports": [
            {"name": "http", "port": 8000, "targetPort": "http"}]}})
    converge(sim, real)
    [pod] = pods(store)
    assert "sandbox.accelops.dev/container-process" in pod["metadata"]["finalizers"]
    endpoints_at_stop: list[Any] = []
    process = launcher.started[0]
    stop = process.stop

    def observed_stop(grace: float) -> None:
        endpoints_at_stop.append(copy.deepcopy(store.get("", "endpoints", "toy", NAMESPACE)))
        stop(grace)

    process.stop = observed_stop  # type: ignore[method-assign]

    store.delete("", "pods", pod["metadata"]["name"], NAMESPACE)
    terminating = store.get("", "pods", pod["metadata"]["name"], NAMESPACE)
    assert terminating["metadata"]["deletionTimestamp"]
    converge(sim, real, steps=3)

    listed = [a["targetRef"]["name"] for subset in endpoints_at_stop[0]["subsets"]
              for a in subset.get("addresses", []) + subset.get("notReadyAddresses", [])]
    assert pod["metadata"]["name"] not in listed
    assert process.stopped_with == pytest.approx(3.0)  # 30 s grace at time scale 0.1
    assert pod["metadata"]["name"] not in [p["metadata"]["name"] for p in pods(store)]
    assert len(pods(store)) == 1  # the ReplicaSet replaced it at once


def test_pods_beyond_the_process_limit_wait_in_container_creating(store, clock, real, prober):
    launcher = FakeLauncher()
    sim = Simulation(store, clock, cluster=CLUSTER, launchers={"sandbox-echo": launcher},
                     prober=prober, real_clock=real, max_processes=2)
    sim.on_pool_event("POOL_RUNNING", CLUSTER, gpu_pool(nodes=3))
    store.create(*DEPLOYMENTS, deployment(replicas=3), namespace=NAMESPACE)
    converge(sim, real)

    waiting = [p for p in pods(store) if p["status"]["phase"] == "Pending"]
    assert len(launcher.running()) == 2
    assert len(waiting) == 1
    state = waiting[0]["status"]["containerStatuses"][0]["state"]["waiting"]
    assert state["reason"] == "ContainerCreating"
    assert "2 of at most 2 sandbox processes" in state["message"]

    launcher.running()[0].code = 137  # one process dies: the waiting pod takes its slot
    converge(sim, real, steps=2)
    assert len(launcher.running()) == 2
    assert len(launcher.started) == 3


# ----------------------------------------------------------------------------- GPUs, HPA


def test_gpu_pools_become_nodes_with_the_accelerator_label_gpus_and_taint(store, sim):
    nodes = store.list("", "nodes")
    assert len(nodes) == 3
    for node in nodes:
        assert node["metadata"]["labels"]["cloud.google.com/gke-accelerator"] == "nvidia-l4"
        assert node["status"]["allocatable"][GPU] == "1"
        assert node["status"]["capacity"][GPU] == "1"
        assert {"key": GPU, "value": "present", "effect": "NoSchedule"} in node["spec"]["taints"]


def test_gpu_pods_bind_only_where_a_gpu_is_free_and_other_pods_stay_off_gpu_nodes(store, sim):
    def pod(name: str, gpus: int) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "main", "image": "busybox"}
        if gpus:
            container["resources"] = {"limits": {GPU: gpus}}
        return {"metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {"containers": [container]}}

    for index in range(4):
        store.create("", "pods", pod(f"gpu-{index}", 1), namespace=NAMESPACE)
    store.create("", "pods", pod("cpu", 0), namespace=NAMESPACE)
    sim.settle()

    bound = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods(store)}
    assert len({bound[f"gpu-{i}"] for i in range(3)}) == 3
    assert bound["gpu-3"] is None
    assert bound["cpu"] is None
    messages = {p["metadata"]["name"]: p["status"]["conditions"][0]["message"]
                for p in pods(store) if not p["spec"].get("nodeName")}
    assert "3 Insufficient nvidia.com/gpu" in messages["gpu-3"]
    assert "untolerated taint {nvidia.com/gpu: present}" in messages["cpu"]


def test_an_hpa_keeps_its_deployment_within_min_and_max_replicas(store, sim, real):
    store.create(*DEPLOYMENTS, deployment(replicas=1), namespace=NAMESPACE)
    store.create("autoscaling", "horizontalpodautoscalers", {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "toy", "namespace": NAMESPACE},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                    "name": "toy"},
                 "minReplicas": 2, "maxReplicas": 3,
                 "metrics": [{"type": "Pods", "pods": {
                     "metric": {"name": "nv_inference_queue_duration_us"},
                     "target": {"type": "AverageValue", "averageValue": "50000"}}}]}},
        namespace=NAMESPACE)
    converge(sim, real)

    assert get_deployment(store)["spec"]["replicas"] == 2
    hpa = store.get("autoscaling", "horizontalpodautoscalers", "toy", NAMESPACE)
    assert (hpa["status"]["currentReplicas"], hpa["status"]["desiredReplicas"]) == (2, 2)
    assert hpa["status"]["lastScaleTime"]
    active = condition(hpa, "ScalingActive")
    assert (active["status"], active["reason"]) == ("False", "FailedGetPodsMetric")

    store.patch(*DEPLOYMENTS, "toy", {"spec": {"replicas": 5}}, namespace=NAMESPACE)
    converge(sim, real, steps=2)
    assert get_deployment(store)["spec"]["replicas"] == 3


# ----------------------------------------------------------------------------- pure rules


def test_the_pod_template_hash_ignores_its_own_label_and_uses_the_api_alphabet():
    template = pod_template("v1")
    labelled = copy.deepcopy(template)
    labelled["metadata"]["labels"]["pod-template-hash"] = "whatever"

    digest = template_hash(template)
    assert digest == template_hash(labelled)
    assert digest != template_hash(pod_template("v2"))
    assert set(digest) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert 1 <= len(digest) <= 10


def test_surge_rounds_up_and_unavailability_rounds_down_from_percentages():
    assert resolve_int_or_percent("25%", 3, round_up=True, default="25%") == 1
    assert resolve_int_or_percent("25%", 3, round_up=False, default="25%") == 0
    assert resolve_int_or_percent(None, 8, round_up=False, default="25%") == 2
    assert resolve_int_or_percent(1, 8, round_up=False, default="25%") == 1


def test_probes_take_the_api_defaults_and_the_time_scale_shortens_their_delays():
    container = {"ports": [{"name": "http", "containerPort": 8000}]}
    spec = probe_spec({"httpGet": {"path": "/v2/health/ready", "port": "http"},
                       "initialDelaySeconds": 10}, container, 0.2)

    assert spec is not None
    assert (spec.action, spec.port, spec.path) == ("http", 8000, "/v2/health/ready")
    assert (spec.initial_delay, spec.period) == (pytest.approx(2.0), pytest.approx(2.0))
    assert (spec.timeout, spec.success_threshold, spec.failure_threshold) == (1.0, 1, 3)
    assert probe_spec(None, container, 0.2) is None


def test_the_cluster_process_registers_triton_only_with_a_storage_url(tmp_path: Path):
    assert launchers(None, tmp_path) == {}
    registered = launchers("http://127.0.0.1:4443", tmp_path)
    assert list(registered) == ["tritonserver"]
    args = parse_args(["--state-dir", str(tmp_path), "--project", "p", "--location", "l",
                       "--cluster", "c"])
    assert (args.max_processes, args.pod_time_scale, args.storage_url) == (3, 0.2, None)
    with pytest.raises(SystemExit):
        parse_args(["--state-dir", str(tmp_path), "--project", "p", "--location", "l",
                    "--cluster", "c", "--max-processes", "0"])
