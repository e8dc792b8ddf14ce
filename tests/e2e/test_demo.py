"""`accelops demo` (what `make demo` runs) from a clean state, as a user would run it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def test_the_demo_runs_every_job_through_its_whole_lifecycle_and_stops_everything(tmp_path):
    result = subprocess.run([sys.executable, "-m", "shared.cli", "demo", "--report-dir",
                             str(tmp_path)], capture_output=True, text=True, timeout=480,
                            check=False)
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
    assert len(made) == 3  # the jobs scenario's, then v1 steady and through the v2 switch
    for count in made:
        assert f"rows in BigQuery: {count}/{count}" in out
    # Serving: v1 and v2 serve, the switch loses nothing, the broken v3 is rolled back.
    assert re.search(r"failed requests through the switch: 0 of \d+", out)
    assert re.search(r"^   v1\s+ready\s", out, re.MULTILINE)
    assert re.search(r"^   v2\s+ready\s", out, re.MULTILINE)
    assert re.search(r"^   v3\s+rolled-back\s", out, re.MULTILINE)
    assert "serving after it: version v2" in out
    assert re.search(r"latency\s+p50 [\d.]+ ms\s+p90 [\d.]+ ms\s+p99 [\d.]+ ms", out)
    report = re.findall(r"report\s+(\S+/index.html)", out)[0]
    assert report.startswith(str(tmp_path))
    assert sorted(p.stem for p in Path(report).parent.glob("*.png")) == [
        "errors", "latency", "throughput", "tokens", "users"]
    assert "sandbox stopped" in out
