"""The serving half of ``accelops demo``: model versions uploaded to the bucket become
rollouts behind the serving Gateway, each new version a canary judged on its servers'
metrics while load tests from a Locust master and two workers run through it.

Played with the real clients on a started sandbox (serving and metrics parts):

1. ``toy-lm`` v1 is uploaded the way a user does it (artifacts, then
   ``deploy.yaml``); fake-gcs-server's notification reaches ``deploy_model``, a real
   ``tritonserver`` pod loads the release from the bucket, ``reconcile_models``
   routes every request to it; a load test measures it;
2. v2 is uploaded while a second load test runs: it takes 5, 25, then 50 % of the
   requests, each step judged on Triton's own error and latency figures in
   Prometheus, and is promoted; no request may fail;
3. v3, which answers the same text three times slower, is uploaded under load: it is
   held at its first step and rolled back on its p99, with the numbers printed;
4. a broken v4 is uploaded: Triton cannot load it, it never takes a request, v2 keeps
   serving;
5. a timeline per version and the three load tests compared (reports: v2's and v3's
   against v1's).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.demos.loadtest import (
    LoadTest,
    LocustProcess,
    deployment_target,
    describe,
    finish,
    new_test_id,
)
from sandbox.inference.toy_lm_model import model_files
from sandbox.supervisor.runner import Sandbox
from shared import kube, storage
from shared.errors import AccelopsError
from shared.metrics.loadtest.report import write_html
from shared.metrics.loadtest.views import BigQueryMetrics
from shared.serving.ledger import load_ledger
from shared.serving.upload import build_manifest, upload_version

__all__ = ["VersionTimeline", "run_serving_scenario", "upload_model_version"]

MODEL = "toy-lm"
NAMESPACE = "serving"
# A bound, not an estimate: the wait ends as soon as the rollout settles.
SETTLE_SECONDS = 300.0
LOAD_USERS = 4
# A master and this many workers run each load test, as on GKE.
LOAD_WORKERS = 2
STEADY_SECONDS, CANARY_SECONDS, SLOW_SECONDS = 10, 35, 25


class DemoError(AccelopsError):
    pass


@dataclass(frozen=True)
class VersionTimeline:
    version: str
    uploaded: float  # epoch seconds, when the manifest was written
    outcome: str  # the rollout's final state
    settled: float  # epoch seconds, when the ledger recorded it
    detail: str

    @property
    def seconds(self) -> float:
        return self.settled - self.uploaded


def upload_model_version(bucket: str, version: str, *, broken: bool = False,
                         slowdown: float = 1.0) -> float:
    """Upload one version of the toy model as a user would (``accelops models upload``
    does the same); returns when its manifest was written. ``slowdown``: the same
    answers, that many times slower."""
    files = model_files(broken=broken, version_label=version, slowdown=slowdown)
    manifest = build_manifest(files, server="triton", model=MODEL, version=version,
                              replicas={"min": 1, "max": 2})
    upload_version(bucket, files, manifest)
    return time.time()


def _ledger() -> Any:
    return load_ledger(kube.get_client(), NAMESPACE, MODEL)


def _settle(version: str, uploaded: float, say: Any = print) -> VersionTimeline:
    """Wait for ``version``'s rollout to settle, saying how its canary moves."""
    deadline = time.monotonic() + SETTLE_SECONDS
    said: set[tuple[float, str]] = set()
    state = ""
    while time.monotonic() < deadline:
        rollouts = [r for r in _ledger().rollouts if r.version == version]
        last = rollouts[-1] if rollouts else None
        if last is not None:
            for record in last.canary.decisions if last.canary is not None else []:
                if (record.at, record.action) not in said:
                    said.add((record.at, record.action))
                    say(f"   {record.at - uploaded:5.1f} s  {record.action}: {record.reason}"
                        f"\n            ({record.figures()})")
            if last.state != state:
                state = last.state
                say(f"   {time.time() - uploaded:5.1f} s  {version} {state}")
            if not last.active:
                return VersionTimeline(version, uploaded, last.state,
                                       last.finished or time.time(),
                                       last.reason or last.progress or "")
        time.sleep(0.25)
    raise DemoError(f"{MODEL} {version} did not settle within {SETTLE_SECONDS:.0f} s; "
                    f"see `accelops models status {MODEL}`")


def _print_timelines(timelines: list[VersionTimeline]) -> None:
    print(f"   {'version':<8} {'outcome':<12} {'upload to outcome':>18}")
    for t in timelines:
        print(f"   {t.version:<8} {t.outcome:<12} {t.seconds:>16.1f} s")
        if t.outcome != "ready":
            print(f"   {'':<8} why: {t.detail}")


def _serving(timeline: VersionTimeline) -> VersionTimeline:
    if timeline.outcome != "ready":
        raise DemoError(f"{MODEL} {timeline.version} did not serve ({timeline.outcome}): "
                        f"{timeline.detail}")
    return timeline


def _under_load(sandbox: Sandbox, source: Any, host: str, seconds: int, what: str,
                upload: Any) -> tuple[VersionTimeline, Any, LoadTest]:
    """Start a load test, upload a version while it runs, follow its rollout, then wait
    for every request of the test in BigQuery."""
    test = LoadTest(test_id=new_test_id(), host=host, users=LOAD_USERS, duration_s=seconds,
                    model=MODEL, workers=LOAD_WORKERS)
    print(f"\n{what} while {describe(test)} ({LOAD_WORKERS} workers)")
    locust = LocustProcess(test, sandbox.env())
    try:
        time.sleep(3)
        timeline = _settle(*upload())
    except BaseException:
        locust.kill()
        raise
    summary = finish(locust, source, progress=lambda line: print(f"  {line}"))
    return timeline, summary, test


def _compare(rows: list[tuple[str, Any]]) -> None:
    print(f"   {'load test':<22} {'requests':>8} {'failed':>6} {'qps':>6} {'p50 ms':>7} "
          f"{'p99 ms':>7}")
    for label, summary in rows:
        print(f"   {label:<22} {summary.requests:>8} {summary.errors:>6} "
              f"{summary.qps or 0:>6.1f} {summary.p50_ms or 0:>7.1f} {summary.p99_ms or 0:>7.1f}")


def run_serving_scenario(sandbox: Sandbox, reports: Path = Path("reports")) -> dict[str, Any]:
    """Play the serving scenario on a started sandbox (parts serving and metrics);
    returns what happened (for tests)."""
    kube.reset_client()
    storage.reset_client()
    bucket = sandbox.models_bucket
    source = BigQueryMetrics.from_env()
    timelines: list[VersionTimeline] = []

    print(f"\n1. {MODEL} v1 uploaded to gs://{bucket}/models/triton/{MODEL}/v1/ "
          "(artifacts, then deploy.yaml)")
    timelines.append(_serving(_settle("v1", upload_model_version(bucket, "v1"))))
    target = deployment_target(MODEL, sandbox)
    print(f"   serving: version {target.version} at the Gateway, {target.host}")
    steady = LoadTest(test_id=new_test_id(), host=target.host, users=LOAD_USERS,
                      duration_s=STEADY_SECONDS, model=target.model, workers=LOAD_WORKERS)
    print(f"   {describe(steady)} ({LOAD_WORKERS} workers)")
    steady_summary = finish(LocustProcess(steady, sandbox.env()), source,
                            progress=lambda line: print(f"  {line}"))

    canary, canary_summary, canary_test = _under_load(
        sandbox, source, target.host, CANARY_SECONDS, "2. v2 uploaded",
        lambda: ("v2", upload_model_version(bucket, "v2")))
    timelines.append(_serving(canary))
    print(f"   failed requests through the canary: {canary_summary.errors} of "
          f"{canary_summary.requests}")

    slow, slow_summary, slow_test = _under_load(
        sandbox, source, target.host, SLOW_SECONDS,
        "3. v3 uploaded (the same answers, 3x slower)",
        lambda: ("v3", upload_model_version(bucket, "v3", slowdown=3.0)))
    timelines.append(slow)
    print(f"   failed requests through its rollback: {slow_summary.errors} of "
          f"{slow_summary.requests}")

    print("\n4. a broken v4 uploaded (its model raises while loading)")
    timelines.append(_settle("v4", upload_model_version(bucket, "v4", broken=True)))
    after = deployment_target(MODEL, sandbox)
    print(f"   serving after it: version {after.version}")

    print("\n5. timeline per version")
    _print_timelines(timelines)
    print("\n   the three load tests")
    _compare([("v1 steady", steady_summary), ("v1 → v2 canary", canary_summary),
              ("v2 + slow v3 at 5%", slow_summary)])
    report = write_html(source, canary_test.test_id, reports,
                        compare=steady.test_id).resolve()
    slow_report = write_html(source, slow_test.test_id, reports,
                             compare=steady.test_id).resolve()
    print(f"   report      {report}")
    print(f"   report      {slow_report}")
    return {"timelines": timelines, "steady": steady_summary, "switch": canary_summary,
            "slow": slow_summary, "serving_after": after.version, "report": report,
            "slow_report": slow_report}
