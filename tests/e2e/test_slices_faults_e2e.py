"""reconcile_slices on the running sandbox while GKE misbehaves as it does in production:
a TPU stockout, a control-plane upgrade holding the cluster, its concurrent-operations
limit.

The same processes, clients and simulated clock as test_slices_e2e; faults are injected
through the sandbox GKE API's control surface, and what reconcile_slices asked of GKE is
counted from that API's request log and operation history (simulated times), so the
counts do not depend on how fast this machine runs the sandbox. Each test waits until its
jobs finished and their pools are gone, so the next one starts on an empty cluster.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from kubernetes import client as k8s

from sandbox.supervisor.runner import Sandbox
from shared.config import SliceConfig, load_config
from shared.names import pool_name
from shared.slices.observe import parse_time
from tests.e2e.conftest import wait_for
from tests.e2e.test_slices_e2e import finished, jobset, pools, publish, request
from tests.slice_faults import (
    attempts_of,
    backoff_delay,
    busy_attempts,
    control,
    create_requests,
    operations,
    reconcile_runs,
    stockout_attempts,
)

pytestmark = pytest.mark.e2e

# Simulated seconds between a create request's arrival and its operation's start, at most.
REQUEST_TO_OPERATION_SECONDS = 5.0

# A simulated minute every 0.4 s: 30 simulated minutes in 12 s, and a reconcile run
# (tenths of a real second) well inside a tick.
SANDBOX_SPEED = 150.0
TICK = 60.0  # the scheduler's reconcile_slices interval (simulated seconds)
STOCKOUT_MESSAGE = ("GCE_STOCKOUT: The zone 'projects/accelops-local/zones/us-central2-b' "
                    "does not have enough resources available to fulfill the request.")


@pytest.fixture(scope="module")
def slices(sandbox: Sandbox) -> SliceConfig:
    return load_config(str(sandbox.config)).slices


def sim_now(sandbox: Sandbox) -> float:
    return float(control(sandbox, "clock")["time"])


def slice_failure(custom: k8s.CustomObjectsApi, request_id: str) -> dict[str, Any] | None:
    """The JobSet's accelops.dev/slice-failure annotation, parsed; None when absent."""
    annotations = ((jobset(custom, request_id) or {}).get("metadata") or {}).get(
        "annotations") or {}
    raw = annotations.get("accelops.dev/slice-failure")
    return json.loads(raw) if raw else None


def failure_events(core: k8s.CoreV1Api, name: str) -> list[k8s.CoreV1Event]:
    return sorted((e for e in core.list_namespaced_event("research").items
                   if e.involved_object.name == name and e.reason == "SliceCreateFailed"),
                  key=lambda e: e.metadata.name)


def jobset_name(custom: k8s.CustomObjectsApi, request_id: str) -> str:
    return str(wait_for(lambda: jobset(custom, request_id))["metadata"]["name"])


def pool_names(custom: k8s.CustomObjectsApi, request_id: str, slices: int) -> list[str]:
    name = jobset_name(custom, request_id)
    return [pool_name("research", name, i) for i in range(slices)]


def in_flight_spans(core: k8s.CoreV1Api, since: float,
                    until: float) -> list[tuple[float, float]]:
    """When reconcile_slices counted each operation it started in [since, until) as in
    flight: from the run that started it to the run that saw it done (its record's
    history; simulated times, as the runs read the cluster's clock)."""
    record = core.read_namespaced_config_map("accelops-slices", "accelops-system")
    history = json.loads((record.data or {}).get("state.json") or "{}").get("history", [])
    started = {e["operation"]: float(e["started"]) for e in history
               if e.get("operation") and "finished" not in e}
    seen = {e["operation"]: float(e["finished"]) for e in history if "finished" in e}
    return [(at, min(seen.get(name, until), until)) for name, at in started.items()
            if since <= at < until]


def excess(spans: list[tuple[float, float]], limit: int) -> tuple[int, float]:
    """The most spans open at once, and the longest stretch with more than ``limit``."""
    # At equal times an end comes first: a run saw one operation done, then started one.
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    most = count = 0
    longest, above = 0.0, None
    for at, step in events:
        count += step
        most = max(most, count)
        if count > limit and above is None:
            above = at
        elif count <= limit and above is not None:
            longest, above = max(longest, at - above), None
    return most, longest


def test_a_stockout_holds_a_multi_slice_job_on_the_backoff_schedule_then_it_runs(
    sandbox, custom, core, slices
):
    # The stockout lasts until the test has seen two attempts fail in it, then ends by
    # the control API: a window of fixed simulated length (1800 s, 12 real seconds here)
    # closed before a machine shared with a CPU-bound job had got the request to its
    # first create, and nothing failed at all.
    opened = control(sandbox, "faults", {"kind": "stockout", "for_seconds": 86400.0})
    start = max(w["until"] for w in opened["stockouts"]) - 86400.0
    publish(request("stockout", slices=3, run_seconds=300))
    name = jobset_name(custom, "stockout")
    names = [pool_name("research", name, i) for i in range(3)]

    shown = wait_for(lambda: slice_failure(custom, "stockout"), timeout=120)
    warned = wait_for(lambda: failure_events(core, name), timeout=120)
    twice = wait_for(lambda: len(failure_events(core, name)) >= 2, timeout=120)
    # Every operation started before ``end`` started inside the stockout; it ended by
    # ``start + window`` at the latest, which bounds the window the backoff allows attempts in.
    end = sim_now(sandbox)
    control(sandbox, "faults", method="DELETE")
    window = sim_now(sandbox) - start
    cleared = wait_for(lambda: slice_failure(custom, "stockout") is None, timeout=60)
    still_running = finished(jobset(custom, "stockout")) is None
    outcome = wait_for(lambda: finished(jobset(custom, "stockout")), timeout=60)
    reaped = wait_for(lambda: not set(names) & set(pools()), timeout=60)

    assert shown is not None
    assert twice, "a second attempt should fail while the stockout lasts"
    assert STOCKOUT_MESSAGE in shown["message"]
    assert warned
    assert STOCKOUT_MESSAGE in warned[0].message
    assert warned[0].type == "Warning"
    assert cleared
    assert still_running, "the annotation should go once the slices run, before the job ends"
    assert outcome == "Completed"
    assert reaped
    attempts = attempts_of([op for op in operations(sandbox) if op["pool"] in names])
    failed = [a for a in attempts if any(op["error_status"] for op in a)]
    in_window = [op for a in attempts for op in a if start <= op["start_time"] < end]
    requested = create_requests(sandbox, start, end)
    # An operation starts a moment after its request arrives (0.2 simulated seconds was
    # seen under load): a request made just before the stockout ends may start the
    # operation just after it, which then runs. The next request after the end waits for
    # the backoff (30 s at least), so no later request lands in this slack.
    answered = [op for a in attempts for op in a
                if start <= op["start_time"] < end + REQUEST_TO_OPERATION_SECONDS]
    runs = reconcile_runs(sandbox, start, end)
    print(f"stockout of {window:.0f}s: {len(requested)} create requests in "
          f"{len(failed)} attempts, {runs} reconcile runs; the backoff allows "
          f"{stockout_attempts(window, slices)} attempts")
    # The first attempt asks for all three slices in one run, and each create accepted
    # during the stockout ends in it (an attempt may straddle its end).
    assert len(attempts[0]) == 3
    assert len(requested) == len(answered)
    assert all("GCE_STOCKOUT" in op["error_message"] for op in in_window)
    # Retried, on the backoff schedule: bounded by it, not by the runs (fewer create
    # requests than runs, though each attempt asks for up to three pools).
    assert 2 <= len(failed) <= stockout_attempts(window, slices)
    assert len(requested) < runs
    for number, (attempt, after) in enumerate(itertools.pairwise(attempts), 1):
        ended = max(op["end_time"] for op in attempt)
        assert after[0]["start_time"] - ended >= backoff_delay(number, slices)
    # One Event per failed attempt, numbered without gaps: the slices failing together
    # are one attempt.
    assert [e.metadata.name for e in failure_events(core, name)] == [
        f"{name}.slice-failure-{n}" for n in range(1, len(failed) + 1)]
    # Then each slice is created once, after the stockout.
    created = [op for a in attempts for op in a if not op["error_status"]]
    assert sorted(op["pool"] for op in created) == sorted(names)
    assert all(op["start_time"] >= end for op in created)


def test_an_upgrade_holding_the_cluster_backs_reconcile_off_and_the_job_runs_after_it(
    sandbox, custom, slices
):
    minutes = 10
    upgrade = control(sandbox, "faults", {"kind": "upgrade", "for_seconds": minutes * 60})
    start = parse_time(upgrade["operations"][0]["startTime"])
    assert start is not None
    end = start + minutes * 60
    publish(request("upgrade", slices=2, run_seconds=300))

    outcome = wait_for(lambda: finished(jobset(custom, "upgrade")), timeout=60)
    names = pool_names(custom, "upgrade", 2)
    reaped = wait_for(lambda: not set(names) & set(pools()), timeout=60)

    assert outcome == "Completed"
    assert reaped
    refused = create_requests(sandbox, start, end)
    runs = reconcile_runs(sandbox, start, end)
    pool_operations = [op for kind in ("CREATE_NODE_POOL", "DELETE_NODE_POOL")
                       for op in operations(sandbox, kind)]
    print(f"upgrade of {minutes} min: {len(refused)} create requests, {runs} reconcile "
          f"runs; the backoff allows {busy_attempts(end - start, slices)}")
    assert refused, "reconcile should have tried while the upgrade ran"
    assert all(r["status"] == 400 for r in refused)  # FAILED_PRECONDITION
    assert not [op for op in pool_operations if start <= op["start_time"] < end]
    assert len(refused) <= busy_attempts(end - start, slices)
    assert len(refused) < minutes < runs
    created = [op for op in pool_operations if op["pool"] in names
               and op["operation_type"] == "CREATE_NODE_POOL"]
    assert sorted(op["pool"] for op in created) == sorted(names)
    first = min(op["start_time"] for op in created)
    assert end <= first <= end + slices.backoff_max_seconds + TICK


def test_with_gke_allowing_fewer_operations_than_reconcile_each_slice_is_created_once(
    sandbox, custom, core, slices
):
    limit = 2
    assert slices.max_concurrent_operations > limit
    before = control(sandbox, "limits")["concurrent_operations"]
    control(sandbox, "limits", {"concurrent_operations": limit})
    # A slower clock for this test: a reconcile run takes real tenths of a second, and
    # what is measured here is how long reconcile's view lags GKE, in simulated time.
    control(sandbox, "clock", {"speed": 60.0})
    try:
        start = sim_now(sandbox)
        publish(request("limit-3", slices=3, run_seconds=300))
        publish(request("limit-1", tpu="v5litepod-8", slices=1, run_seconds=300))
        done = wait_for(lambda: all(finished(jobset(custom, r)) for r in ("limit-3", "limit-1")),
                        timeout=60)
        end = sim_now(sandbox)
    finally:
        control(sandbox, "limits", {"concurrent_operations": before})
        control(sandbox, "clock", {"speed": SANDBOX_SPEED})
    names = pool_names(custom, "limit-3", 3) + pool_names(custom, "limit-1", 1)
    reaped = wait_for(lambda: not set(names) & set(pools()), timeout=60)

    assert done
    assert reaped
    answers = create_requests(sandbox, start, end)
    too_many = [r for r in answers if r["status"] == 429]
    runs = reconcile_runs(sandbox, start, end)
    most, longest = excess(in_flight_spans(core, start, end), limit)
    print(f"limit {limit}: {len(answers)} create requests, {len(too_many)} answered 429, "
          f"{runs} reconcile runs; reconcile counted at most {most} operations in flight, "
          f"more than {limit} for {longest:.0f}s at most")
    assert too_many, "reconcile should have met the limit"
    assert len(too_many) <= busy_attempts(end - start, slices)
    assert len(too_many) < runs
    # Reconcile counts an operation GKE finished until its next run looks, so it may
    # count one more than GKE runs: for a tick and a run at most, never for long.
    assert longest <= 2 * TICK
    created = [op for op in operations(sandbox) if op["pool"] in names]
    assert sorted(op["pool"] for op in created) == sorted(names), "each slice created once"
    assert sum(r["status"] == 200 for r in answers) == len(names)
