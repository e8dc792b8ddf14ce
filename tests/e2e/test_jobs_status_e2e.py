"""``accelops jobs status | list | cancel | logs`` on the running sandbox: each state explained.

Jobs are published to Pub/Sub as users publish them; submit_job, Kueue (simulated),
reconcile_slices and the pod runtime move them along on the simulated clock, and the
tests ask what a user would ask — through the lookups the CLI and the jobs API call,
and through the CLI itself. One sandbox serves the whole module (with its metrics part:
a rejection reaches BigQuery's job_events through ingest_metrics); each test waits for
its jobs to end, so the next one starts on an empty cluster.

"A queue held by another team": the sandbox's teams each have their own ClusterQueue
(as `accelops manifests` renders them), so the test points both teams' LocalQueues at
one shared ClusterQueue — what an operator does to let teams share a quota — and an
inference job holds the chips a research job waits for.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from sandbox.supervisor.runner import Sandbox
from shared import kube
from shared.config import AccelopsConfig, Settings, load_config
from shared.errors import ConflictError, ForbiddenError, NotFoundError
from shared.jobs.lookup import (
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    cancel_job,
    job_logs,
    job_status,
    list_jobs,
)
from shared.jobs.status.model import JobStatus
from shared.kube import JOBSETS, WORKLOADS
from tests.e2e.conftest import wait_for
from tests.e2e.test_slices_e2e import publish, request
from tests.slice_faults import control

pytestmark = pytest.mark.e2e

SANDBOX_SPEED = 150.0  # a simulated minute every 0.4 s
SANDBOX_PARTS = {"jobs", "metrics"}
MESSAGE = "step 812: loss is nan; checkpoint left at gs://acme-ckpt/llama/811"
SHARED_QUEUE = "shared-tpu"
FINAL = ("succeeded", "failed")


@pytest.fixture(scope="module")
def settings(sandbox: Sandbox) -> Settings:
    kube.reset_client()
    return Settings.from_env()


@pytest.fixture(scope="module")
def config(sandbox: Sandbox) -> AccelopsConfig:
    return load_config(str(sandbox.config))


def status_of(settings: Settings, config: AccelopsConfig, job_id: str) -> JobStatus | str:
    """The job's status, or why nothing is known of it (yet)."""
    try:
        return job_status(settings, config, job_id)
    except NotFoundError as exc:
        return exc.message


def reaches(settings: Settings, config: AccelopsConfig, job_id: str, *states: str,
            timeout: float = 60.0) -> JobStatus:
    """Wait until the job is in one of ``states``; returns its status then."""
    last: list[JobStatus | str] = [""]

    def arrived() -> bool:
        last[0] = status_of(settings, config, job_id)
        return isinstance(last[0], JobStatus) and last[0].state in states

    assert wait_for(arrived, timeout=timeout), f"{job_id} never reached {states}: {last[0]}"
    assert isinstance(last[0], JobStatus)
    return last[0]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shared.cli", "jobs", *args],
                          capture_output=True, text=True, timeout=60, check=False)


def failing(request_id: str, **changes: Any) -> dict[str, Any]:
    body = request(request_id, **changes)
    body["env"].update({"ACCELOPS_SANDBOX_OUTCOME": "fail", "ACCELOPS_SANDBOX_MESSAGE": MESSAGE})
    return body


def test_a_running_job_shows_its_pods_per_slice_then_succeeds_with_its_condition(
    sandbox, settings, config
):
    publish(request("runs", tpu="v5litepod-16", slices=2, run_seconds=600))

    running = reaches(settings, config, "runs", "running")
    by_name = job_status(settings, config, running.jobset or "")
    bare = job_status(settings, config, (running.jobset or "").split("/")[1])
    listed = {j.request_id: j for j in list_jobs(settings, config, team="research")}
    done = reaches(settings, config, "runs", "succeeded")
    printed = cli("status", "runs")

    assert [(s.index, s.pods_running, s.pods_total, s.pool_status)
            for s in running.slice_status] == [(0, 4, 4, "RUNNING"), (1, 4, 4, "RUNNING")]
    assert running.explanation[0] == "Running: 2 of 2 slice(s), 8 of 8 pods running."
    assert by_name.request_id == bare.request_id == "runs"
    assert listed["runs"].jobset == running.jobset
    assert done.finished is not None
    assert (done.finished.outcome, done.finished.reason) == ("succeeded", "AllJobsCompleted")
    assert printed.returncode == 0, printed.stderr
    assert "state       succeeded" in printed.stdout
    assert "Succeeded at " in printed.stdout


def test_a_failing_pod_is_explained_by_its_termination_message_and_its_log(
    sandbox, settings, config
):
    publish(failing("fails", tpu="v5litepod-8", run_seconds=300))

    failed = reaches(settings, config, "fails", "failed")
    log = job_logs(settings, config, "fails")
    tail = cli("logs", "fails", "--tail", "1")
    as_json = json.loads(cli("status", "fails", "--json").stdout)

    assert failed.finished is not None
    assert failed.finished.termination_message == MESSAGE
    assert failed.finished.exit_code == 1
    assert failed.finished.failed_pod
    assert any(MESSAGE in line for line in failed.explanation)
    assert log.splitlines()[-2:] == ["sandbox runtime: exiting with code 1", MESSAGE]
    assert tail.returncode == 0, tail.stderr
    assert tail.stdout == MESSAGE + "\n"
    assert as_json["finished"]["termination_message"] == MESSAGE


def test_a_stockout_injected_through_gke_is_explained_with_the_next_attempt_time(
    sandbox, settings, config
):
    # The stockout lasts until the test has seen it explained, then ends: a window of
    # simulated time could close before a busy machine got the job to its slices.
    control(sandbox, "faults", {"kind": "stockout", "for_seconds": 30 * 86400.0})
    publish(request("stockout", tpu="v5litepod-16", slices=2, run_seconds=300))

    def failure_shown() -> JobStatus | None:
        status = status_of(settings, config, "stockout")
        return status if isinstance(status, JobStatus) and status.slice_failure else None

    shown = wait_for(failure_shown, timeout=180)
    now = float(control(sandbox, "clock")["time"])
    control(sandbox, "faults", method="DELETE")
    finished = reaches(settings, config, "stockout", *FINAL, timeout=180)

    assert shown is not None, "the stockout should show while the job waits for its slices"
    failure = shown.slice_failure
    assert shown.state == "provisioning"
    assert failure is not None
    assert failure.kind == "stockout"
    assert "GCE_STOCKOUT" in failure.message
    assert failure.attempts >= 1
    assert failure.next_attempt is not None
    # Due after the failure, within the longest backoff of it.
    assert failure.next_attempt.timestamp() <= now + config.slices.backoff_max_seconds
    assert any("stockout failure" in line and "next attempt is at" in line
               for line in shown.explanation)
    assert [s.index for s in shown.slice_status] == [0, 1]
    assert finished.state == "succeeded", "the job runs once the stockout is over"


@pytest.fixture
def shared_queue(sandbox: Sandbox, settings: Settings, config: AccelopsConfig) -> Iterator[None]:
    """Both teams' LocalQueues feed one ClusterQueue with 8 chips of v5e (put back after)."""
    client = kube.get_client(settings)
    saved = {(q["metadata"]["namespace"], q["metadata"]["name"]): q["spec"]["clusterQueue"]
             for q in client.list(LOCAL_QUEUES)}
    client.create(CLUSTER_QUEUES, {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
        "metadata": {"name": SHARED_QUEUE},
        "spec": {"namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
                 "resourceGroups": [{"coveredResources": ["google.com/tpu"], "flavors": [
                     {"name": "tpu-v5-lite-podslice",
                      "resources": [{"name": "google.com/tpu", "nominalQuota": 8}]}]}]}})

    def point(target: dict[tuple[str, str], str]) -> None:
        for (namespace, name), queue in target.items():
            # spec.clusterQueue is immutable in Kueue: a LocalQueue is replaced, not edited.
            client.delete(LOCAL_QUEUES, name, namespace)
            client.create(LOCAL_QUEUES, {
                "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"clusterQueue": queue}})

    point({key: SHARED_QUEUE for key in saved})
    try:
        yield
    finally:
        point(saved)
        client.delete(CLUSTER_QUEUES, SHARED_QUEUE)


def test_a_job_queued_behind_another_teams_job_names_the_queue_chips_and_workloads_ahead(
    sandbox, settings, config, shared_queue
):
    publish(request("holder", tpu="v5litepod-4", team="inference", run_seconds=36000))
    holder = reaches(settings, config, "holder", "provisioning", "running")
    publish(request("first", tpu="v5litepod-8", run_seconds=36000))
    reaches(settings, config, "first", "queued")
    publish(request("second", tpu="v5litepod-8", run_seconds=36000))

    def waiting_with_reason() -> JobStatus | None:
        status = status_of(settings, config, "second")
        return status if isinstance(status, JobStatus) and status.queue and \
            status.queue.message else None

    second = wait_for(waiting_with_reason)
    assert second is not None
    assert second.queue is not None
    assert second.state == "queued"
    queue = second.queue
    assert (queue.cluster_queue, queue.local_queue, queue.flavor) == (
        SHARED_QUEUE, "research/research-queue", "tpu-v5-lite-podslice")
    assert (queue.chips_requested, queue.chips_available, queue.chips_quota) == (8, 4, 8)
    assert "insufficient unused quota for google.com/tpu" in (queue.message or "")
    assert len(queue.admitted) == 1
    assert queue.admitted[0].startswith("inference/")
    assert len(queue.ahead) == 1
    assert "e2e-first" in queue.ahead[0]
    assert any("team inference" in line for line in second.explanation)

    with pytest.raises(ForbiddenError, match="team inference's job"):
        cancel_job(settings, config, "holder", teams=frozenset({"research"}))
    refused = cli("cancel", "holder", "--team", "research")
    cancelled = cli("cancel", "holder", "--team", "inference")
    admitted = reaches(settings, config, "first", "provisioning", "running")
    after = job_status(settings, config, "second")

    assert refused.returncode == 1
    assert "team inference's job" in refused.stderr
    assert cancelled.returncode == 0, cancelled.stderr
    assert holder.jobset is not None
    gone = wait_for(lambda: kube.get_client(settings).find(
        JOBSETS, holder.jobset.split("/")[1], "inference") is None)
    assert gone, "the cancelled job's JobSet should be deleted"
    assert admitted.state in ("provisioning", "running")
    assert after.queue is not None
    assert after.queue.ahead == []
    for job in ("first", "second"):
        assert cancel_job(settings, config, job, teams=None).state == "cancelling"
    assert wait_for(lambda: not [j for j in list_jobs(settings, config)
                                 if j.request_id in ("first", "second")])


def test_a_high_priority_job_preempts_a_running_low_one_which_runs_again_after_it(
    sandbox, settings, config
):
    # The inference team's ClusterQueue (as `accelops manifests` renders it): 32 chips of
    # v6e, lower priorities preempted. The low job takes them all. Both run 30 simulated
    # minutes (12 s here), so that a poll of a busy machine sees each state.
    low = request("bumped", tpu="v6e-16", slices=2, team="inference", run_seconds=1800)
    low["priority"] = "low"
    publish(low)
    reaches(settings, config, "bumped", "running", timeout=90)
    high = request("urgent", tpu="v6e-8", team="inference", run_seconds=1800)
    high["priority"] = "high"
    publish(high)

    def preempted() -> JobStatus | None:
        status = status_of(settings, config, "bumped")
        return status if isinstance(status, JobStatus) and status.queue and \
            status.queue.preempted else None

    shown = wait_for(preempted, timeout=60)
    printed = cli("status", "bumped")
    urgent = reaches(settings, config, "urgent", "succeeded", timeout=90)
    again = reaches(settings, config, "bumped", "succeeded", timeout=120)

    assert shown is not None, "the low job should say it was preempted while it waits"
    assert shown.state == "queued"
    assert shown.queue is not None
    [urgent_uid] = [w["metadata"]["uid"] for w in kube.get_client(settings).list(WORKLOADS)
                    if w["metadata"]["name"].startswith("jobset-e2e-urgent-")]
    assert shown.queue.preempted == (f"Preempted to accommodate a workload (UID: {urgent_uid}) "
                                     "due to prioritization in the ClusterQueue")
    assert shown.summary.startswith("queued again after being preempted")
    assert printed.returncode == 0, printed.stderr
    assert "Preempted: Preempted to accommodate a workload" in printed.stdout
    assert urgent.finished is not None
    assert again.finished is not None
    assert again.finished.outcome == "succeeded"
    assert again.jobset is not None
    namespace, name = again.jobset.split("/")
    finished_jobset = kube.get_client(settings).find(JOBSETS, name, namespace)
    assert finished_jobset is not None
    # JobSet writes no zero counters (omitempty): no restarts at all.
    status = finished_jobset["status"]
    assert "restarts" not in status, "a preemption is not a failure"
    assert "restartsCountTowardsMax" not in status


def test_a_rejected_request_is_explained_by_the_field_and_rule_it_broke(
    sandbox, settings, config
):
    body = request("rejected", tpu="v9-8")

    publish(body)
    rejected = reaches(settings, config, "rejected", "rejected")
    printed = cli("status", "rejected")

    assert rejected.jobset is None
    assert rejected.rejection is not None
    assert rejected.rejection.field == "tpu.type"
    assert rejected.rejection.rule
    assert "v9-8" in rejected.rejection.reason
    assert any("tpu.type" in line for line in rejected.explanation)
    assert printed.returncode == 0, printed.stderr
    assert "state       rejected" in printed.stdout
    with pytest.raises(ConflictError, match="was rejected"):
        cancel_job(settings, config, "rejected", teams=None)


def test_an_unknown_id_says_a_request_published_moments_ago_may_not_be_processed_yet(
    sandbox, settings, config
):
    with pytest.raises(NotFoundError, match="may not have been processed yet"):
        job_status(settings, config, "never-published")
