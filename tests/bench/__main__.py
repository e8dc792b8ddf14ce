"""``make bench``: cold start, import cost and submit throughput, with a baseline.

Prints every figure and writes them to ``bench-results/submit.json``.

* import cost of each entry-point module, in a fresh interpreter that has already
  imported functions-framework (as the serving process has), next to the baseline
  module that imports every client at top;
* cold start: spawn a functions-framework process → first 2xx for a valid job
  request (which does create a JobSet), ours vs the baseline;
* warm submit throughput and p50/p99 latency through a functions-framework
  process against the sandbox Kubernetes API, for valid and rejected requests.
"""

from __future__ import annotations

import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sandbox.common.httpserver import free_port
from sandbox.kubeapi import install_crds, start_kube_api
from sandbox.pubsub import start_pubsub
from tests.bench.results import REPO, write_results

CONFIG = REPO / "tests" / "data" / "config.yaml"
PROJECT = "accelops-bench"
SAMPLES = int(os.environ.get("BENCH_SAMPLES", "7"))
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "400"))
CONCURRENCY = 8

ENTRY_POINTS = {"functions.main": REPO / "functions" / "main.py",
                "baseline": REPO / "tests" / "bench" / "baseline_main.py"}


def _request_body(i: int, valid: bool = True) -> bytes:
    body = {"name": f"bench-{i}", "team": "research",
            "image": "us-docker.pkg.dev/acme/train/llama:1.4",
            "tpu": {"type": "v5litepod-16" if valid else "v9-9", "slices": 1}}
    return json.dumps(body).encode()


def _envelope(message_id: str, data: bytes) -> bytes:
    return json.dumps({"message": {"data": base64.b64encode(data).decode(),
                                   "messageId": message_id, "attributes": {}},
                       "subscription": f"projects/{PROJECT}/subscriptions/bench"}).encode()


def _post(url: str, body: bytes, timeout: float = 30.0) -> int:
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _median(values: list[float]) -> float:
    return statistics.median(values)


def measure_import(module_path: Path, preload_framework: bool = True) -> float:
    """Seconds to import the module in a fresh interpreter (by default one that has
    already imported functions-framework, as the serving process has)."""
    code = (
        "import time, importlib.util\n"
        + ("import functions_framework\n" if preload_framework else "")
        +
        f"spec = importlib.util.spec_from_file_location('entry', {str(module_path)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "t = time.perf_counter(); spec.loader.exec_module(module)\n"
        "print(time.perf_counter() - t)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO, env=_env({}))
    return float(out.stdout.strip())


def _env(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), **extra}


def _spawn_function(source: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "functions_framework", "--target", "submit_job",
         "--source", str(source), "--signature-type", "cloudevent",
         "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(env), cwd=REPO)
    return process, f"http://127.0.0.1:{port}/"


def measure_cold_start(source: Path, env: dict[str, str], message_id: str) -> float:
    """Seconds from spawn to the first 2xx for a valid request."""
    body = _envelope(message_id, _request_body(int(message_id.split("-")[-1])))
    started = time.perf_counter()
    process, url = _spawn_function(source, env)
    try:
        while time.perf_counter() - started < 60:
            try:
                status = _post(url, body, timeout=30)
            except (ConnectionError, urllib.error.URLError):
                time.sleep(0.005)
                continue
            if 200 <= status < 300:
                return time.perf_counter() - started
            raise RuntimeError(f"first answer was HTTP {status}")
        raise RuntimeError("no answer within 60 s")
    finally:
        process.terminate()
        process.wait(timeout=10)


def measure_throughput(url: str, valid: bool, count: int) -> dict[str, float]:
    latencies: list[float] = []
    failures = 0
    lock = threading.Lock()
    prefix = "ok" if valid else "bad"

    def one(i: int) -> None:
        nonlocal failures
        body = _envelope(f"{prefix}-{i}", _request_body(i, valid))
        t = time.perf_counter()
        status = _post(url, body)
        elapsed = time.perf_counter() - t
        with lock:
            latencies.append(elapsed)
            if status != 200:
                failures += 1

    started = time.perf_counter()
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(one, range(count)))
    wall = time.perf_counter() - started
    latencies.sort()
    return {"requests": count, "failures": failures, "requests_per_s": count / wall,
            "p50_ms": 1000 * latencies[len(latencies) // 2],
            "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]}


def main() -> int:
    results: dict[str, Any] = {"samples": SAMPLES, "machine_cores": os.cpu_count()}

    print(f"import cost of entry-point modules (median of {SAMPLES} fresh interpreters, "
          "functions-framework already loaded)")
    imports = {name: _median([measure_import(path) for _ in range(SAMPLES)])
               for name, path in ENTRY_POINTS.items()}
    for name, seconds in imports.items():
        print(f"  {name:<16} {seconds * 1000:7.1f} ms")
    import_ratio = imports["functions.main"] / imports["baseline"]
    print(f"  ratio functions.main / baseline = {import_ratio:.2f}  (goal <= 0.30)")
    results["import_s"] = imports
    results["import_ratio"] = import_ratio
    print("the same, with functions-framework's own import counted (nothing preloaded)")
    whole = {name: _median([measure_import(path, preload_framework=False)
                            for _ in range(SAMPLES)]) for name, path in ENTRY_POINTS.items()}
    for name, seconds in whole.items():
        print(f"  {name:<16} {seconds * 1000:7.1f} ms")
    whole_ratio = whole["functions.main"] / whole["baseline"]
    print(f"  ratio functions.main / baseline = {whole_ratio:.2f}")
    results["import_with_framework_s"] = whole
    results["import_with_framework_ratio"] = whole_ratio

    kube = start_kube_api()
    install_crds(kube.store)
    pubsub = start_pubsub()
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = kube.write_kubeconfig(Path(tmp) / "kubeconfig")
        env = {"KUBECONFIG": str(kubeconfig), "PUBSUB_EMULATOR_HOST": pubsub.address,
               "ACCELOPS_CONFIG": str(CONFIG), "ACCELOPS_PROJECT": PROJECT}
        for namespace in ("research", "accelops-system"):  # the team's; the request locks'
            kube.store.create("", "namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": namespace}})
        pubsub.broker.create_topic(f"projects/{PROJECT}/topics/job-rejections")
        pubsub.broker.create_topic(f"projects/{PROJECT}/topics/slices-reconcile")
        try:
            print(f"\ncold start: spawn -> first 2xx of submit_job for a valid request "
                  f"(median of {SAMPLES}, interleaved)")
            cold: dict[str, list[float]] = {name: [] for name in ENTRY_POINTS}
            for i in range(SAMPLES):
                for name, path in ENTRY_POINTS.items():
                    cold[name].append(measure_cold_start(path, env, f"cold-{name}-{i}"))
            cold_median = {name: _median(v) for name, v in cold.items()}
            for name, seconds in cold_median.items():
                print(f"  {name:<16} {seconds * 1000:7.1f} ms   "
                      f"(min {min(cold[name]) * 1000:.0f}, max {max(cold[name]) * 1000:.0f})")
            cold_ratio = cold_median["functions.main"] / cold_median["baseline"]
            print(f"  ratio functions.main / baseline = {cold_ratio:.2f}  (goal <= 0.80)")
            results["cold_start_s"] = cold_median
            results["cold_start_ratio"] = cold_ratio

            print(f"\nwarm submit_job, {REQUESTS} requests, {CONCURRENCY} concurrent, "
                  "one functions-framework process, sandbox Kubernetes API")
            process, url = _spawn_function(ENTRY_POINTS["functions.main"], env)
            try:
                deadline = time.monotonic() + 30
                while True:
                    try:
                        _post(url, _envelope("warmup", _request_body(10**6)))
                        break
                    except (ConnectionError, urllib.error.URLError):
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.02)
                _post(url, _envelope("warmup-bad", _request_body(10**6, valid=False)))
                for label, valid in (("valid (JobSet created)", True),
                                     ("rejected (unknown TPU type)", False)):
                    figures = measure_throughput(url, valid, REQUESTS)
                    print(f"  {label:<28} {figures['requests_per_s']:7.1f} req/s   "
                          f"p50 {figures['p50_ms']:6.1f} ms   p99 {figures['p99_ms']:6.1f} ms   "
                          f"failures {figures['failures']}")
                    results["valid" if valid else "rejected"] = figures
            finally:
                process.terminate()
                process.wait(timeout=10)
        finally:
            kube.stop()
            pubsub.stop()

    write_results("submit", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
