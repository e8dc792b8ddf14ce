"""``make bench``: serving models from uploads, on the sandbox with real Triton pods.

Prints every figure and writes them to ``bench-results/serving.json``:

* **manifest finalized → model ready**, per version: from the manifest's write to
  (a) the ledger recording the rollout ready and (b) the first answer of the new
  version through the Service — wall time on the sandbox (real Triton processes
  loading from fake-gcs-server, the cluster simulation, Pub/Sub push);
* **the function's own time per event** — deploy_model run in process (through
  functions-framework's test client, against the same sandbox endpoints) for events
  that start a rollout, duplicate deliveries, and artifact events it ignores;
* **a canary promotion under load**: closed-loop clients through the serving Gateway,
  before the upload (the baseline, same run) and from the upload of a healthy v2 until
  only v2 answers: failed requests (goal 0), p99 during the switch against steady state
  (goal: at most twice), the time from upload to 100 % and from ready to 100 % with
  the default steps, and per step the share of answers v2 gave against the weight the
  route was given (answers carry the version of the server that gave them);
* **an SLO rollback under load**: a v3 that answers three times slower: failed requests
  (goal 0), the time from its first step to the rollback (goal: within one step's
  minimum time plus one tick), and, by version, the requests slower than the SLO bound
  the gate used (goal: only v3's).

Percentiles are computed here from every request's own measured latency.
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


def _gateway_url() -> str:
    from sandbox.cluster.objects import loopback_url
    from shared import kube
    from shared.kube import GATEWAYS

    return loopback_url(kube.get_client().get(GATEWAYS, "models", NAMESPACE), "http")


@dataclass
class Watched:
    """What a polled ledger showed of one version's rollout, by wall time."""

    canary_at: float | None = None  # when its canary began (pods ready)
    settled_at: float | None = None
    state: str = ""
    rollout: Any = None


def _watch(version: str, bound: float = READY_SECONDS) -> Watched:
    seen = Watched()
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        rollouts = [r for r in _ledger().rollouts if r.version == version]
        rollout = rollouts[-1] if rollouts else None
        if rollout is not None:
            if rollout.state == "canary" and seen.canary_at is None:
                seen.canary_at = time.time()
            if not rollout.active:
                seen.settled_at, seen.state, seen.rollout = time.time(), rollout.state, rollout
                return seen
        time.sleep(0.1)
    raise RuntimeError(f"{version} did not settle within {bound:.0f} s")


def _shares(samples: list[Sample], watched: Watched, number: str) -> list[dict[str, Any]]:
    """Per canary step: the weight the route gave the new version, and the share of
    answers it gave (every request answered between the step's start and its end)."""
    canary = watched.rollout.canary
    starts = [watched.canary_at or 0.0] + [d.at for d in canary.decisions[:-1]]
    steps = []
    for start, decision in zip(starts, canary.decisions, strict=True):
        answered = [s for s in samples if start <= s.at < decision.at and s.version]
        new = sum(1 for s in answered if s.version == number)
        steps.append({"weight_pct": decision.weight, "answers": len(answered),
                      "new_version_pct": round(100 * new / len(answered), 1)
                      if answered else None,
                      "seconds": round(decision.at - start, 2), "decision": decision.action})
    return steps


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
    retried = 0
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
            envelope = notification_envelope(bucket, obj, gen, message_id=f"b{index}{kind[0]}")
            for _attempt in range(3):
                started = time.perf_counter()
                status = app.post("/", json=envelope).status_code
                times[kind].append((time.perf_counter() - started) * 1e3)
                if status == 200:
                    break
                # The sandbox's reconcile_models watches these rollouts too: a write that
                # lost the race on the ledger asks to be delivered again, as Pub/Sub would.
                retried += 1
            else:
                raise RuntimeError(f"deploy_model answered {status} for a {kind} event")
    figures: dict[str, Any] = {kind: {"events": len(ms), "p50_ms": round(_p(ms, 50), 1),
                                      "p99_ms": round(_p(ms, 99), 1)}
                               for kind, ms in times.items()}
    figures["redelivered"] = retried
    return figures


def main() -> int:
    figures: dict[str, Any] = {"clients": CLIENTS}
    with tempfile.TemporaryDirectory(prefix="accelops-bench-serving-") as tmp:
        sandbox = Sandbox(Path(tmp), parts={"serving"}).start(progress=False)
        try:
            with sandbox.client_env():
                bucket = sandbox.models_bucket
                uploaded = upload_model_version(bucket, "v1")
                ready = _wait_ready("v1")
                url = _gateway_url()
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
                promoted = _watch("v2")
                if promoted.state != "ready":
                    raise RuntimeError(f"v2 was not promoted: {promoted.rollout}")
                # The switch ends when no old-version answer comes any more.
                time.sleep(2.0)
                old = [s.at for s in clients.samples if s.version == "1"]
                switch_end = max([promoted.settled_at or 0.0, *old]) + 0.5
                steady = _window(clients.samples, steady_start, switch_start)
                switch = _window(clients.samples, switch_start, switch_end)
                policy = promoted.rollout.canary.policy
                figures["canary_policy"] = policy.model_dump(mode="json")
                figures["promotion"] = {
                    "upload_to_100pct_s": round((promoted.settled_at or 0) - switch_start, 2),
                    "ready_to_100pct_s": round((promoted.settled_at or 0)
                                               - (promoted.canary_at or 0), 2),
                    "lower_bound_s": (len(policy.steps) - 1) * policy.min_seconds,
                    "steps": _shares(clients.samples, promoted, "2"),
                    "failed_requests": switch["failed"], "window": switch,
                }
                figures["steady"] = steady
                figures["switch_p99_vs_steady"] = round(
                    switch["p99_ms"] / steady["p99_ms"], 2) if steady["p99_ms"] else None
                print(f"v2: upload → 100 % {figures['promotion']['upload_to_100pct_s']} s, "
                      f"failed {switch['failed']} of {switch['requests']}")

                slow_start = upload_model_version(bucket, "v3", slowdown=3.0)
                rolled = _watch("v3")
                time.sleep(1.0)
                clients.finish()
                if rolled.state != "rolled-back":
                    raise RuntimeError(f"the slow v3 was not rolled back: {rolled.rollout}")
                [decision] = rolled.rollout.canary.decisions
                bound = (decision.current.p99_ms or 0) * policy.max_p99_ratio \
                    + policy.p99_slack_ms
                during = [s for s in clients.samples
                          if (rolled.canary_at or 0) <= s.at < (rolled.settled_at or 0)]
                figures["slo_rollback"] = {
                    "upload_to_rollback_s": round((rolled.settled_at or 0) - slow_start, 2),
                    "first_step_to_rollback_s": round((rolled.settled_at or 0)
                                                      - (rolled.canary_at or 0), 2),
                    "goal_s": f"<= min_seconds ({policy.min_seconds:g}) + one tick",
                    "reason": decision.reason,
                    "gate_figures": {"new": decision.new.model_dump(),
                                     "serving": decision.current.model_dump()},
                    "slo_bound_ms": round(bound, 1),
                    "over_bound_by_version": {
                        version: sum(1 for s in during if s.version == version and s.ms > bound)
                        for version in ("2", "3")},
                    "answers_by_version": {
                        version: sum(1 for s in during if s.version == version)
                        for version in ("2", "3")},
                    "failed_requests": sum(1 for s in clients.samples
                                           if s.at >= slow_start and s.version is None),
                }
                print(f"v3 (3x slower): first step → rolled back "
                      f"{figures['slo_rollback']['first_step_to_rollback_s']} s: "
                      f"{decision.reason}")
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
