"""``accelops demo``: job requests in, Kueue-queued JobSets out, on a fresh sandbox.

The scenario publishes requests with the real google-cloud-pubsub client, lets the
sandbox push them to ``submit_job`` exactly as Pub/Sub would, then reads the
results back with the real Kubernetes client and prints them:

* single- and multi-slice requests across TPU families (v5e, v4, v5p, v6e);
* a duplicate delivery (the same message pushed again, as at-least-once delivery
  does) and a second message reusing a request id: still one JobSet each;
* an invalid request: acknowledged, nothing created, its reason on the
  rejections topic;
* the lifecycle of every job on the simulated clock, then where its telemetry is:
  the ``job_events`` rows submit_job and reconcile_slices published (through
  ingest_metrics), one transition each, at the instants the timeline shows.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from sandbox.demos.gke_operations import operations
from sandbox.demos.loadtest import (
    LoadTest,
    LocustProcess,
    describe,
    finish,
    new_test_id,
)
from sandbox.demos.offhours import run_schedule_scenario
from sandbox.demos.serving import run_serving_scenario
from sandbox.demos.timeline import build_timelines
from sandbox.supervisor.runner import Sandbox, SandboxError
from sandbox.topology import ALL_PARTS, FUNCTIONS, PROJECT, tick_seconds
from shared import bigquery, gke
from shared.config import Settings, Topics
from shared.errors import AccelopsError
from shared.jobspec.labels import ANNOTATION_REQUEST_ID, LABEL_POOL_MANAGED_BY
from shared.kube import JOBSETS, PODS, get_client
from shared.metrics.commands.summary import format_summary
from shared.metrics.loadtest.report import write_html
from shared.metrics.loadtest.views import BigQueryMetrics
from shared.metrics.names import names_from_env
from shared.slices.observe import finished_at

__all__ = ["main", "run_scenario"]

REQUESTS = Path(__file__).resolve().parents[1] / "requests"
VALID = ["llama-multislice.json", "gemma-v4.json", "mixtral-v5p.json", "serve-v6e.json",
         "serve-large-v6e.json"]
INVALID = "invalid-too-many-slices.json"
# Bounds in real seconds, not estimates: every wait returns as soon as its condition
# holds, so a generous bound costs an idle machine nothing and spares a busy one (a
# shared 2-core machine took over 30 s for the lifecycle rows to reach BigQuery).
WAIT_SECONDS = 180.0
LIFECYCLE_SECONDS = 600.0  # the whole lifecycle takes ~30 s at 120x on an idle machine
DEMO_SPEED = 120.0
LOAD_USERS, LOAD_SECONDS = 4, 12
# Simulated seconds between the scheduler's reconcile_slices runs.
RECONCILE_TICK = tick_seconds(Topics().slices_reconcile)


def _publish(publisher: Any, topic: str, data: bytes) -> str:
    return str(publisher.publish(topic, data).result(timeout=30))


def _jobsets() -> list[dict[str, Any]]:
    return get_client(Settings.from_env()).list(JOBSETS)


def _at_least(count: int, fetch: Any) -> Any:
    """A predicate for _wait_for: the fetched list once it has ``count`` items."""
    def check() -> Any:
        items = fetch()
        return items if len(items) >= count else None
    return check


def _wait_for(predicate: Any, what: str, timeout: float = WAIT_SECONDS) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise SandboxError(f"timed out after {timeout:.0f}s waiting for {what}; "
                               "see the function logs under the sandbox state directory")
        time.sleep(0.1)


def _pull_rejections(subscriber: Any, want: int) -> list[Any]:
    path = subscriber.subscription_path(PROJECT, f"{Topics().rejections}-sandbox")
    got: list[Any] = []

    def more() -> bool:
        response = subscriber.pull(request={"subscription": path, "max_messages": 10},
                                   timeout=5)
        if response.received_messages:
            subscriber.acknowledge(request={"subscription": path, "ack_ids": [
                m.ack_id for m in response.received_messages]})
            got.extend(m.message for m in response.received_messages)
        return len(got) >= want

    _wait_for(more, "the rejection record")
    return got


def _outcomes(sandbox: Sandbox) -> list[tuple[str, str]]:
    """(message id, outcome) for every delivery submit_job handled, from its JSON log."""
    log = sandbox.state_dir / "logs" / f"{FUNCTIONS[0].target}.log"
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        entry = json.loads(line)
        text = str(entry.get("message", ""))
        outcome = ("created" if text == "JobSet created" else
                   "duplicate, nothing created" if text.startswith("duplicate") else
                   "rejected" if text.startswith("job request rejected") else
                   "failed, will be retried" if text.startswith("will retry") else None)
        if outcome and entry.get("message_id"):
            found.append((str(entry["message_id"]), outcome))
    return found


def _row(jobset: dict[str, Any]) -> tuple[str, ...]:
    meta, spec = jobset["metadata"], jobset["spec"]["replicatedJobs"][0]
    vms = spec["template"]["spec"]["parallelism"]
    chips_per_vm = int(spec["template"]["spec"]["template"]["spec"]["containers"][0]
                       ["resources"]["limits"]["google.com/tpu"])
    return (meta["name"], meta["namespace"], meta["labels"]["kueue.x-k8s.io/queue-name"],
            meta["annotations"]["accelops.dev/tpu-type"], f"{spec['replicas']} x {vms}",
            str(spec["replicas"] * vms * chips_per_vm))


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def run_scenario(sandbox: Sandbox, reports: Path = Path("reports")) -> dict[str, Any]:
    """Play the scenario on a started sandbox; returns what happened (for tests)."""
    from google.cloud import pubsub_v1  # type: ignore[attr-defined,unused-ignore]

    publisher = pubsub_v1.PublisherClient()
    subscriber = pubsub_v1.SubscriberClient()
    topic = publisher.topic_path(PROJECT, Topics().job_requests)
    try:
        print("\n1. publishing job requests to", topic)
        sent: dict[str, tuple[str, bytes]] = {}
        for name in VALID:
            data = (REQUESTS / name).read_bytes()
            request = json.loads(data)
            sent[name] = (_publish(publisher, topic, data), data)
            print(f"   {name:<28} {request['tpu']['type']:>13} x {request['tpu']['slices']}"
                  f"  (team {request['team']})  message {sent[name][0]}")
        jobsets = _wait_for(_at_least(len(VALID), _jobsets), "one JobSet per valid request")

        print("\n2. at-least-once delivery")
        message_id, data = sent[VALID[0]]
        status = sandbox.redeliver(FUNCTIONS[0].target, message_id, data)
        print(f"   message {message_id} pushed to submit_job again: HTTP {status}")
        again = _publish(publisher, topic, data)
        print(f"   the same request (same request_id) published again as message {again}")

        print("\n3. an invalid request")
        bad = (REQUESTS / INVALID).read_bytes()
        bad_id = _publish(publisher, topic, bad)
        print(f"   {INVALID} published as message {bad_id}")
        [rejection] = _pull_rejections(subscriber, 1)
        expected = len(VALID) + 3  # each valid request, the re-push, the re-publish, the bad one
        outcomes = _wait_for(_at_least(expected, lambda: _outcomes(sandbox)),
                             "submit_job to handle every delivery")
        jobsets = _jobsets()

        print("\n4. deliveries handled by submit_job")
        for message, outcome in outcomes:
            print(f"   message {message:<4} {outcome}")

        print(f"\n5. JobSets in the cluster: {len(jobsets)}")
        header = ("JobSet", "namespace", "queue", "TPU type", "slices x VMs", "chips")
        print(_table([header, *sorted(_row(j) for j in jobsets)]))
        print("\n6. rejections topic")
        attrs = dict(rejection.attributes)
        print(f"   message {attrs['source_message_id']}: {attrs['rejection_reason']}")
        print(f"   field {attrs['rejection_field']!r}, rule {attrs['rejection_rule']!r}; "
              f"original {len(rejection.data)} bytes kept unchanged")

        # The load test runs alongside the lifecycle: both mostly wait.
        load = LoadTest(test_id=new_test_id(), host=sandbox.triton_url, users=LOAD_USERS,
                        duration_s=LOAD_SECONDS, bad_request_ratio=0.02)
        locust = LocustProcess(load, sandbox.env())

        print(f"\n7. lifecycle on the simulated clock (x{sandbox.speed:g}): Kueue admits, "
              "reconcile_slices creates node pools, pods run, pools are reaped")
        try:
            timelines = follow_lifecycle(len(jobsets))
        except BaseException:
            locust.kill()
            raise
        print_timelines(timelines)
        request_ids = {j["metadata"]["annotations"][ANNOTATION_REQUEST_ID] for j in jobsets}
        where, rows = job_event_rows(request_ids | {attrs["source_message_id"]},
                                     transitions(timelines) + 1)
        print(f"\n   lifecycle telemetry: {len({r['row_key'] for r in rows})} transitions of "
              f"{len(timelines)} jobs and 1 rejected request in {where} ({len(rows)} rows: "
              "a redelivered record is one more row under the same row_key)")

        print(f"\n8. {describe(load)}; metrics: Locust -> Pub/Sub -> ingest_metrics -> "
              "BigQuery")
        source = BigQueryMetrics.from_env()
        summary = finish(locust, source, progress=lambda line: print(f"  {line}"))
        print(format_summary(summary))
        report = write_html(source, load.test_id, reports).resolve()
        print(f"  report      {report}")
        return {"jobsets": jobsets, "rejection": attrs, "duplicate_status": status,
                "rejected_data": bytes(rejection.data), "outcomes": outcomes,
                "timelines": timelines, "job_events": rows, "load_test": summary,
                "report": report}
    finally:
        subscriber.close()
        publisher.transport.close()


def transitions(timelines: list[Any]) -> int:
    """The lifecycle transitions of finished jobs: submitted, admitted, running and
    finished, and per slice requested, ready and deleted."""
    return sum(4 + 3 * len(t.slices) for t in timelines)


def job_event_rows(request_ids: set[str], expected: int,
                   timeout: float = WAIT_SECONDS) -> tuple[str, list[dict[str, Any]]]:
    """The table and the rows of these requests' transitions, once ``expected``
    distinct ones (row keys) arrived through ingest_metrics."""
    names = names_from_env()
    table = names.sql(names.job_events_table)
    # The table name comes from the validated config; the ids are a parameter.
    sql = f"SELECT * FROM {table} WHERE request_id IN UNNEST(@ids)"  # noqa: S608

    def fetch() -> list[dict[str, Any]] | None:
        rows = bigquery.query(names.project, sql, {"ids": sorted(request_ids)})
        return rows if len({r["row_key"] for r in rows}) >= expected else None

    rows = _wait_for(fetch, f"{expected} lifecycle transitions in BigQuery", timeout)
    return table.strip("`"), rows


def snapshot() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Any]]:
    """JobSets, pods and TPU slice node pools of the cluster the environment names."""
    kube = get_client(Settings.from_env())
    # Only the slices reconcile_slices makes: the sandbox's static GPU pool stays.
    pools = [pool for pool in gke.list_node_pools(Settings.from_env())
             if LABEL_POOL_MANAGED_BY in pool.labels]
    return kube.list(JOBSETS), kube.list(PODS), pools


def follow_lifecycle(expected: int, *, timeout: float = LIFECYCLE_SECONDS,
                     progress: bool = True) -> list[Any]:
    """Wait until ``expected`` JobSets finished and every pool is gone (printing progress
    as it changes), then return their timelines."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        jobsets, pods, pools = snapshot()
        admitted = sum(1 for j in jobsets if not j["spec"].get("suspend", False))
        # JobSets with a pod running (the load generator's pods run too, outside any).
        running = len({p["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name")
                       for p in pods if (p.get("status") or {}).get("phase") == "Running"}
                      - {None})
        done = sum(1 for j in jobsets if finished_at(j) is not None)
        ready = sum(1 for p in pools if p.status == "RUNNING")
        line = (f"   JobSets: {admitted}/{len(jobsets)} admitted, {running} running, {done} done"
                f" | node pools: {ready} ready, {len(pools) - ready} changing")
        if progress and line != last:
            print(line, flush=True)
            last = line
        if len(jobsets) >= expected and done >= expected and not pools:
            return build_timelines(jobsets, pods, operations())
        if time.monotonic() > deadline:
            raise SandboxError(f"the lifecycle did not finish within {timeout:.0f}s; "
                               "see `accelops jobs status` and the reconcile_slices log")
        time.sleep(0.25)


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def _clock(seconds: float | None) -> str:
    return "-" if seconds is None else time.strftime("%H:%M:%S", time.gmtime(seconds))


def _header(t: Any) -> str:
    """One line per job: how far apart its slices were requested and became ready."""
    if len(t.slices) == 1:
        return f"   {t.name}: 1 slice"
    return (f"   {t.name}: {len(t.slices)} slices requested within "
            f"{_minutes(t.create_spread)}, ready within {_minutes(t.ready_spread)}")


def print_timelines(timelines: list[Any]) -> None:
    """A table per job, then per job its slices: when each create was requested and
    each pool became ready (simulated clock), so parallel requests show as one tick."""
    header = ("JobSet", "TPU", "outcome", "queue wait", "provisioning", "run", "chip-hours")
    rows = [header] + [
        (t.name, t.tpu_type, t.outcome or "-", _minutes(t.queue_wait),
         _minutes(t.provisioning), _minutes(t.run_time),
         f"{t.chip_hours:.1f}" if t.chip_hours is not None else "-") for t in timelines]
    print("\n" + _table(rows))
    print(f"\n   per slice, on the simulated clock (reconcile_slices runs every "
          f"{_minutes(RECONCILE_TICK)}): create requested, pool ready, admission -> create "
          "request, job end -> delete request (idle)")
    for t in timelines:
        print(_header(t))
        for piece in t.slices:
            print(f"   {piece.pool:<40} {_clock(piece.create_requested)} "
                  f"{_clock(piece.ready)} {_minutes(t.admission_to_create(piece)):>7} "
                  f"{_minutes(t.idle(piece)):>7}")


def main(args: argparse.Namespace) -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="accelops-demo-") as tmp:
        state_dir = Path(args.state_dir) if args.state_dir else Path(tmp)
        print(f"starting the sandbox in {state_dir} ...")
        try:
            parts = {"all": ALL_PARTS, "jobs": {"jobs", "metrics"},
                     "serving": {"serving", "metrics"}, "schedule": {"jobs"}}[args.scenario]
            sandbox = Sandbox(state_dir, speed=DEMO_SPEED, parts=parts,
                              start_timeout=args.start_timeout).start()
        except SandboxError as exc:
            print(f"accelops demo: {exc}")
            return 1
        try:
            with sandbox.client_env():
                if args.scenario in ("jobs", "all"):
                    run_scenario(sandbox, Path(args.report_dir))
                if args.scenario in ("serving", "all"):
                    print("\n--- serving: model versions uploaded to the bucket ---")
                    run_serving_scenario(sandbox, Path(args.report_dir))
                if args.scenario in ("schedule", "all"):
                    print("\n--- schedule: node pools removed off-hours, back by morning ---")
                    run_schedule_scenario(sandbox)
        except AccelopsError as exc:
            print(f"accelops demo: {exc}\n(logs: {state_dir / 'logs'})")
            return 1
        finally:
            sandbox.stop()
    print(f"\ndemo finished in {time.monotonic() - started:.1f}s; sandbox stopped")
    return 0
