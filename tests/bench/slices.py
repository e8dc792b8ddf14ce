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
   (60 s) + grace period (120 s). In the demo's scenario, also how far apart the
   slices of each multi-slice JobSet became ready (goal: ≤ one reconcile interval,
   since the job runs only once its last slice is there and the others wait idle).
3. A 30-minute stockout (every create accepted meanwhile ends in GCE_STOCKOUT) while
   a 3-slice JobSet is admitted: its create requests in the window, next to the
   reconcile ticks in the window (a controller retrying every tick would make one
   attempt per tick) and the attempts reconcile_slices' backoff allows; then how long
   after the stockout's end its slices were requested and ready.
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

import yaml

from sandbox.common.clock import SimClock
from sandbox.gke import GkeState, start_gke_api
from sandbox.kubeapi import install_crds, start_kube_api
from sandbox.supervisor.runner import Sandbox
from shared import gke, kube
from shared.config import Settings, load_config
from shared.jobspec.labels import pool_labels
from shared.names import pool_name
from shared.slices.reconcile import reconcile
from tests.bench.polling import wait_until
from tests.bench.results import REPO, write_results
from tests.slice_faults import (
    attempts_of,
    control,
    create_requests,
    operations,
    reconcile_runs,
    stockout_attempts,
)

CONFIG = REPO / "tests" / "data" / "config.yaml"
SIZES = [int(n) for n in os.environ.get("BENCH_SLICE_SIZES", "1,10,100,1000").split(",")]
PROJECT, LOCATION, CLUSTER = "bench", "us-central2-b", "tpu"
LIFECYCLE_SPEED = float(os.environ.get("BENCH_LIFECYCLE_SPEED", "30"))
STOCKOUT_SPEED = float(os.environ.get("BENCH_STOCKOUT_SPEED", "60"))
STOCKOUT_SECONDS = 1800.0
TICK = 60.0  # simulated seconds between the scheduler's reconcile_slices runs
DEMO_REQUESTS = REPO / "sandbox" / "requests"


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
    install_crds(kube_api.store)
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


def request(i: int, tpu: str, slices: int, run_seconds: int) -> dict[str, Any]:
    return {"name": f"bench-{i}", "team": "research",
            "image": "us-docker.pkg.dev/acme/train/x:1",
            "tpu": {"type": tpu, "slices": slices},
            "env": {"ACCELOPS_SANDBOX_RUN_SECONDS": str(run_seconds)}}


def publish(bodies: list[dict[str, Any]]) -> None:
    from google.cloud import pubsub_v1  # type: ignore[attr-defined,unused-ignore]

    from sandbox.topology import PROJECT as SANDBOX_PROJECT

    publisher = pubsub_v1.PublisherClient()
    try:
        topic = publisher.topic_path(SANDBOX_PROJECT, "job-requests")
        for body in bodies:
            publisher.publish(topic, json.dumps(body).encode()).result(timeout=10)
    finally:
        publisher.transport.close()


def measure_lifecycle(bodies: list[dict[str, Any]]) -> dict[str, Any]:
    """Publish job requests; follow them until every pool is gone."""
    from sandbox.demos.demo import follow_lifecycle

    with tempfile.TemporaryDirectory() as tmp:
        sandbox = Sandbox(Path(tmp), speed=LIFECYCLE_SPEED).start(progress=False)
        try:
            with sandbox.client_env():
                publish(bodies)
                timelines = follow_lifecycle(len(bodies), timeout=600, progress=False)
        finally:
            sandbox.stop()
    to_create = [t.admission_to_create(s) for t in timelines for s in t.slices]
    idle = [t.idle(s) for t in timelines for s in t.slices]
    return {"speed": LIFECYCLE_SPEED, "slices": len(idle),
            "admission_to_create_s": [round(v, 1) for v in to_create if v is not None],
            "idle_s": [round(v, 1) for v in idle if v is not None],
            "multi_slice": {t.name: {"slices": len(t.slices),
                                     "create_spread_s": round(t.create_spread or 0.0, 1),
                                     "ready_spread_s": round(t.ready_spread or 0.0, 1)}
                            for t in timelines if len(t.slices) > 1}}


def demo_requests() -> list[dict[str, Any]]:
    """The job requests `accelops demo` publishes (its valid ones)."""
    from sandbox.demos.demo import VALID

    return [json.loads((DEMO_REQUESTS / name).read_text()) for name in VALID]


def _wait(condition: Any, what: str, timeout: float = 300.0) -> None:
    wait_until(condition, what, timeout)


def _all_finished(count: int) -> bool:
    from shared.slices.observe import finished_at

    jobsets = kube.get_client(Settings.from_env()).list(kube.JOBSETS)
    return len(jobsets) >= count and all(finished_at(j) is not None for j in jobsets)


def _no_backoff_config(directory: Path) -> Path:
    """The sandbox's config with a 1-second backoff: a failed create is retried as soon
    as its pools in ERROR are gone (the baseline)."""
    from sandbox.supervisor.runner import DEFAULT_CONFIG

    config = yaml.safe_load(DEFAULT_CONFIG.read_text())
    config["slices"] = {**config.get("slices", {}), "backoff_initial_seconds": 1,
                        "backoff_max_seconds": 1}
    path = directory / "no-backoff.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def measure_stockout(backoff: bool = True) -> dict[str, Any]:
    """A 3-slice JobSet admitted at the start of a 30-minute stockout."""
    from sandbox.demos.demo import follow_lifecycle
    from sandbox.supervisor.runner import DEFAULT_CONFIG

    with tempfile.TemporaryDirectory() as tmp:
        config = DEFAULT_CONFIG if backoff else _no_backoff_config(Path(tmp))
        sandbox = Sandbox(Path(tmp) / "sandbox", config=config,
                          speed=STOCKOUT_SPEED).start(progress=False)
        try:
            with sandbox.client_env():
                # A job first, so that no function's cold start eats into the window.
                publish([request(0, "v5litepod-8", 1, 60)])
                follow_lifecycle(1, timeout=300, progress=False)
                opened = control(sandbox, "faults", {"kind": "stockout",
                                                     "for_seconds": STOCKOUT_SECONDS})
                end = max(w["until"] for w in opened["stockouts"])
                start = end - STOCKOUT_SECONDS
                publish([request(1, "v5litepod-16", 3, 300)])
                # Waiting on the Kubernetes API only: a node-pool list here would be
                # counted as a reconcile run.
                _wait(lambda: _all_finished(2), "the job to finish after the stockout")
                [timeline] = [t for t in follow_lifecycle(2, timeout=300, progress=False)
                              if len(t.slices) == 3]
                requested = create_requests(sandbox, start, end)
                runs = reconcile_runs(sandbox, start, end)
                pools = {piece.pool for piece in timeline.slices}
                attempts = attempts_of([op for op in operations(sandbox)
                                        if op["pool"] in pools])
                settings = load_config(str(sandbox.config)).slices
        finally:
            sandbox.stop()
    created = [op for attempt in attempts for op in attempt if not op["error_status"]]
    failed = [a for a in attempts if any(op["error_status"] for op in a)]
    allowed = stockout_attempts(STOCKOUT_SECONDS, settings)
    return {"speed": STOCKOUT_SPEED, "window_s": STOCKOUT_SECONDS, "slices": 3,
            "create_requests": len(requested), "failed_attempts": len(failed),
            "ticks": int(STOCKOUT_SECONDS // TICK), "reconcile_runs": runs,
            "backoff_attempts": allowed, "backoff_creates": 3 * allowed,
            "after_end_requested_s": round(min(op["start_time"] for op in created) - end, 1),
            "after_end_ready_s": round(max(op["end_time"] for op in created) - end, 1),
            "backoff_max_s": settings.backoff_max_seconds}


def _print_lifecycle(label: str, lifecycle: dict[str, Any]) -> None:
    create, idle = lifecycle["admission_to_create_s"], lifecycle["idle_s"]
    print(f"  {label}:")
    print(f"    admission -> create request: median {statistics.median(create):.0f}s, "
          f"max {max(create):.0f}s  {create}")
    print(f"    job end -> delete request (idle): median {statistics.median(idle):.0f}s, "
          f"max {max(idle):.0f}s  {idle}")
    print("    goal idle <= reconcile interval 60s + grace 120s = 180s: "
          f"{'met' if max(idle) <= 180 else 'not met'}")
    for name, job in lifecycle["multi_slice"].items():
        spread = job["ready_spread_s"]
        print(f"    {name} ({job['slices']} slices): requested within "
              f"{job['create_spread_s']:.0f}s, ready within {spread:.0f}s; goal <= one "
              f"reconcile interval {TICK:.0f}s: {'met' if spread <= TICK else 'not met'}")


def _print_stockout(figures: dict[str, Any], baseline: dict[str, Any]) -> None:
    print(f"\na {figures['window_s'] / 60:.0f}-minute stockout while a "
          f"{figures['slices']}-slice JobSet is admitted (clock x{figures['speed']:g})")
    print(f"  reconcile ticks in the window: {figures['ticks']} "
          f"({figures['reconcile_runs']} reconcile runs, counting other triggers)")
    print(f"  create requests in the window: {figures['create_requests']} "
          f"({figures['failed_attempts']} attempts); baseline without backoff (retried as "
          f"soon as the pools in ERROR are gone): {baseline['create_requests']} "
          f"({baseline['failed_attempts']} attempts)")
    print(f"  the backoff allows at most {figures['backoff_attempts']} attempts = "
          f"{figures['backoff_creates']} create requests; goal bounded by the backoff, not "
          f"the ticks: "
          f"{'met' if figures['create_requests'] <= figures['backoff_creates'] else 'not met'}")
    print(f"  after the stockout ended: slices requested after "
          f"{figures['after_end_requested_s']:.0f}s, all ready after "
          f"{figures['after_end_ready_s']:.0f}s (backoff cap {figures['backoff_max_s']}s); "
          f"baseline {baseline['after_end_requested_s']:.0f}s and "
          f"{baseline['after_end_ready_s']:.0f}s")


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
        # One job: nothing else holds an operation slot, so the figures are accelops'
        # own latency (trigger, reconcile, grace period).
        "one job": [request(0, "v5litepod-16", 1, 600)],
        # Jobs whose pool operations overlap, within reconcile_slices' limit of
        # operations in flight.
        "3 jobs, 4 slices": [request(0, "v5litepod-16", 2, 900), request(1, "v4-32", 1, 600),
                             request(2, "v5litepod-8", 1, 600)],
        # `accelops demo`'s five jobs: 9 slices, more than the limit at once.
        "the demo's jobs": demo_requests(),
    }
    print(f"\nslice latency on the sandbox (simulated seconds, clock x{LIFECYCLE_SPEED:g})")
    results["lifecycle"] = {}
    for label, bodies in scenarios.items():
        results["lifecycle"][label] = measure_lifecycle(bodies)
        _print_lifecycle(label, results["lifecycle"][label])
    results["stockout"] = measure_stockout()
    results["stockout_without_backoff"] = measure_stockout(backoff=False)
    _print_stockout(results["stockout"], results["stockout_without_backoff"])
    write_results("slices", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
