"""``make bench`` (jobs part): ``jobs list`` and ``jobs status`` at 10, 100 and 1,000 JobSets.

A sandbox Kubernetes API (in process, real sockets) holds N JobSets of two teams as
submit_job renders them, with what Kueue and JobSet make of them: a quarter queued
(a pending Workload), a quarter provisioning (admitted, the first slice's pods
pending), a quarter running (2 slices x 4 pods running), a quarter succeeded (pods
Succeeded). A sandbox GKE API holds a node pool per slice that has one. Objects are
written straight into the store: simulating a thousand jobs is not what is measured.

Measured, for each N, with the lookups the CLI and the jobs API call (warm clients):

* ``jobs list`` (every team) and ``jobs status`` of the newest queued job (the most
  reads: its queue and every Workload ahead of it), of a running job (its pods, the
  slice record, GKE's node pools) and of an id nothing holds;
* requests at the wire: Kubernetes from the API server's request log, Container API
  from the GKE API's; BigQuery is not configured, so any query would fail (it is
  asked only for ids no JobSet holds, one query);
* wall time, median of several runs; and the cold CLI (``python -m shared.cli jobs
  ... --json``, a new process: imports, config, clients) once per N.

Baseline in the same run, on the same objects and clients: the naive ways — list as
one GET per JobSet plus a Workload lookup per JobSet, and status by reading every
JobSet (to find the request id), every Workload and every pod of the cluster.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sandbox.common.clock import SimClock
from sandbox.gke import GkeApiServer, GkeState, start_gke_api
from sandbox.kubeapi import KubeApiServer, install_crds, start_kube_api
from shared import kube
from shared.config import AccelopsConfig, Settings, parse_config
from shared.errors import NotFoundError
from shared.jobs.lookup import (
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    job_status,
    list_jobs,
    team_namespaces,
)
from shared.jobs.status.explain import Observation, explain, summarize
from shared.jobspec.labels import ANNOTATION_REQUEST_ID, KUEUE_JOB_UID_LABEL
from shared.kube import JOBSETS, PODS, WORKLOADS
from shared.names import pool_name
from shared.slices.record import load_record
from tests.bench.results import REPO, write_results
from tests.job_objects import (
    admitted,
    cluster_queue,
    finished,
    jobset,
    local_queue,
    namespaces,
    pods,
    workload,
    write,
)

SIZES = tuple(int(n) for n in os.environ.get("BENCH_JOBS_SIZES", "10,100,1000").split(","))
SAMPLES = int(os.environ.get("BENCH_JOBS_SAMPLES", "5"))
PROJECT, LOCATION, CLUSTER = "accelops-bench", "us-central2-b", "tpu"
CONFIG_TEXT = """
teams:
  research: {namespace: research, queue: research-queue, tpu_chips: 64}
  inference: {namespace: inference, queue: inference-queue, tpu_chips: 64}
"""
PENDING = ("couldn't assign flavors to pod set slice: insufficient unused quota for "
           "google.com/tpu in flavor tpu-v5-lite-podslice, 32 more needed")
STATES = ("queued", "provisioning", "running", "succeeded")


class Ticking:
    """The store's clock, a second later at every reading: creation times are distinct
    (and Kueue's order by them well defined)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@dataclass
class World:
    kube_api: KubeApiServer
    gke_api: GkeApiServer
    settings: Settings
    config: AccelopsConfig
    config_file: Path
    kubeconfig: Path
    targets: dict[str, str]  # what -> request id


def _pool_spec(name: str) -> dict[str, Any]:
    return {"name": name, "initialNodeCount": 4,
            "config": {"machineType": "ct5lp-hightpu-4t"},
            "placementPolicy": {"type": "COMPACT", "tpuTopology": "4x4"}}


def build(n: int, directory: Path) -> World:
    """N JobSets in the four states (round robin over states and teams)."""
    kube_api = start_kube_api(clock=Ticking())
    install_crds(kube_api.store)
    store = kube_api.store
    config = parse_config(CONFIG_TEXT)
    namespaces(store, "research", "inference", config.slices.state_namespace)
    for team in ("research", "inference"):
        write(store, cluster_queue(f"{team}-cluster-queue", 64, reserved=64))
        write(store, local_queue(team, f"{team}-queue", f"{team}-cluster-queue"))
    state = GkeState(SimClock(speed=1.0))
    state.max_concurrent_operations = 10 * n + 10
    state.add_cluster(PROJECT, LOCATION, CLUSTER, kube_api.url)
    targets: dict[str, str] = {}
    for i in range(n):
        kind, team = STATES[i % 4], ("research", "inference")[i // 4 % 2]
        request_id = f"bench-{kind}-{i}"
        body = jobset(request_id, team=team, config=config)
        if kind != "queued":
            body = admitted(body, ready=2 if kind == "running" else 0) if kind != "succeeded" \
                else finished(body)
        created = write(store, body)
        queue = f"{team}-cluster-queue"
        write(store, workload(created, admitted_in=None if kind == "queued" else queue,
                              message=PENDING if kind == "queued" else None))
        if kind != "queued":
            phase = {"provisioning": "Pending", "running": "Running",
                     "succeeded": "Succeeded"}[kind]
            made = pods(created, phase=phase)
            for pod in made[:4] if kind == "provisioning" else made:
                write(store, pod)
            for index in range(1 if kind == "provisioning" else 2):
                state.create_node_pool(PROJECT, LOCATION, CLUSTER, _pool_spec(
                    pool_name(team, created["metadata"]["name"], index)))
        targets[kind] = request_id
    config_file = directory / "config.yaml"
    config_file.write_text(CONFIG_TEXT)
    kubeconfig = kube_api.write_kubeconfig(directory / "kubeconfig")
    gke_api = start_gke_api(state)
    settings = Settings(config_source=str(config_file), project=PROJECT, location=LOCATION,
                        cluster=CLUSTER, kubeconfig=str(kubeconfig), gke_endpoint=gke_api.url)
    return World(kube_api, gke_api, settings, config, config_file, kubeconfig, targets)


# ----------------------------------------------------------------------- baseline
def naive_list(settings: Settings, config: AccelopsConfig) -> list[Any]:
    """List names, then GET each JobSet and look its Workload up: 1 + 2N requests."""
    client = kube.get_client(settings)
    teams = team_namespaces(config)
    out = []
    for item in client.list(JOBSETS):
        meta = item["metadata"]
        one = client.get(JOBSETS, meta["name"], meta["namespace"])
        found = client.list(WORKLOADS, meta["namespace"],
                            label_selector=f"{KUEUE_JOB_UID_LABEL}={one['metadata']['uid']}")
        out.append(summarize(one, found[0] if found else None, teams))
    return out


def naive_status(settings: Settings, config: AccelopsConfig, request_id: str) -> Any:
    """Read everything and pick: every JobSet (to find the request id), every Workload
    and every pod of the cluster, then the queues, the record and the pools."""
    from shared import gke

    client = kube.get_client(settings)
    every = client.list(JOBSETS)
    js = next(j for j in every
              if j["metadata"]["annotations"].get(ANNOTATION_REQUEST_ID) == request_id)
    meta = js["metadata"]
    workloads = client.list(WORKLOADS)
    mine = next((w for w in workloads
                 if w["metadata"]["labels"].get(KUEUE_JOB_UID_LABEL) == meta["uid"]), None)
    all_pods = client.list(PODS)
    own = [p for p in all_pods if p["metadata"]["namespace"] == meta["namespace"]
           and (p["metadata"].get("labels") or {}).get("jobset.sigs.k8s.io/jobset-name")
           == meta["name"]]
    queues = client.list(LOCAL_QUEUES)
    local = next(q for q in queues if q["metadata"]["namespace"] == meta["namespace"])
    record = load_record(client, config.slices.state_namespace)
    pools = {p.name: p.status for p in gke.list_node_pools(settings)}
    return explain(Observation(
        jobset=js, now=time.time(), workload=mine, pods=own, teams=team_namespaces(config),
        local_queue=local, local_queues=queues, workloads=workloads, pools=pools,
        cluster_queue=client.get(CLUSTER_QUEUES, local["spec"]["clusterQueue"]),
        operations=record.operations))


# ---------------------------------------------------------------------- measuring
@dataclass(frozen=True)
class Figure:
    jobsets: int
    what: str
    method: str  # "accelops" or "baseline"
    kubernetes_requests: int
    gke_requests: int
    seconds_median: float
    seconds_max: float
    cli_seconds: float | None = None


def measure(world: World, what: str, method: str, call: Callable[[], Any],
            samples: int) -> Figure:
    world.kube_api.request_log.clear()
    world.gke_api.request_log.clear()
    call()
    kube_requests = len(world.kube_api.request_log)
    gke_requests = len(world.gke_api.request_log)
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return Figure(_size(world), what, method, kube_requests,
                  gke_requests, statistics.median(times), max(times))


def _size(world: World) -> int:
    return len(world.kube_api.store.list("jobset.x-k8s.io", "jobsets"))


def cold_cli(world: World, *args: str) -> float:
    """Seconds for a new ``accelops jobs ...`` process, as a user runs it."""
    env = {**os.environ, "KUBECONFIG": str(world.kubeconfig),
           "ACCELOPS_CONFIG": str(world.config_file), "ACCELOPS_PROJECT": PROJECT,
           "ACCELOPS_LOCATION": LOCATION, "ACCELOPS_CLUSTER": CLUSTER,
           "ACCELOPS_GKE_ENDPOINT": world.gke_api.url}
    env.pop("BIGQUERY_EMULATOR_HOST", None)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "shared.cli", "jobs", *args, "--json"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"accelops jobs {' '.join(args)} failed: {done.stderr}")
    return time.perf_counter() - start


def unknown(settings: Settings, config: AccelopsConfig) -> None:
    try:
        job_status(settings, config, "never-submitted")
    except NotFoundError:
        return
    raise RuntimeError("an unknown id was found")


def run_size(n: int) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="bench-jobs-") as directory:
        world = build(n, Path(directory))
        kube.reset_client()
        settings, config = world.settings, world.config
        queued, running = world.targets["queued"], world.targets["running"]
        slow = max(1, SAMPLES // 2) if n >= 1000 else SAMPLES
        try:
            figures = [
                measure(world, "list", "accelops", lambda: list_jobs(settings, config),
                        SAMPLES),
                measure(world, "list", "baseline", lambda: naive_list(settings, config), slow),
                measure(world, "status queued", "accelops",
                        lambda: job_status(settings, config, queued), SAMPLES),
                measure(world, "status queued", "baseline",
                        lambda: naive_status(settings, config, queued), slow),
                measure(world, "status running", "accelops",
                        lambda: job_status(settings, config, running), SAMPLES),
                measure(world, "status running", "baseline",
                        lambda: naive_status(settings, config, running), slow),
                measure(world, "status unknown id", "accelops",
                        lambda: unknown(settings, config), SAMPLES),
            ]
            cli = {"list": cold_cli(world, "list"),
                   "status queued": cold_cli(world, "status", queued),
                   "status running": cold_cli(world, "status", running)}
        finally:
            world.gke_api.stop()
            world.kube_api.stop()
            kube.reset_client()
    return [Figure(**{**asdict(f), "cli_seconds": cli.get(f.what)})
            if f.method == "accelops" else f for f in figures]


def table(figures: list[Figure]) -> str:
    rows = [("JobSets", "lookup", "method", "k8s requests", "GKE requests", "median s",
             "max s", "cold CLI s")]
    rows += [(str(f.jobsets), f.what, f.method, str(f.kubernetes_requests),
              str(f.gke_requests), f"{f.seconds_median:.3f}", f"{f.seconds_max:.3f}",
              f"{f.cli_seconds:.2f}" if f.cli_seconds is not None else "-") for f in figures]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.rjust(w) if i in (0, 3, 4, 5, 6, 7) else c.ljust(w)
                               for i, (c, w) in enumerate(zip(row, widths, strict=True)))
                     for row in rows)


def main() -> int:
    figures: list[Figure] = []
    for n in SIZES:
        started = time.perf_counter()
        figures += run_size(n)
        print(f"{n} JobSets measured in {time.perf_counter() - started:.1f}s", flush=True)
    print()
    print(table(figures))
    ours = [f for f in figures if f.method == "accelops"]
    for what in sorted({f.what for f in ours}):
        calls = {(f.kubernetes_requests, f.gke_requests) for f in ours if f.what == what}
        verdict = "constant" if len(calls) == 1 else f"NOT constant: {sorted(calls)}"
        print(f"{what}: API requests {verdict} across {', '.join(map(str, SIZES))} JobSets")
    write_results("jobs", {"sizes": list(SIZES), "samples": SAMPLES,
                           "figures": [asdict(f) for f in figures]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
