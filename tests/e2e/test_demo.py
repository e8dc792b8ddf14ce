"""`accelops demo` (what `make demo` runs) from a clean state, as a user would run it."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import bigquery

from sandbox.common.httpserver import free_port
from sandbox.demos.demo import _clock, _minutes
from sandbox.topology import PROJECT
from tests.processes import serving

pytestmark = pytest.mark.e2e


def test_the_demo_runs_every_job_through_its_whole_lifecycle_and_stops_everything(tmp_path):
    state = tmp_path / "state"
    result = subprocess.run([sys.executable, "-m", "shared.cli", "demo", "--report-dir",
                             str(tmp_path), "--state-dir", str(state)], capture_output=True,
                            text=True, timeout=900, check=False)
    out = result.stdout

    assert result.returncode == 0, out + result.stderr
    assert "JobSets in the cluster: 5" in out
    for row in (r"llama-pretrain-\w+\s+research\s+research-queue\s+v5litepod-16\s+2 x 4\s+32",
                r"mixtral-sft-\w+\s+research\s+research-queue\s+v5p-128\s+3 x 16\s+192",
                r"serve-bench-\w+\s+inference\s+inference-queue\s+v6e-8\s+1 x 1\s+8"):
        assert re.search(row, out), row
    assert out.count("duplicate, nothing created") == 2
    assert "may use at most 4" in out
    assert "JobSets: 5/5 admitted, 0 running, 5 done | node pools: 0 ready, 0 changing" in out
    assert len(re.findall(r"^  \S+\s+\S+\s+Completed\s", out, re.MULTILINE)) == 5
    # The inference team's quota fits one of its two jobs at a time: whichever was admitted
    # second (their deliveries race) waits for the other to finish.
    waits = [int(m) for m in re.findall(r"serve-\w+-\w+\s+v6e-\d+\s+Completed\s+(\d+)m", out)]
    assert len(waits) == 2
    assert max(waits) >= 5
    assert len(re.findall(r"^   \S+-s\d\s", out, re.MULTILINE)) == 9  # one line per slice
    # Each slice's create request and ready time on the simulated clock; a multi-slice
    # JobSet's slices are requested together, in one reconcile run (a tick is 1m00s).
    assert re.search(r"^   mixtral-sft-\w+-\w+-s2\s+\d\d:\d\d:\d\d \d\d:\d\d:\d\d\s", out,
                     re.MULTILINE)
    spreads = re.findall(r"^   \S+: [23] slices requested within 0m(\d\d)s, ready within "
                         r"0m(\d\d)s$", out, re.MULTILINE)
    assert len(spreads) == 3  # llama, mixtral, serve-large
    # The load tests ran, and every request Locust made reached the views.
    made = re.findall(r"locust made (\d+) requests", out)
    # The jobs scenario's, then v1 steady, through v2's canary and v3's rollback.
    assert len(made) == 4
    for count in made:
        assert f"rows in BigQuery: {count}/{count}" in out
    # Serving: v2's canary steps through its weights and is promoted without a failed
    # request; the slow v3 is rolled back on its p99 at 5%; the broken v4 never serves.
    assert re.search(r"failed requests through the canary: 0 of \d+", out)
    steps = re.findall(r"^\s+[\d.]+ s  (advance|promote|roll back): at (\d+)%|"
                       r"^\s+[\d.]+ s  (advance|promote): within the SLO at (\d+)%", out,
                       re.MULTILINE)
    moved = [(a or c, int(b or d)) for a, b, c, d in steps]
    assert moved == [("advance", 5), ("advance", 25), ("promote", 50), ("roll back", 5)], moved
    assert re.search(r"roll back: at 5%: (compute )?p99 \d+ ms against \d+ ms", out)
    assert re.search(r"^   v1\s+ready\s", out, re.MULTILINE)
    assert re.search(r"^   v2\s+ready\s", out, re.MULTILINE)
    assert re.search(r"^   v3\s+rolled-back\s", out, re.MULTILINE)
    assert re.search(r"^   v4\s+rolled-back\s", out, re.MULTILINE)
    assert "serving after it: version v2" in out
    assert re.search(r"^   v2 \+ slow v3 at 5%\s+\d+\s+0\s", out, re.MULTILINE)
    assert re.search(r"latency\s+p50 [\d.]+ ms\s+p90 [\d.]+ ms\s+p99 [\d.]+ ms", out)
    reports = re.findall(r"report\s+(\S+/index.html)", out)
    assert len(reports) >= 2
    for report in reports:
        assert report.startswith(str(tmp_path))
    charts = sorted(p.stem for p in Path(reports[-1]).parent.glob("*.png"))
    assert {"errors", "latency", "throughput", "users"} <= set(charts), charts
    assert_schedule_story(out)
    assert "sandbox stopped" in out
    assert_lifecycle_rows(out, state)


def job_event_rows(state: Path, table: str) -> list[dict[str, Any]]:
    """The rows of ``table`` in the BigQuery the demo's sandbox left behind (it persists
    under the state directory), read with google-cloud-bigquery from a bqemulator
    started on them."""
    port = free_port()
    argv = [str(Path(sys.executable).parent / "bqemulator"), "start", "--rest-port", str(port),
            "--grpc-port", str(free_port()), "--project", PROJECT, "--persistent",
            "--data-dir", str(state / "bigquery"), "--log-level", "warning"]
    with serving(argv, port, state / "bqemulator-reopened.log"):
        client = bigquery.Client(project=PROJECT, credentials=AnonymousCredentials(),
                                 client_options=ClientOptions(
                                     api_endpoint=f"http://127.0.0.1:{port}"))
        try:
            job = client.query(f"SELECT * FROM `{table}` ORDER BY ingested_at")
            return [dict(row.items()) for row in job.result(timeout=60)]
        finally:
            client.close()


def seconds(start: datetime, end: datetime) -> float:
    return (end - start).total_seconds()


def assert_lifecycle_rows(out: str, state: Path) -> None:
    """The job_events rows of the demo's jobs say what its timeline printed: the same
    instants, to the timeline's precision (seconds), and each transition once."""
    where = re.search(r"lifecycle telemetry: (\d+) transitions of 5 jobs and 1 rejected "
                      r"request in (\S+) \((\d+) rows", out)
    assert where, "the demo says where the lifecycle rows are"
    rows = job_event_rows(state, where[2])
    events = {row["row_key"]: row for row in rows}  # de-duplicated by row key
    assert len(events) == int(where[1]) == 48  # 5 x (submitted, admitted, running,
    # finished) + 9 slices x (requested, ready, deleted) + the rejection
    assert len(rows) >= int(where[3])  # a late redelivery may add a row, never an event
    by_job: dict[str, dict[str, Any]] = {}
    for row in events.values():
        name = (row["jobset"] or "/").split("/")[1]
        slice_suffix = f":{row['slice_index']}" if row["slice_index"] is not None else ""
        by_job.setdefault(name, {})[row["event"] + slice_suffix] = row
    assert [r["field"] for r in events.values() if r["event"] == "rejected"] == ["tpu.slices"]
    printed = re.findall(r"^  (\S+)\s+(\S+)\s+(Completed|Failed)\s+(\S+)\s+(\S+)\s+(\S+)"
                         r"\s+([\d.]+)$", out, re.MULTILINE)
    assert len(printed) == 5
    for name, tpu, outcome, queue_wait, provisioning, run, chip_hours in printed:
        job = by_job[name]
        at = {event: row["at"] for event, row in job.items()}
        assert job["submitted"]["tpu_type"] == tpu
        assert job["finished"]["outcome"] == {"Completed": "succeeded",
                                              "Failed": "failed"}[outcome]
        assert _minutes(seconds(at["submitted"], at["admitted"])) == queue_wait, name
        assert _minutes(seconds(at["admitted"], at["running"])) == provisioning, name
        assert _minutes(seconds(at["running"], at["finished"])) == run, name
        chips = job["running"]["slices"] * job["running"]["chips_per_slice"]
        assert f"{chips * seconds(at['running'], at['finished']) / 3600:.1f}" == chip_hours
        # Each slice's pool was deleted after the job ended.
        assert all(at["finished"] <= at[f"slice_deleted:{i}"]
                   for i in range(job["running"]["slices"]))
    slices = re.findall(r"^   (\S+-s\d+)\s+(\d\d:\d\d:\d\d) (\d\d:\d\d:\d\d)\s", out,
                        re.MULTILINE)
    assert len(slices) == 9
    pools = {row["pool"]: row for row in events.values() if row["event"] == "slice_requested"}
    ready = {row["pool"]: row for row in events.values() if row["event"] == "slice_ready"}
    for pool, requested, made in slices:
        assert _clock(pools[pool]["at"].timestamp()) == requested, pool
        assert _clock(ready[pool]["at"].timestamp()) == made, pool


def story_lines(section: str) -> list[tuple[str, str, str]]:
    """(HH:MM, pool or first word, the rest) per line of a tick story; a line without a
    time is one more line of the tick above it."""
    found, when = [], ""
    for line in section.splitlines():
        match = re.match(r"^   (?:\w{3} (\d\d:\d\d) \w+ +| {15})(\S+) +(.*)$", line)
        if match:
            when = match[1] or when
            found.append((when, match[2], match[3]))
    return found


def assert_schedule_story(out: str) -> None:
    """The schedule scenario's evening and morning, as `accelops demo` prints them."""
    start = out.index("\n2. evening")
    evening = story_lines(out[start:out.index("\n3. morning", start)])
    morning = story_lines(out[out.index("\n3. morning", start):out.index("\n4. ", start)])

    def first(lines: list[tuple[str, str, str]], pool: str, text: str) -> int:
        return next(i for i, (_, name, rest) in enumerate(lines)
                    if name == pool and text in rest)

    removed = {pool: first(evening, pool, text) for pool, text in (
        ("l4-inference", "set autoscaling of l4-inference to 0..3  [pool_action remove/resize]"),
        ("v5e-team", "delete v5e-team  [pool_action remove/delete]"),
        ("v5e-dev", "resize v5e-dev to 0 node(s) per zone  [pool_action remove/resize]"))}
    assert evening[removed["l4-inference"]][0] == evening[removed["v5e-team"]][0] == "19:00"
    # The busy pool: skipped with its reason, removed on the first tick after its pod ended.
    skipped = first(evening, "v5e-dev", "skipped, busy (1 pod(s) running: "
                    "research/dev-notebook); removed once idle  [pool_action skip]")
    ended = first(evening, "pod", "research/dev-notebook finished: Succeeded")
    assert evening[skipped][0] == "19:00"
    assert skipped < ended < removed["v5e-dev"]
    assert evening[removed["v5e-dev"]][0] == "20:15"
    assert not [line for line in evening if line[1] == "l4-oncall"]  # kept: never acted on
    assert re.search(r"v5e-team deleted; l4-oncall 1 node\(s\) \(kept", out)
    assert "accelops-pool-v5e-team" in out
    # Morning: restores start at the lead time, every pool is ready before 08:00.
    for pool, method in (("l4-inference", "resize"), ("v5e-dev", "resize"),
                         ("v5e-team", "recreate")):
        assert morning[first(morning, pool, f"[pool_action restore/{method}]")][0] == "07:30"
    ready = re.findall(r"^   (\S+) +\w{3} 07:30 \w+ +\w{3} 07:\d\d:\d\d \w+ +\w{3} 08:00 \w+ +"
                       r"\d+ min early$", out, re.MULTILINE)
    assert sorted(ready) == ["l4-inference", "v5e-dev", "v5e-team"]
    assert "v5e-team read back after its recreation: the same spec as before" in out
    # Savings from the audit rows: accelerators x hours removed.
    saved = dict(re.findall(r"^   (\S+) +\S+ +\d+ +\w{3} \d\d:\d\d \w+ +\w{3} 07:30 \w+ +"
                            r"[\d.]+ +([\d.]+)$", out, re.MULTILINE))
    assert saved == {"l4-inference": "25.0", "v5e-team": "200.0", "v5e-dev": "45.0"}
    assert "total: 270.0 accelerator-hours" in out

