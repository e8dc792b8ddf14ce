"""Team budgets on a running sandbox: separate processes, real sockets, real clients.

Job events published to the metrics topic go through ingest_metrics into BigQuery
(bqemulator); the scheduler's team_usage tick caches the usage in a ConfigMap; a
request of research — over the daily budget sandbox/config.yaml gives it — is refused
with its usage and reset (read from the rejections topic), one of inference is not,
and once the simulated clock passes UTC midnight research's requests start again.

The simulated clock is first moved to noon UTC of the next day, so that the day has
room behind it for the jobs below whatever the hour the test runs at.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from google.cloud import pubsub_v1
from kubernetes import client as k8s

from sandbox.common.clockctl import SandboxClock
from sandbox.supervisor.runner import Sandbox
from sandbox.topology import PROJECT
from shared.config import Topics, load_config
from shared.jobs.budget.gate import CACHE_SECONDS
from shared.jobs.budget.model import USAGE_CONFIGMAP, USAGE_KEY, UsageSnapshot, hours_text, next_day
from shared.metrics.job_event import JobEventRecord, job_event_id, job_event_message
from tests.e2e.conftest import wait_for

pytestmark = pytest.mark.e2e

SANDBOX_PARTS = {"jobs", "metrics"}
REQUESTS = Path(__file__).resolve().parents[2] / "sandbox" / "requests"
STATE_NAMESPACE = "accelops-system"
CHIPS = 192  # a v5p-128 job of three slices, 64 chips each


@pytest.fixture(scope="module")
def publisher(sandbox: Sandbox) -> Iterator[Any]:
    client = pubsub_v1.PublisherClient()
    try:
        yield client
    finally:
        client.transport.close()


@pytest.fixture(scope="module")
def clock(sandbox: Sandbox) -> SandboxClock:
    return SandboxClock(sandbox.gke_url)


def finished_job(request_id: str, team: str, running: datetime, hours: int,
                 ) -> list[JobEventRecord]:
    described = {"team": team, "tpu_type": "v5p-128", "slices": 3, "chips_per_slice": 64,
                 "jobset": f"{team}/{request_id}"}
    times = {"submitted": running - timedelta(minutes=30),
             "admitted": running - timedelta(minutes=20), "running": running,
             "finished": running + timedelta(hours=hours)}
    return [JobEventRecord(event_id=job_event_id(request_id, event), event=event, at=when,
                           request_id=request_id,
                           outcome="succeeded" if event == "finished" else None, **described)
            for event, when in times.items()]


def publish_request(publisher: Any, name: str, request_id: str) -> str:
    body = {**json.loads((REQUESTS / name).read_text()), "request_id": request_id}
    topic = publisher.topic_path(PROJECT, Topics().job_requests)
    return str(publisher.publish(topic, json.dumps(body).encode()).result(timeout=10))


def cached_usage(core: k8s.CoreV1Api) -> UsageSnapshot | None:
    try:
        configmap = core.read_namespaced_config_map(USAGE_CONFIGMAP, STATE_NAMESPACE)
    except k8s.ApiException:
        return None
    return UsageSnapshot.model_validate_json(configmap.data[USAGE_KEY])


def rejection_of(message_id: str) -> Any:
    subscriber = pubsub_v1.SubscriberClient()
    path = subscriber.subscription_path(PROJECT, f"{Topics().rejections}-sandbox")
    try:
        def pulled() -> list[Any]:
            response = subscriber.pull(subscription=path, max_messages=10, timeout=5)
            if response.received_messages:
                subscriber.acknowledge(subscription=path, ack_ids=[
                    m.ack_id for m in response.received_messages])
            return [m.message for m in response.received_messages
                    if m.message.attributes["source_message_id"] == message_id]

        found = wait_for(pulled, timeout=30)
        return found[0] if found else None
    finally:
        subscriber.close()


def jobsets_for(custom: k8s.CustomObjectsApi, request_id: str) -> list[dict[str, Any]]:
    items = custom.list_cluster_custom_object("jobset.x-k8s.io", "v1alpha2", "jobsets")["items"]
    return [j for j in items
            if j["metadata"]["annotations"].get("accelops.dev/request-id") == request_id]


def test_an_over_budget_team_is_refused_until_utc_midnight_and_others_are_not(
    sandbox, publisher, clock, core, custom
):
    budget = load_config(str(sandbox.config)).teams["research"].budget
    assert budget.chip_hours_per_day is not None
    hours = math.ceil(budget.chip_hours_per_day / CHIPS) + 1
    noon = datetime.combine(clock.now().date() + timedelta(days=1), datetime.min.time(),
                            UTC) + timedelta(hours=12)
    clock.advance_to(noon)
    events = finished_job("e2e-budget-train", "research",
                          noon - timedelta(hours=hours + 1), hours)
    data, attributes = job_event_message(events)
    publisher.publish(publisher.topic_path(PROJECT, Topics().loadtest_metrics), data,
                      **attributes).result(timeout=10)

    # ingest_metrics writes the rows; a later team_usage tick caches them.
    snapshot = wait_for(lambda: (s := cached_usage(core)) is not None
                        and s.teams["research"].today > 0 and s, timeout=90)
    assert snapshot, "team_usage never cached research's usage"
    used = CHIPS * hours
    assert snapshot.teams["research"].today == pytest.approx(used)
    assert snapshot.teams["research"].week == pytest.approx(used)
    # submit_job keeps what it read for a few seconds; let it read this snapshot.
    time.sleep(CACHE_SECONDS)

    before = clock.now()
    refused_id = publish_request(publisher, "gemma-v4.json", "e2e-budget-refused")
    admitted_id = publish_request(publisher, "serve-v6e.json", "e2e-budget-inference")
    rejection = rejection_of(refused_id)
    after = clock.now()

    assert rejection is not None, "the over-budget request was not rejected"
    assert rejection.attributes["rejection_field"] == "team"
    assert rejection.attributes["rejection_rule"] == "budget"
    reason = rejection.attributes["rejection_reason"]
    resets = next_day(noon)
    assert reason.startswith(
        f"team 'research' has reached its daily budget: {hours_text(used)} of "
        f"{hours_text(budget.chip_hours_per_day)} chip-hours used today (UTC); it resets at "
        f"{resets:%Y-%m-%dT%H:%M:%SZ} (in ")
    left = re.search(r"\(in (\d+)h (\d+)m\)", reason)
    assert left is not None
    minutes = int(left.group(1)) * 60 + int(left.group(2))
    assert math.floor((resets - after).total_seconds() / 60) <= minutes
    assert minutes <= math.ceil((resets - before).total_seconds() / 60)
    assert wait_for(lambda: jobsets_for(custom, "e2e-budget-inference"))
    assert jobsets_for(custom, "e2e-budget-refused") == []
    assert admitted_id != refused_id

    clock.advance_to(resets + timedelta(minutes=1))
    fresh = wait_for(lambda: (s := cached_usage(core)) is not None
                     and s.day == resets.date() and s, timeout=60)
    assert fresh, "team_usage did not run after midnight"
    assert fresh.teams["research"].today == 0
    time.sleep(CACHE_SECONDS)
    publish_request(publisher, "gemma-v4.json", "e2e-budget-next-day")

    assert wait_for(lambda: jobsets_for(custom, "e2e-budget-next-day"), timeout=30)


def test_jobs_status_of_the_refused_request_gives_the_budget_usage_and_reset(sandbox):
    """The refusal above, as a user asks about it (the rejected event travels through
    ingest_metrics into job_events first)."""
    def status() -> subprocess.CompletedProcess[str] | None:
        done = subprocess.run([sys.executable, "-m", "shared.cli", "jobs", "status",
                               "e2e-budget-refused"], capture_output=True, text=True,
                              timeout=60, check=False)
        return done if done.returncode == 0 and "Rejected at" in done.stdout else None

    printed = wait_for(status, timeout=60)

    assert printed, "jobs status never found the refused request"
    assert "by submit_job: team 'research' has reached its daily budget: " in printed.stdout
    assert "chip-hours used today (UTC); it resets at " in printed.stdout
    assert "The field team broke the rule budget." in printed.stdout


def test_team_usage_did_only_what_its_identity_is_granted_and_used_every_rule(sandbox):
    """After the ticks above (a create, reads and updates of its ConfigMap), under RBAC
    as its own user."""
    from shared.deployment import system
    from shared.deployment.access import Probe, allowed_by_definition
    from shared.deployment.manifests import identity

    spec = system.function("team_usage")
    config = load_config(str(sandbox.config))
    lines = [json.loads(line) for line in sandbox.access.access_log.read_text().splitlines()]
    mine = [line for line in lines if line["user"] == identity(spec, PROJECT)]

    assert mine
    assert [line for line in mine if not line["allowed"]] == []
    for line in mine:
        probe = Probe(line["verb"], line["apiGroup"], line["resource"], line["namespace"],
                      line["name"] or "")
        assert allowed_by_definition(spec, probe, config), line
    assert {line["verb"] for line in mine} == {"get", "create", "update"}


def test_doctor_finds_the_budget_deployment_as_defined(sandbox, capsys):
    from shared.cli import main

    code = main(["doctor", "--state-dir", str(sandbox.state_dir)])

    report = capsys.readouterr().out
    assert code == 0, report
    assert ("team_usage (accelops-team-usage@accelops-local.iam.gserviceaccount.com) may do "
            "what it needs and nothing more") in report
    assert "subscription team-usage-team-usage delivers to team_usage" in report
