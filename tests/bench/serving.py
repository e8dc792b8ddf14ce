"""``make bench``: serving models from uploads, on the sandbox with real Triton pods.

Prints every figure and writes them to ``bench-results/serving.json``:

* **manifest finalized → model ready**, per version: from the manifest's write to
  (a) the ledger recording the rollout ready and (b) the first answer of the new
  version through the Service — wall time on the sandbox (real Triton processes
  loading from fake-gcs-server, the cluster simulation, Pub/Sub push);
* **the function's own time per event** — deploy_model run in process (through
  functions-framework's test client, against the same sandbox endpoints) for events
  that start a rollout, duplicate deliveries, and artifact events it ignores;
* **a version switch under load**: closed-loop clients through the Service, before
  the upload (the baseline, same run) and from the upload until only the new
  version answers: failed requests (goal 0) and p99 during the switch against
  steady state (goal: at most twice). Percentiles are computed here from every request's own
  measured latency.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox.demos.serving import MODEL, NAMESPACE, upload_model_version
from sandbox.supervisor.runner import Sandbox
from tests.bench.results import REPO, write_results

CLIENTS = int(os.environ.get("BENCH_SERVING_CLIENTS", "4"))
STEADY_SECONDS = float(os.environ.get("BENCH_SERVING_STEADY", "10"))
EVENTS = int(os.environ.get("BENCH_SERVING_EVENTS", "30"))
READY_SECONDS = 120.0


@dataclass
class Sample:
    at: float
    ms: float
    version: str | None  # None: the request failed
    error: str = ""


@dataclass
class Clients:
    """Closed-loop clients asking the Service for completions until stopped."""

    url: str
    samples: list[Sample] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def _loop(self) -> None:
        body = json.dumps({"inputs": [{"name": "text_input", "shape": [1, 1],
                                       "datatype": "BYTES", "data": ["bench prompt"]}]}).encode()
        while not self.stop.is_set():
            started = time.perf_counter()
            request = urllib.request.Request(
                f"{self.url}/v2/models/{MODEL}/infer", data=body,
                headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    version = str(json.loads(response.read())["model_version"])
                self.samples.append(Sample(time.time(), (time.perf_counter() - started) * 1e3,
                                           version))
            except (urllib.error.URLError, OSError, KeyError, ValueError) as exc:
                self.samples.append(Sample(time.time(), (time.perf_counter() - started) * 1e3,
                                           None, str(exc)[:200]))

    def start(self) -> Clients:
        for index in range(CLIENTS):
            thread = threading.Thread(target=self._loop, name=f"client-{index}", daemon=True)
            thread.start()
            self.threads.append(thread)
        return self

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=15)


def _p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 \
        else (values[0] if values else 0.0)


def _window(samples: list[Sample], start: float, end: float) -> dict[str, Any]:
    inside = [s for s in samples if start <= s.at < end]
    ok = [s.ms for s in inside if s.version is not None]
    return {"requests": len(inside), "failed": len(inside) - len(ok),
            "p50_ms": round(_p(ok, 50), 2), "p99_ms": round(_p(ok, 99), 2),
            "seconds": round(end - start, 2),
            "errors": sorted({s.error for s in inside if s.version is None})[:5]}


def _ledger() -> Any:
    from shared import kube
    from shared.serving.ledger import load_ledger

    return load_ledger(kube.get_client(), NAMESPACE, MODEL)


def _wait_ready(version: str) -> float:
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        ledger = _ledger()
        current = ledger.find(ledger.current)
        if current is not None and current.version == version:
            return time.time()
        time.sleep(0.1)
    raise RuntimeError(f"{version} not ready within {READY_SECONDS:.0f} s")


def _first_answer(clients: Clients, number: str, since: float) -> float | None:
    return next((s.at for s in clients.samples if s.at >= since and s.version == number), None)


def _service_url() -> str:
    from sandbox.cluster.objects import loopback_url
    from shared import kube
    from shared.kube import SERVICES

    return loopback_url(kube.get_client().get(SERVICES, MODEL, NAMESPACE))


def _function_times(sandbox: Sandbox) -> dict[str, Any]:
    """deploy_model in process on the sandbox's endpoints: ms per event by kind."""
    import functions_framework

    from shared import kube, pubsub, storage
    from shared.serving.upload import build_manifest, upload_version
    from tests.serving_fixtures import notification_envelope

    for module in (kube, pubsub, storage):
        module.reset_client()
    os.environ["KUBECONFIG"] = str(sandbox.access.kubeconfig("deploy_model"))
    app = functions_framework.create_app("deploy_model", str(REPO / "functions" / "main.py"),
                                         "cloudevent").test_client()
    # A bucket of its own: the models bucket's notifications would deliver the same
    # events to the sandbox's deploy_model too, and the two would race on each ledger.
    from sandbox.storage import create_bucket

    bucket = "bench-function-events"
    create_bucket(sandbox.storage_url, bucket, "accelops-local")
    times: dict[str, list[float]] = {"new rollout": [], "duplicate": [], "artifact": []}
    files = {"config.pbtxt": b'backend: "python"\n', "model.py": b"# bench\n"}
    for index in range(EVENTS):
        model = f"bench-{index % 5}"
        manifest = build_manifest(files, server="triton", model=model,
                                  version=f"v{index + 1}", deployment=f"bench-{index % 5}")
        name, generation = upload_version(bucket, files, manifest)
        for kind, (obj, gen) in (("new rollout", (name, generation)),
                                 ("duplicate", (name, generation)),
                                 ("artifact", (name.replace("deploy.yaml", "model.py"),
                                               generation))):
            started = time.perf_counter()
            status = app.post("/", json=notification_envelope(bucket, obj, gen,
                                                              message_id=f"b{index}{kind[0]}"),
                              ).status_code
            times[kind].append((time.perf_counter() - started) * 1e3)
            if status != 200:
                raise RuntimeError(f"deploy_model answered {status} for a {kind} event")
    return {kind: {"events": len(ms), "p50_ms": round(_p(ms, 50), 1),
                   "p99_ms": round(_p(ms, 99), 1)} for kind, ms in times.items()}


def main() -> int:
    figures: dict[str, Any] = {"clients": CLIENTS}
    with tempfile.TemporaryDirectory(prefix="accelops-bench-serving-") as tmp:
        sandbox = Sandbox(Path(tmp), parts={"serving"}).start(progress=False)
        try:
            with sandbox.client_env():
                bucket = sandbox.models_bucket
                uploaded = upload_model_version(bucket, "v1")
                ready = _wait_ready("v1")
                url = _service_url()
                clients = Clients(url).start()
                first_v1 = None
                while first_v1 is None and time.time() < ready + 30:
                    time.sleep(0.05)
                    first_v1 = _first_answer(clients, "1", ready - 60)
                figures["v1_ready_s"] = {"ledger": round(ready - uploaded, 2),
                                         "serving": round((first_v1 or ready) - uploaded, 2)}
                print(f"v1: manifest → ready {ready - uploaded:.1f} s")

                steady_start = time.time()
                time.sleep(STEADY_SECONDS)
                switch_start = upload_model_version(bucket, "v2")
                ready2 = _wait_ready("v2")
                # The switch ends when no old-version answer comes any more.
                time.sleep(2.0)
                clients.finish()
                old = [s.at for s in clients.samples if s.version == "1"]
                switch_end = max([ready2, *old]) + 0.5
                first_v2 = _first_answer(clients, "2", switch_start)
                figures["v2_ready_s"] = {"ledger": round(ready2 - switch_start, 2),
                                         "serving": round((first_v2 or ready2) - switch_start,
                                                          2)}
                steady = _window(clients.samples, steady_start, switch_start)
                switch = _window(clients.samples, switch_start, switch_end)
                figures["steady"] = steady
                figures["switch"] = switch
                figures["switch_p99_vs_steady"] = round(
                    switch["p99_ms"] / steady["p99_ms"], 2) if steady["p99_ms"] else None
                figures["failed_requests_total"] = sum(
                    1 for s in clients.samples if s.version is None)
                figures["deploy_model_ms"] = _function_times(sandbox)
        finally:
            sandbox.stop()
    print(json.dumps(figures, indent=2))
    write_results("serving", figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
