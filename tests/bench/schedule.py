"""``make bench`` (schedule part): pool_schedule's evening sweep over many clusters.

Ten clusters of twenty pools, every pool labelled with one schedule: autoscaled GPU
pools (autoscaling minimum to 0, then size 0), single-host TPU pools (size 0) and
multi-host TPU slices (deleted; recreated from their saved spec in the morning). One
sandbox GKE API hosts every cluster, with 100 ms of latency injected into every
Container API call through its control surface (``POST /sandbox/v1/faults``); each
cluster has its own in-process sandbox Kubernetes API whose Nodes follow its pools
(:class:`sandbox.cluster.nodes.NodePoolController`), reached through GKE discovery
as pool_schedule reaches every cluster that is not the environment's. Container API
calls are counted from the GKE API's request log, Kubernetes calls from each
cluster's API server log, both cleared before each tick.

Measured with ``run_tick`` (figures per tick):

1. a first tick before the evening (on-hours, nothing to do): the process builds
   one Kubernetes client per cluster, one ``get_cluster`` each;
2. the evening sweep (19:05), then a tick every 5 minutes until every pool is
   removed and a tick finds nothing to do — the no-change tick;
3. the morning restore (06:30: on-hours at 07:00 less the 30-minute lead time),
   ticks until every pool is back as it was, and again a no-change tick.

Baseline in the same run: the same first tick and evening sweep on a fresh,
identical fleet with ``tick.WORKERS = 1``, so every observation and every
operation waits for the one before.

Simulated time runs at 1/100 of real time during a tick and jumps to the next
tick's time between ticks: GKE's operations (30-180 simulated seconds) finish
between ticks, never during one, so both runs meet the same GKE state however
long their ticks take.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import random
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from sandbox.cluster.nodes import NodePoolController
from sandbox.cluster.objects import NODES
from sandbox.common.clock import SimClock
from sandbox.gke import (
    DEFAULT_MAX_CONCURRENT_OPERATIONS,
    Delays,
    GkeApiServer,
    GkeState,
    start_gke_api,
)
from sandbox.kubeapi import KubeApiServer, install_crds, start_kube_api
from shared import kube
from shared.config import AccelopsConfig, Settings, parse_config
from shared.jobspec.labels import LABEL_SCHEDULE
from shared.offhours import tick
from tests.bench.results import write_results

CLUSTERS = int(os.environ.get("BENCH_SCHEDULE_CLUSTERS", "10"))
POOLS = int(os.environ.get("BENCH_SCHEDULE_POOLS", "20"))
LATENCY = float(os.environ.get("BENCH_SCHEDULE_LATENCY", "0.1"))
PROJECT, LOCATION, SCHEDULE = "bench", "us-central2-b", "office"
BERLIN = ZoneInfo("Europe/Berlin")
FIRST = dt.datetime(2026, 11, 23, 18, 55, tzinfo=BERLIN)  # a Monday, on-hours
EVENING = dt.datetime(2026, 11, 23, 19, 5, tzinfo=BERLIN)  # off-hours since 19:00
MORNING = dt.datetime(2026, 11, 24, 6, 30, tzinfo=BERLIN)  # 07:00 less the lead time
INTERVAL = dt.timedelta(minutes=5)  # the tick's Cloud Scheduler interval
MAX_TICKS = 12  # per phase; a sweep still running after an hour is a failure
SIM_SPEED = 0.01  # during a tick (see above): its operations finish between ticks
# Reads per cluster and tick: one node-pool list; nodes, live pods, workloads and
# saved-state ConfigMaps from the cluster.
READS_PER_CLUSTER = 5

CONFIG = f"""
schedules:
  {SCHEDULE}:
    time_zone: Europe/Berlin
    on_hours:
      weekdays: ["07:00-19:00"]
pool_schedule:
  lead_time_minutes: 30
"""


def cluster_path(index: int) -> str:
    return f"projects/{PROJECT}/locations/{LOCATION}/clusters/cluster-{index:02d}"


def pool_specs(count: int) -> list[dict[str, Any]]:
    """One cluster's pools (Container API JSON), in fifths: two autoscaled GPU pools,
    two single-host TPU pools, one multi-host slice."""
    labels = {LABEL_SCHEDULE: SCHEDULE}
    specs: list[dict[str, Any]] = []
    for i in range(count):
        kind = i % 5
        if kind < 2:
            specs.append({
                "name": f"gpu-{i:02d}", "initialNodeCount": 2,
                "config": {"machineType": "g2-standard-8", "labels": labels,
                           "accelerators": [{"acceleratorCount": "1",
                                             "acceleratorType": "nvidia-l4"}]},
                "autoscaling": {"enabled": True, "minNodeCount": 1, "maxNodeCount": 4}})
        elif kind < 4:
            specs.append({"name": f"tpu-{i:02d}", "initialNodeCount": 1,
                          "config": {"machineType": "ct5lp-hightpu-4t", "labels": labels}})
        else:
            specs.append({"name": f"slice-{i:02d}", "initialNodeCount": 4,
                          "config": {"machineType": "ct5lp-hightpu-4t", "labels": labels},
                          "placementPolicy": {"type": "COMPACT", "tpuTopology": "4x4"}})
    return specs


def _control(gke_api: GkeApiServer, what: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(f"{gke_api.url}/sandbox/v1/{what}", method="POST",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        result: dict[str, Any] = json.loads(response.read())
        return result


@dataclass
class Fleet:
    """The clusters, their APIs, and pool_schedule's settings for them."""

    clock: SimClock
    state: GkeState
    gke_api: GkeApiServer
    kube_apis: list[KubeApiServer]
    settings: Settings
    config: AccelopsConfig
    records: list[Any] = field(default_factory=list)  # the audit rows published: counted

    def nodes(self) -> int:
        return sum(len(api.store.list(*NODES)) for api in self.kube_apis)

    def pools(self) -> dict[tuple[str, str], dict[str, Any]]:
        return {(path, pool["name"]): pool for path, pool in self.state.pools()}

    def advance_to(self, at: dt.datetime) -> None:
        """Jump simulated time to the tick's time; operations due by then finish and
        their Nodes follow before the tick reads them."""
        ahead = at.timestamp() - self.clock.time()
        if ahead > 0:
            self.clock.advance(ahead)
        self.state.tick()

    def stop(self) -> None:
        self.gke_api.stop()
        for api in self.kube_apis:
            api.stop()
        # The next fleet's GKE API may get this one's port, and with it these clients.
        kube.reset_client()


def start_fleet() -> Fleet:
    """Every cluster with its pools up and their Nodes registered, and the latency on."""
    clock = SimClock(speed=SIM_SPEED, start=FIRST - dt.timedelta(minutes=30))
    state = GkeState(clock)
    # Setup creates every pool at once, not five per cluster as GKE allows.
    state.max_concurrent_operations = POOLS
    config = parse_config(CONFIG + "  clusters: ["
                          + ", ".join(cluster_path(c) for c in range(CLUSTERS)) + "]\n")
    kube_apis = []
    for c in range(CLUSTERS):
        api = start_kube_api(clock=clock)
        install_crds(api.store)
        kube_apis.append(api)
        api.store.create("", "namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": config.slices.state_namespace}})
        path = cluster_path(c)
        state.add_cluster(PROJECT, LOCATION, path.rsplit("/", 1)[-1], api.url)
        nodes = NodePoolController(api.store, clock, cluster=path, rng=random.Random(c))
        state.subscribe(nodes.on_pool_event)
        for spec in pool_specs(POOLS):
            state.create_node_pool(PROJECT, LOCATION, path.rsplit("/", 1)[-1], spec)
    clock.advance(Delays().create_multi_host)
    state.tick()
    state.max_concurrent_operations = DEFAULT_MAX_CONCURRENT_OPERATIONS
    gke_api = start_gke_api(state)
    armed = _control(gke_api, "faults", {"kind": "latency", "seconds": LATENCY})
    if armed.get("latency") != LATENCY:
        raise RuntimeError(f"the sandbox GKE API did not take the latency: {armed}")
    # The environment's cluster is the first, but without a KUBECONFIG: every cluster
    # is found through GKE discovery, the way pool_schedule reaches the others.
    settings = Settings(config_source=None, project=PROJECT, location=LOCATION,
                        cluster="cluster-00", kubeconfig=None, gke_endpoint=gke_api.url)
    return Fleet(clock, state, gke_api, kube_apis, settings, config)


@dataclass(frozen=True)
class TickFigures:
    label: str
    at: str
    wall_s: float
    gke_calls: int
    gke_discovery: int  # get_cluster: building a Kubernetes client
    gke_operations: int  # create, delete, setSize, setAutoscaling
    gke_refused: int  # operations GKE refused: the cluster's operation quota, the pool busy
    kube_calls: int
    kube_writes: int
    pools_changed: int  # pools acted on: saved state written or an operation asked for
    operations_started: int
    audits: int

    @property
    def calls(self) -> int:
        return self.gke_calls + self.kube_calls

    @property
    def quiet(self) -> bool:
        return self.pools_changed == 0 and self.audits == 0


def measure_tick(fleet: Fleet, at: dt.datetime, label: str) -> TickFigures:
    fleet.advance_to(at)
    fleet.gke_api.request_log.clear()
    for api in fleet.kube_apis:
        api.request_log.clear()
    started = time.perf_counter()
    report = tick.run_tick(fleet.settings, fleet.config, publish=fleet.records.extend, at=at)
    wall = time.perf_counter() - started
    gke = fleet.gke_api.request_log.entries()
    kube_calls = [entry for api in fleet.kube_apis for entry in list(api.request_log)]
    operations = [r for r in gke if r.method in ("POST", "DELETE")]
    return TickFigures(
        label=label, at=f"{at:%a %H:%M}", wall_s=wall, gke_calls=len(gke),
        gke_discovery=sum(1 for r in gke if r.method == "GET" and "/nodePools" not in r.path),
        gke_operations=len(operations),
        gke_refused=sum(1 for r in operations if r.status >= 400),
        kube_calls=len(kube_calls),
        kube_writes=sum(1 for method, _ in kube_calls if method != "GET"),
        pools_changed=sum(1 for o in report.outcomes if o.plan.steps),
        operations_started=sum(1 for o in report.outcomes
                               if o.done and any(s.operation for s in o.plan.steps)),
        audits=report.audits)


def until_quiet(fleet: Fleet, first: dt.datetime, label: str) -> list[TickFigures]:
    """Ticks every INTERVAL from ``first`` until one finds nothing to do (included)."""
    ticks = [measure_tick(fleet, first, label)]
    while not ticks[-1].quiet:
        if len(ticks) == MAX_TICKS:
            raise RuntimeError(f"{label}: still changing pools after {MAX_TICKS} ticks")
        ticks.append(measure_tick(fleet, first + INTERVAL * len(ticks), "follow-up"))
    ticks[-1] = TickFigures(**{**asdict(ticks[-1]), "label": "no change"})
    return ticks


def _check_removed(fleet: Fleet) -> None:
    left = fleet.nodes()
    slices = [key for key, pool in fleet.pools().items() if key[1].startswith("slice-")]
    if left or slices:
        raise RuntimeError(f"after the evening: {left} Nodes and {len(slices)} slices left")


def _check_restored(fleet: Fleet, before: dict[tuple[str, str], dict[str, Any]],
                    nodes_before: int) -> None:
    after = fleet.pools()
    wrong = [key for key, pool in before.items()
             if key not in after or after[key]["status"] != "RUNNING"
             or after[key]["nodeCount"] != pool["nodeCount"]
             or after[key].get("autoscaling") != pool.get("autoscaling")]
    if wrong or fleet.nodes() != nodes_before:
        raise RuntimeError(f"after the morning: {len(wrong)} pools not as they were "
                           f"(e.g. {wrong[:3]}), {fleet.nodes()} of {nodes_before} Nodes")


@contextmanager
def workers(count: int) -> Iterator[None]:
    saved = tick.WORKERS
    tick.WORKERS = count
    try:
        yield
    finally:
        tick.WORKERS = saved


def run_day() -> tuple[list[TickFigures], dict[str, int]]:
    """First tick, evening sweep to the end, morning restore to the end."""
    fleet = start_fleet()
    try:
        before, nodes_before = fleet.pools(), fleet.nodes()
        ticks = [measure_tick(fleet, FIRST, "first tick")]
        ticks += until_quiet(fleet, EVENING, "evening sweep")
        _check_removed(fleet)
        ticks += until_quiet(fleet, MORNING, "morning restore")
        _check_restored(fleet, before, nodes_before)
        return ticks, {"pools": len(before), "nodes": nodes_before,
                       "audit_rows": len(fleet.records)}
    finally:
        fleet.stop()


def run_sequential_sweep() -> list[TickFigures]:
    fleet = start_fleet()
    try:
        with workers(1):
            return [measure_tick(fleet, FIRST, "first tick"),
                    measure_tick(fleet, EVENING, "evening sweep")]
    finally:
        fleet.stop()


def _row(t: TickFigures) -> str:
    return (f"  {t.label:<16} {t.at:<9} {t.wall_s:6.2f}s  {t.gke_calls:5d} "
            f"({t.gke_operations:3d} ops, {t.gke_refused:3d} refused)  {t.kube_calls:5d} "
            f"({t.kube_writes:3d} writes)  {t.pools_changed:5d}  {t.operations_started:5d}")


def _print_ticks(ticks: list[TickFigures]) -> None:
    print(f"  {'tick':<16} {'at':<9} {'wall':>7}  {'Container API calls':<26} "
          f"{'Kubernetes calls':<17} {'pools':>5}  {'ops':>5}")
    print(f"  {'':<16} {'':<9} {'':>7}  {'':<26} {'':<17} {'acted':>5}  {'begun':>5}")
    for t in ticks:
        print(_row(t))


def _phase(ticks: list[TickFigures], first: str) -> list[TickFigures]:
    """The ticks from ``first`` to the no-change tick that ends it (excluded)."""
    start = next(i for i, t in enumerate(ticks) if t.label == first)
    end = next(i for i in range(start, len(ticks)) if ticks[i].label == "no change")
    return ticks[start:end]


def _print_phases(ticks: list[TickFigures]) -> dict[str, dict[str, int]]:
    phases = {}
    for name, first in (("evening", "evening sweep"), ("morning", "morning restore")):
        part = _phase(ticks, first)
        figures = {"ticks": len(part),
                   "operation_calls": sum(t.gke_operations for t in part),
                   "operations_started": sum(t.operations_started for t in part),
                   "refused": sum(t.gke_refused for t in part),
                   "calls": sum(t.calls for t in part)}
        phases[name] = figures
        last = max(i for i, t in enumerate(part) if t.operations_started)
        figures["last_operation_tick"] = last + 1
        print(f"  {name}: the last operation began at {part[last].at}, tick {last + 1} "
              f"({last * INTERVAL.seconds // 60} min after the first); "
              f"{figures['operation_calls']} operation calls for "
              f"{figures['operations_started']} operations, {figures['refused']} refused "
              f"(GKE runs at most {DEFAULT_MAX_CONCURRENT_OPERATIONS} per cluster)")
    return phases


def _print_calls(ticks: list[TickFigures]) -> None:
    reads = READS_PER_CLUSTER * CLUSTERS
    print(f"  API calls per tick against clusters + pools acted on ({READS_PER_CLUSTER} "
          f"reads per cluster, {reads} in all):")
    for t in ticks:
        if t.label not in ("evening sweep", "morning restore", "no change"):
            continue
        beyond = t.calls - reads - t.gke_discovery
        per_pool = f"{beyond / t.pools_changed:.2f} per pool" if t.pools_changed else "none"
        print(f"    {t.label:<16} {t.calls:4d} calls = {reads} reads + {beyond:3d} for "
              f"{t.pools_changed:3d} pools ({per_pool}): {t.calls / CLUSTERS:.1f} per cluster")


def main() -> int:
    # One line per pool per tick otherwise: the figures are the output here.
    logging.getLogger("accelops.schedule").setLevel(logging.WARNING)
    # Imported before either run, so neither first tick pays for it.
    from google.cloud import container_v1  # noqa: F401

    mix = {kind: sum(1 for s in pool_specs(POOLS) if s["name"].startswith(kind))
           for kind in ("gpu", "tpu", "slice")}
    print(f"pool_schedule over {CLUSTERS} clusters x {POOLS} pools ({mix['gpu']} autoscaled "
          f"GPU, {mix['tpu']} single-host TPU, {mix['slice']} multi-host TPU slices each), "
          f"{LATENCY * 1000:.0f} ms injected per Container API call, {tick.WORKERS} workers")
    ticks, fleet_figures = run_day()
    _print_ticks(ticks)
    print()
    phases = _print_phases(ticks)
    print()
    _print_calls(ticks)

    print("\nbaseline: the first tick and the evening sweep again on a fresh, identical "
          "fleet, one call at a time (tick.WORKERS = 1)")
    sequential = run_sequential_sweep()
    _print_ticks(sequential)
    sweep = next(t for t in ticks if t.label == "evening sweep")
    if (sequential[1].gke_calls, sequential[1].kube_calls) != (sweep.gke_calls,
                                                                 sweep.kube_calls):
        print("  (not the same calls as the parallel sweep's)")
    speedup = {"first_tick": sequential[0].wall_s / ticks[0].wall_s,
               "evening_sweep": sequential[1].wall_s / sweep.wall_s}
    print(f"\n  evening sweep: parallel {sweep.wall_s:.2f} s, sequential "
          f"{sequential[1].wall_s:.2f} s: {speedup['evening_sweep']:.1f}x")
    print(f"  first tick (discovers every cluster): parallel {ticks[0].wall_s:.2f} s, "
          f"sequential {sequential[0].wall_s:.2f} s: {speedup['first_tick']:.1f}x")

    write_results("schedule", {
        "clusters": CLUSTERS, "pools_per_cluster": POOLS, "mix_per_cluster": mix,
        "latency_s": LATENCY, "workers": tick.WORKERS,
        "max_concurrent_operations": DEFAULT_MAX_CONCURRENT_OPERATIONS,
        "machine_cores": os.cpu_count(), **fleet_figures, "phases": phases,
        "ticks": [{**asdict(t), "calls": t.calls} for t in ticks],
        "sequential": [{**asdict(t), "calls": t.calls} for t in sequential],
        "speedup": speedup,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
