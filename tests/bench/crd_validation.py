"""``make bench`` (CRD part): what validating custom resources against their CRDs costs.

The sandbox Kubernetes API decodes (prunes, defaults) and validates every JobSet,
Workload and Kueue object written to it, the simulated controllers' writes included,
and benchmarks write thousands of JobSets. Measured in-process, per object, median of
many runs after a warm-up:

* loading and compiling the seven CRDs (once per process);
* a JobSet as submit_job renders it (v5litepod-16, two slices): decode and validate on
  create, on an update of its spec, and on a status update;
* the Workload the Kueue stand-in makes for it, on create and on the status update that
  admits it (its root CEL rules read the whole object);
* a ClusterQueue (CEL rules on its resource groups) on create.

Prints the figures and writes ``bench-results/crd_validation.json``.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable
from typing import Any

from sandbox.cluster.workloads import workload_body
from sandbox.kubeapi import crd_schema
from sandbox.kubeapi.custom_resources import admit
from tests.bench.results import write_results
from tests.job_objects import admitted, cluster_queue, finished
from tests.job_objects import jobset as submitted_jobset

RUNS = 400


def _median_ms(action: Callable[[], Any], runs: int = RUNS) -> float:
    for _ in range(20):
        action()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return round(statistics.median(samples) * 1000, 3)


def _create(group: str, resource: str, body: dict[str, Any]) -> Callable[[], Any]:
    return lambda: admit(group, resource, copy.deepcopy(body), None)


def _update(group: str, resource: str, new: dict[str, Any], old: dict[str, Any],
            subresource: str = "") -> Callable[[], Any]:
    return lambda: admit(group, resource, copy.deepcopy(new), old, subresource)


def main() -> None:
    start = time.perf_counter()
    crd_schema.load()
    load_s = round(time.perf_counter() - start, 2)

    js = submitted_jobset("bench", slices=2)
    js_stored = admit("jobset.x-k8s.io", "jobsets", copy.deepcopy(js), None)
    resumed = copy.deepcopy(js_stored)
    resumed["spec"]["suspend"] = False
    running = admitted(js_stored)
    done = finished(js_stored)

    workload = workload_body(js_stored, "research-queue", {"medium": 100})
    wl_stored = admit("kueue.x-k8s.io", "workloads", copy.deepcopy(workload), None)
    wl_admitted = copy.deepcopy(wl_stored)
    wl_admitted["status"] = {"conditions": [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
         "message": "Quota reserved", "lastTransitionTime": "2026-11-23T10:00:00Z"}],
        "admission": {"clusterQueue": "research-cq", "podSetAssignments": [
            {"name": "slice", "count": 8, "flavors": {"google.com/tpu": "v5e"},
             "resourceUsage": {"google.com/tpu": "32"}}]}}

    cq = cluster_queue("research-cq", 64)
    del cq["status"]

    figures = {
        "crd_load_s": load_s,
        "jobset_create_ms": _create("jobset.x-k8s.io", "jobsets", js),
        "jobset_spec_update_ms": _update("jobset.x-k8s.io", "jobsets", resumed, js_stored),
        "jobset_status_update_ms": _update("jobset.x-k8s.io", "jobsets", done, running,
                                           "status"),
        "workload_create_ms": _create("kueue.x-k8s.io", "workloads", workload),
        "workload_status_update_ms": _update("kueue.x-k8s.io", "workloads", wl_admitted,
                                             wl_stored, "status"),
        "cluster_queue_create_ms": _create("kueue.x-k8s.io", "clusterqueues", cq),
    }
    figures = {name: (_median_ms(value) if callable(value) else value)
               for name, value in figures.items()}
    width = max(map(len, figures))
    for name, value in figures.items():
        print(f"{name:<{width}}  {value}")
    write_results("crd_validation", figures)


if __name__ == "__main__":
    main()
