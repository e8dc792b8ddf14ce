"""Wires the cluster controllers together and drives them on the simulated clock.

One reconcile *pass* runs every controller once, in the order a change flows
through a cluster: node pool events (disruptions included), lost-node pods,
disrupted nodes coming back, Kueue admission, the JobSet and Job controllers, the
HorizontalPodAutoscaler, the Kueue and JobSet controller managers' readiness
(:mod:`sandbox.cluster.managers`), Deployment and ReplicaSet controllers, owner
garbage collection, the scheduler, Services (endpoints drop a deleted pod before its
process is told to stop), GKE's Gateway controller (GatewayClasses, Gateway listeners,
HTTPRoute status: :mod:`sandbox.cluster.gateways`), then the kubelets (the process
kubelet for pods whose images have a launcher, the simulated pod runtime for the
rest). Every controller is level-triggered (it reads the store and corrects what
differs), so passes are idempotent and may run any time.

Real processes (``launchers``: image substring → :data:`Launcher`) run on real
time: their readiness probes, restart back-off, preStop sleeps and grace periods
take ``pod_time_scale`` real seconds per second written in the pod spec
(liveness and startup probes keep real time, :mod:`sandbox.cluster.probes`), at most
``max_processes`` run at once. Deployment progress deadlines and
``minReadySeconds`` are counted on the simulated clock, as the controllers'
timestamps are. A test may pass its own ``real_clock`` (and a fake ``prober``):
then probes and stops run on the pass thread and the test moves real time.

:meth:`Simulation.start` runs passes in one background thread, which makes the
controllers single-threaded however many threads write to the store: store
callbacks and GKE node pool events only *wake* that thread (callbacks run
outside the store lock and the passes' own writes cause more callbacks, so
nothing is done inside them). The thread also wakes every ``tick`` real seconds
and when the next pod, availability or progress deadline, or a disrupted node's
return, is due on the SimClock, so time-based transitions happen as the clock
runs or is advanced; the process kubelet's prober thread wakes it when a probe
flips or a process exits. Tests can instead call
:meth:`Simulation.settle` (passes until nothing changes) without starting it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from sandbox.cluster.containers import Launcher
from sandbox.cluster.deployments import DeploymentController
from sandbox.cluster.gateways import GatewayController
from sandbox.cluster.gc import GarbageCollector
from sandbox.cluster.hpa import HorizontalPodAutoscalerController
from sandbox.cluster.jobs import JobController
from sandbox.cluster.jobset import JobSetController
from sandbox.cluster.kube_scheduler import KubeScheduler, UnschedulableHook
from sandbox.cluster.kubelet import ProcessKubelet
from sandbox.cluster.kueue import KueueController
from sandbox.cluster.managers import DEFAULT_START_SECONDS, ControllerManagers
from sandbox.cluster.nodes import ANNOTATION_CLUSTER, ClusterRef, NodePoolController
from sandbox.cluster.objects import (
    LABEL_NODEPOOL,
    NODES,
    Obj,
    annotations_of,
    delete_quietly,
    labels_of,
    name_of,
)
from sandbox.cluster.probes import Prober, probe_once
from sandbox.cluster.replicasets import ReplicaSetController
from sandbox.cluster.runtime import PodRuntime
from sandbox.cluster.services import ServiceController
from sandbox.common.clock import SimClock
from sandbox.kubeapi import ObjectStore

__all__ = ["PoolEventSource", "Simulation"]

log = logging.getLogger(__name__)

PoolObserver = Callable[[str, str, dict[str, Any]], None]


class PoolEventSource(Protocol):
    """What the simulation needs of :class:`sandbox.gke.GkeState`."""

    def subscribe(self, callback: PoolObserver) -> Callable[[], None]: ...


class Simulation:
    """The simulated cluster: node pools → Nodes, Kueue, JobSet, Jobs, Deployments,
    scheduler, kubelets, Services."""

    def __init__(
        self,
        store: ObjectStore,
        clock: SimClock,
        *,
        gke_state: PoolEventSource | None = None,
        cluster: str | None = None,
        tick: float = 0.05,
        resync: float = 5.0,
        launchers: Mapping[str, Launcher] | None = None,
        max_processes: int = 3,
        pod_time_scale: float = 0.2,
        prober: Prober = probe_once,
        real_clock: Callable[[], float] | None = None,
        controller_start_seconds: float = DEFAULT_START_SECONDS,
    ) -> None:
        self.store = store
        self.clock = clock
        self.gke_state = gke_state
        self.tick = tick
        self.resync = resync
        self.nodes = NodePoolController(store, clock, cluster=cluster)
        self.kueue = KueueController(store, clock)
        self.jobsets = JobSetController(store, clock)
        self.jobs = JobController(store, clock)
        self.hpa = HorizontalPodAutoscalerController(store, clock)
        self.managers = ControllerManagers(store, clock, start_seconds=controller_start_seconds)
        self.deployments = DeploymentController(store, clock, skip=self.managers.owns_deployment)
        self.replicasets = ReplicaSetController(store, clock)
        self.gc = GarbageCollector(store)
        self.kubelet = ProcessKubelet(store, clock, launchers=launchers or {},
                                      max_processes=max_processes, time_scale=pod_time_scale,
                                      prober=prober, notify=self._notify,
                                      monotonic=real_clock or time.monotonic,
                                      inline=real_clock is not None)
        self.scheduler = KubeScheduler(store, clock, starts_itself=self.kubelet.handles)
        self.runtime = PodRuntime(store, clock, skip=self.kubelet.handles)
        self.services = ServiceController(store, clock, skip=self.managers.owns_service)
        self.gateways = GatewayController(store, clock)
        self._pool_events: deque[tuple[str, str, dict[str, Any]]] = deque()
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._unsubscribe: list[Callable[[], None]] = []
        self._next_due: float | None = None
        self.passes = 0

    # ------------------------------------------------------------------ hooks

    def on_unschedulable(self, callback: UnschedulableHook) -> None:
        """``callback(pod, event)`` once per newly unschedulable pod (on the pass thread)."""
        self.scheduler.on_unschedulable(callback)

    def on_pool_event(self, event: str, cluster_path: str, pool: Mapping[str, Any]) -> None:
        """Queue a GKE node pool event for the next pass (safe from any thread)."""
        self._pool_events.append((event, cluster_path, dict(pool)))
        self._wake.set()

    def _on_store_change(self, event_type: str, obj: Obj) -> None:
        if obj.get("kind") != "Event":
            self._wake.set()

    def _notify(self) -> None:
        self._wake.set()

    # ------------------------------------------------------------------ passes

    def reconcile(self) -> bool:
        """One pass of every controller; True when it changed anything in the store."""
        with self._lock:
            before = self.store.resource_version
            while self._pool_events:
                event, cluster_path, pool = self._pool_events.popleft()
                self.nodes.on_pool_event(event, cluster_path, pool)
            self.nodes.fail_lost_pods()
            node_due = self.nodes.bring_back()
            self.kueue.reconcile()
            self.jobsets.reconcile()
            self.jobs.reconcile()
            self.hpa.reconcile()
            dues = [node_due, self.managers.reconcile(), self.deployments.reconcile(),
                    self.replicasets.reconcile()]
            self.gc.collect()
            self.scheduler.reconcile()
            self.services.reconcile()  # before the kubelet: a deleted pod leaves endpoints
            self.gateways.reconcile()  # after Services: routes resolve to their proxies
            self.kubelet.reconcile()  # first, then its process is stopped
            dues.append(self.runtime.reconcile())
            self._next_due = min((due for due in dues if due is not None), default=None)
            self.passes += 1
            return self.store.resource_version != before or bool(self._pool_events)

    def settle(self, max_passes: int = 100) -> int:
        """Pass until a pass changes nothing; returns the passes run (RuntimeError if never)."""
        for count in range(1, max_passes + 1):
            if not self.reconcile():
                return count
        raise RuntimeError(f"the cluster simulation did not settle in {max_passes} passes")

    def sync_pools(self) -> None:
        """Match Nodes to the GKE state's pools (start-up, e.g. after a restart)."""
        pools_of = getattr(self.gke_state, "pools", None)
        if not callable(pools_of):
            return
        wanted = self.nodes.cluster.path if self.nodes.cluster else None
        pools: list[tuple[str, dict[str, Any]]] = list(pools_of(wanted))
        known: set[tuple[str, str]] = set()
        for cluster_path, pool in pools:
            known.add((cluster_path, str(pool.get("name", ""))))
            if pool.get("status") in ("RUNNING", "RECONCILING", "STOPPING",
                                      "RUNNING_WITH_ERROR"):
                self.on_pool_event("POOL_RESIZED", cluster_path, pool)
        for node in self.store.list(*NODES):
            ref = ClusterRef.parse(annotations_of(node).get(ANNOTATION_CLUSTER) or "")
            if ref is None or (self.nodes.cluster is not None and ref != self.nodes.cluster):
                continue
            pool_name = labels_of(node).get(LABEL_NODEPOOL, "")
            if (ref.path, pool_name) not in known:
                delete_quietly(self.store, NODES, name_of(node))

    # ------------------------------------------------------------------ thread

    def start(self) -> Simulation:
        """Subscribe to the store (and GKE state) and run passes in a daemon thread."""
        if self._thread is not None:
            return self
        self._stop.clear()
        self._unsubscribe.append(self.store.subscribe(self._on_store_change))
        if self.gke_state is not None:
            unsubscribe = self.gke_state.subscribe(self.on_pool_event)
            if callable(unsubscribe):
                self._unsubscribe.append(unsubscribe)
            self.sync_pools()
        self._wake.set()
        self._thread = threading.Thread(target=self._run, name="sandbox-cluster", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the pass thread, unsubscribe, stop processes and proxies. Idempotent."""
        thread, self._thread = self._thread, None
        self._stop.set()
        self._wake.set()
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()
        if thread is not None:
            thread.join(timeout=5)
        with self._lock:
            self.gateways.close()
            self.services.close()
            self.kubelet.close()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def __enter__(self) -> Simulation:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _timeout(self) -> float:
        due = self._next_due
        if due is None:
            return self.tick
        return max(0.0, min(self.tick, self.clock.real_seconds(due - self.clock.time())))

    def _run(self) -> None:
        idle_real = 0.0
        while not self._stop.is_set():
            timeout = self._timeout()
            woken = self._wake.wait(timeout)
            if self._stop.is_set():
                return
            if woken:  # clearing after a timeout could swallow a wake that just came
                self._wake.clear()
            idle_real += timeout if not woken else 0.0
            due = self._next_due is not None and self.clock.time() >= self._next_due
            if not (woken or due or idle_real >= self.resync):
                continue
            idle_real = 0.0
            try:
                for _ in range(100):
                    if not self.reconcile() or self._stop.is_set():
                        break
            except Exception:
                log.exception("cluster simulation pass failed")
