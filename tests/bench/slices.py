"""``make bench`` (slices part): reconcile cost at scale, and slice latency on the sandbox.

1. Reconcile wall time and API calls for 1, 10, 100 and 1,000 admitted JobSets,
   in steady state (every slice has its pool, pods running: no change) and with
   every JobSet newly admitted (no pools yet: one create is due per JobSet), against
   in-process sandbox Kubernetes and GKE APIs over sockets. Baseline in the same
   run: a naive reconciler that reads per object (a pod list per JobSet, a get per
   node pool), the usual shape of a first controller.
2. On the running sandbox (separate processes, simulated clock): latency from
   Kueue admission to the node pool create request, and idle slice time from the
   job's end to the pool's delete request. Goal: idle ≤ one reconcile interval
   (60 s) + grace period (120 s).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sandbox.clock import SimClock
from sandbox.gke import GkeState, start_gke_api
from sandbox.kubeapi import start_kube_api
from shared import gke, kube
from shared.config import Settings
from shared.names import pool_name
from shared.slices.labels import pool_labels
from shared.slices.reconcile import reconcile
from tests.bench.results import REPO, write_results

CONFIG = REPO / "tests" / "data" / "config.yaml"
SIZES = [int(n) for n in os.environ.get("BENCH_SLICE_SIZES", "1,10,100,1000").split(",")]
PROJECT, LOCATION, CLUSTER = "bench", "us-central2-b", "tpu"
LIFECYCLE_SPEED = float(os.environ.get("BENCH_LIFECYCLE_SPEED", "30"))


def _jobset(i: int) -> dict[str, Any]:
    name = f"job-{i:04d}"
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": name, "namespace": "research",
                     "annotations": {"accelops.dev/tpu-type": "v5litepod-8"}},
        "spec": {"suspend": False, "replicatedJobs": [{"name": "slice", "replicas": 1,
                 "template": {"spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
                     "nodeSelector": {
                         "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
                         "cloud.google.com/gke-tpu-topology": "2x4"},
                     "containers": [{"name": "main", "image": "x", "resources": {
                         "limits": {"google.com/tpu": "8"}}}]}}}}}]},
    }


def _populate(kube_api: Any, state: GkeState, clock: SimClock, n: int, with_pools: bool) -> None:
    store = kube_api.store
    for ns in ("research", "accelops-system"):
        store.create("", "namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": ns}})
    for i in range(n):
        body = _jobset(i)
        store.create("jobset.x-k8s.io", "jobsets", body, namespace="research")
        if not with_pools:
            continue
        name = pool_name("research", body["metadata"]["name"], 0)
        state.create_node_pool(PROJECT, LOCATION, CLUSTER, {
            "name": name, "initialNodeCount": 1,
            "config": {"machineType": "ct5lp-hightpu-8t",
                       "labels": pool_labels("research", body["metadata"]["name"], 0)}})
        clock.advance(100)
        state.tick()
        node = f"gke-{name}-node"
        store.create("", "nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": node, "labels": {"cloud.google.com/gke-nodepool": name}}})
        store.create("", "pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"{body['metadata']['name']}-0", "namespace": "research",
            "labels": {"jobset.sigs.k8s.io/jobset-name": body["metadata"]["name"]}},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "x"}]},
            "status": {"phase": "Running"}}, namespace="research")


def naive_reconcile(settings: Settings, client: kube.KubeClient) -> None:
    """The baseline: the same decisions, read object by object."""
    for js in client.list(kube.JOBSETS):
        name = js["metadata"]["name"]
        client.list(kube.PODS, "research", label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
        path = (f"projects/{PROJECT}/locations/{LOCATION}/clusters/{CLUSTER}/nodePools/"
                f"{pool_name('research', name, 0)}")
        with contextlib.suppress(Exception):  # a missing pool is part of the answer
            gke.container_client(settings).get_node_pool(name=path, timeout=30)


def measure_scale(n: int, with_pools: bool) -> dict[str, float]:
    clock = SimClock(speed=1.0)
    kube_api = start_kube_api(clock=clock)
    state = GkeState(clock)
    state.add_cluster(PROJECT, LOCATION, CLUSTER, kube_api.url)
    gke_api = start_gke_api(state)
    try:
        _populate(kube_api, state, clock, n, with_pools)
        with tempfile.TemporaryDirectory() as tmp:
            env = {"KUBECONFIG": str(kube_api.write_kubeconfig(Path(tmp) / "kubeconfig")),
                   "ACCELOPS_GKE_ENDPOINT": gke_api.url, "ACCELOPS_CONFIG": str(CONFIG),
                   "ACCELOPS_PROJECT": PROJECT, "ACCELOPS_LOCATION": LOCATION,
                   "ACCELOPS_CLUSTER": CLUSTER}
            os.environ.update(env)
            kube.reset_client()
            settings = Settings.from_env()
            client = kube.get_client(settings)
            reconcile(settings)  # warm clients and the record
            clock.advance(1000)
            state.tick()
            figures: dict[str, float] = {}
            for label, run in (("accelops", lambda: reconcile(settings)),
                               ("naive", lambda: naive_reconcile(settings, client))):
                kube_before, gke_before = len(kube_api.request_log), len(gke_api.request_log)
                started = time.perf_counter()
                run()
                figures[f"{label}_ms"] = (time.perf_counter() - started) * 1000
                figures[f"{label}_calls"] = (len(kube_api.request_log) - kube_before
                                             + len(gke_api.request_log) - gke_before)
            return figures
    finally:
        gke_api.stop()
        kube_api.stop()
        kube.reset_client()


def measure_lifecycle(requests: list[tuple[str, int, int]]) -> dict[str, Any]:
    """Publish (TPU type, slices, run seconds) jobs; follow them until every pool is gone."""
    from sandbox.demo import follow_lifecycle
    from sandbox.runner import Sandbox
    from sandbox.topology import PROJECT as SANDBOX_PROJECT

    with tempfile.TemporaryDirectory() as tmp:
        sandbox = Sandbox(Path(tmp), speed=LIFECYCLE_SPEED).start(progress=False)
        try:
            with sandbox.client_env():
                from google.cloud import pubsub_v1  # type: ignore[attr-defined,unused-ignore]

                publisher = pubsub_v1.PublisherClient()
                topic = publisher.topic_path(SANDBOX_PROJECT, "job-requests")
                for i, (tpu, slices, run) in enumerate(requests):
                    body = {"name": f"bench-{i}", "team": "research",
                            "image": "us-docker.pkg.dev/acme/train/x:1",
                            "tpu": {"type": tpu, "slices": slices},
                            "env": {"ACCELOPS_SANDBOX_RUN_SECONDS": str(run)}}
                    publisher.publish(topic, json.dumps(body).encode()).result(timeout=10)
                timelines = follow_lifecycle(len(requests), timeout=300, progress=False)
        finally:
            sandbox.stop()
    to_create = [t.admission_to_create(s) for t in timelines for s in t.slices]
    idle = [t.idle(s) for t in timelines for s in t.slices]
    return {"speed": LIFECYCLE_SPEED, "slices": len(idle),
            "admission_to_create_s": [round(v, 1) for v in to_create if v is not None],
            "idle_s": [round(v, 1) for v in idle if v is not None]}


def main() -> int:
    results: dict[str, Any] = {"scale": {}}
    print("reconcile cost (one run, in process, sandbox Kubernetes and GKE APIs over sockets)")
    print(f"  {'JobSets':>7}  {'state':<13} {'accelops':>10} {'calls':>6}   "
          f"{'naive':>10} {'calls':>6}")
    for n in SIZES:
        for label, with_pools in (("steady", True), ("all new", False)):
            figures = measure_scale(n, with_pools)
            results["scale"][f"{n}-{label}"] = figures
            print(f"  {n:>7}  {label:<13} {figures['accelops_ms']:>8.1f}ms "
                  f"{figures['accelops_calls']:>6.0f}   {figures['naive_ms']:>8.1f}ms "
                  f"{figures['naive_calls']:>6.0f}")
    scenarios = {
        # One job at a time: nothing else holds reconcile_slices' one operation slot, so
        # the figures are accelops' own latency (trigger, reconcile, grace period).
        "one job": [("v5litepod-16", 1, 600)],
        # Jobs whose pool operations overlap: reconcile_slices keeps one operation in
        # flight per cluster, so slices also wait for each other's creates and deletes.
        "3 jobs, 4 slices": [("v5litepod-16", 2, 900), ("v4-32", 1, 600),
                             ("v5litepod-8", 1, 600)],
    }
    print(f"\nslice latency on the sandbox (simulated seconds, clock x{LIFECYCLE_SPEED:g})")
    results["lifecycle"] = {}
    for label, requests in scenarios.items():
        lifecycle = measure_lifecycle(requests)
        results["lifecycle"][label] = lifecycle
        create, idle = lifecycle["admission_to_create_s"], lifecycle["idle_s"]
        print(f"  {label}:")
        print(f"    admission -> create request: median {statistics.median(create):.0f}s, "
              f"max {max(create):.0f}s  {create}")
        print(f"    job end -> delete request (idle): median {statistics.median(idle):.0f}s, "
              f"max {max(idle):.0f}s  {idle}")
        print("    goal idle <= reconcile interval 60s + grace 120s = 180s: "
              f"{'met' if max(idle) <= 180 else 'not met'}")
    write_results("slices", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
