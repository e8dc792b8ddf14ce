"""The serving half of ``accelops demo``: model versions uploaded to the bucket become
rollouts, with a load test through the switch and a broken version rolled back.

Played with the real clients on a started sandbox (serving and metrics parts):

1. ``toy-lm`` v1 is uploaded the way a user does it (artifacts, then
   ``deploy.yaml``); fake-gcs-server's notification reaches ``deploy_model``, a real
   ``tritonserver`` pod loads the release from the bucket, ``reconcile_models``
   marks it current; a load test measures it;
2. v2 is uploaded while a second load test runs: the rolling update must lose no
   request;
3. a broken v3 is uploaded: Triton cannot load it, v2 keeps serving, v3 is rolled
   back;
4. a timeline per version (upload → ready, or → rolled back) and a report comparing
   the load tests of v1 and v2.
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
    write_html,
)
from sandbox.inference.toy_lm_model import model_files
from sandbox.supervisor.runner import Sandbox
from shared import kube, storage
from shared.errors import AccelopsError
from shared.metrics.loadtest.views import BigQueryMetrics
from shared.serving.ledger import load_ledger
from shared.serving.upload import build_manifest, upload_version

__all__ = ["VersionTimeline", "run_serving_scenario", "upload_model_version"]

MODEL = "toy-lm"
NAMESPACE = "serving"
# A bound, not an estimate: the wait ends as soon as the rollout settles.
SETTLE_SECONDS = 300.0
LOAD_USERS = 4
STEADY_SECONDS, SWITCH_SECONDS = 10, 30


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


def _settle(version: str, uploaded: float) -> VersionTimeline:
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        rollouts = [r for r in _ledger().rollouts if r.version == version]
        if rollouts and not rollouts[-1].active:
            last = rollouts[-1]
            return VersionTimeline(version, uploaded, last.state, last.finished or time.time(),
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
    print(f"   serving: version {target.version} at {target.host}")
    steady = LoadTest(test_id=new_test_id(), host=target.host, users=LOAD_USERS,
                      duration_s=STEADY_SECONDS, model=target.model)
    print(f"   {describe(steady)}")
    steady_summary = finish(LocustProcess(steady, sandbox.env()), source,
                            progress=lambda line: print(f"  {line}"))

    switch = LoadTest(test_id=new_test_id(), host=target.host, users=LOAD_USERS,
                      duration_s=SWITCH_SECONDS, model=target.model)
    print(f"\n2. v2 uploaded while {describe(switch)}")
    locust = LocustProcess(switch, sandbox.env())
    try:
        time.sleep(3)
        timelines.append(_serving(_settle("v2", upload_model_version(bucket, "v2"))))
    except BaseException:
        locust.kill()
        raise
    switch_summary = finish(locust, source, progress=lambda line: print(f"  {line}"))
    print(f"   failed requests through the switch: {switch_summary.errors} of "
          f"{switch_summary.requests}")

    print("\n3. a broken v3 uploaded (its model raises while loading)")
    timelines.append(_settle("v3", upload_model_version(bucket, "v3", broken=True)))
    after = deployment_target(MODEL, sandbox)
    print(f"   serving after it: version {after.version}")

    print("\n4. timeline per version")
    _print_timelines(timelines)
    report = write_html(source, switch.test_id, reports, compare=steady.test_id).resolve()
    print(f"\n5. load tests: v1 steady {steady.test_id}, through the switch to v2 "
          f"{switch.test_id}")
    print(f"   p99 latency  steady {steady_summary.p99_ms or 0:.1f} ms, through the switch "
          f"{switch_summary.p99_ms or 0:.1f} ms")
    print(f"   report      {report}")
    return {"timelines": timelines, "steady": steady_summary, "switch": switch_summary,
            "serving_after": after.version, "report": report}
