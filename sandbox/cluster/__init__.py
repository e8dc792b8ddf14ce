"""The sandbox cluster simulation: what GKE, Kueue, JobSet and the kubelet would do.

Controllers act directly on the sandbox Kubernetes API's
:class:`~sandbox.kubeapi.ObjectStore` on the simulated clock
(:class:`~sandbox.common.clock.SimClock`), with the labels, annotations, conditions
and events the real components use, so the production code sees a cluster that
behaves like GKE::

    clock = SimClock(speed=60)
    store = ObjectStore(clock=clock)
    gke_state = GkeState(clock)
    simulation = Simulation(store, clock, gke_state=gke_state).start()
    simulation.on_unschedulable(lambda pod, event: ...)
    ...
    simulation.stop()

Modules: :mod:`~sandbox.cluster.nodes` (node pools → Nodes),
:mod:`~sandbox.cluster.disruptions` (Spot preemptions and maintenance events),
:mod:`~sandbox.cluster.kueue` (Kueue v0.10.1's admission and preemption, with
:mod:`~sandbox.cluster.kueue_jobs`, :mod:`~sandbox.cluster.flavors`,
:mod:`~sandbox.cluster.preemption`, :mod:`~sandbox.cluster.clusterqueues`,
:mod:`~sandbox.cluster.workloads`, :mod:`~sandbox.cluster.workload_status`),
:mod:`~sandbox.cluster.jobset` and :mod:`~sandbox.cluster.jobs` (JobSet and Job
controllers, with their failure rules in :mod:`~sandbox.cluster.failurepolicy` and
:mod:`~sandbox.cluster.podfailure`),
:mod:`~sandbox.cluster.gc` (owner garbage collection),
:mod:`~sandbox.cluster.kube_scheduler` (binding), :mod:`~sandbox.cluster.runtime`
(pods run and finish), :mod:`~sandbox.cluster.simulation` (the wiring) and
:mod:`~sandbox.cluster.logsink` (FailedScheduling as Cloud Logging entries).
``python -m sandbox.cluster`` hosts it all in one process.
"""

from __future__ import annotations

from sandbox.cluster.gc import GarbageCollector
from sandbox.cluster.jobs import JobController
from sandbox.cluster.jobset import JobSetController
from sandbox.cluster.kube_scheduler import KubeScheduler
from sandbox.cluster.kueue import KueueController
from sandbox.cluster.logsink import PubSubSink, log_entry
from sandbox.cluster.nodes import ClusterRef, NodePoolController
from sandbox.cluster.runtime import PodRuntime
from sandbox.cluster.simulation import Simulation

__all__ = [
    "ClusterRef",
    "GarbageCollector",
    "JobController",
    "JobSetController",
    "KubeScheduler",
    "KueueController",
    "NodePoolController",
    "PodRuntime",
    "PubSubSink",
    "Simulation",
    "log_entry",
]
