"""Budgets from end to end, in process: job events through ingest_metrics into BigQuery,
a team_usage tick caching the teams' usage in a ConfigMap, submit_job refusing a team
over budget and admitting it again after UTC midnight.

The Kubernetes stand-in's clock is held at :data:`NOW` (a Wednesday evening): it is
the clock both functions take "now" from. Every job here has finished, so the view's
figures do not depend on BigQuery's own clock, and the expected chip-hours are plain
arithmetic over the jobs below.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import functions_framework
import pytest
import yaml

from shared import bigquery, kube
from shared.cli import main
from shared.config import MetricsConfig
from shared.jobs.budget.gate import reset_usage_cache
from shared.jobs.budget.model import USAGE_CONFIGMAP, USAGE_KEY, UsageSnapshot
from shared.kube import CONFIG_MAPS
from shared.metrics.job_event import JobEventRecord, job_event_id, job_event_message
from shared.metrics.schema import apply_schema
from tests.bigquery_fixtures import fresh_dataset
from tests.functional.conftest import (
    REPO,
    job_request,
    jobsets,
    load_event,
    pull_rejections,
    push_envelope,
)
from tests.functional.test_ingest_metrics import envelope
from tests.jobs_fixtures import CONFIG, PROJECT, topic

NOW = datetime(2026, 11, 25, 20, 48, tzinfo=UTC)  # Wednesday; Monday was the 23rd
STATE_NAMESPACE = "accelops-system"


def at(day: int, hour: int, minute: int = 0) -> datetime:
    """``hour``:``minute`` UTC on 2026-11-``day``."""
    return datetime(2026, 11, day, hour, minute, tzinfo=UTC)


@dataclass(frozen=True)
class Job:
    request_id: str
    team: str
    tpu_type: str
    slices: int
    chips_per_slice: int
    running: datetime
    finished: datetime

    def events(self) -> list[JobEventRecord]:
        described = {"team": self.team, "tpu_type": self.tpu_type, "slices": self.slices,
                     "chips_per_slice": self.chips_per_slice,
                     "jobset": f"{self.team}/{self.request_id}"}
        times = {"submitted": self.running - timedelta(minutes=20),
                 "admitted": self.running - timedelta(minutes=10),
                 "running": self.running, "finished": self.finished}
        return [JobEventRecord(event_id=job_event_id(self.request_id, event), event=event,
                               at=when, request_id=self.request_id,
                               outcome="succeeded" if event == "finished" else None,
                               **described)
                for event, when in times.items()]


JOBS = (
    # 32 chips across Tuesday's midnight: 2 h (64) on Tuesday, 2 h (64) today.
    Job("r-overnight", "research", "v5litepod-16", 2, 16, at(24, 22), at(25, 2)),
    # 16 chips for half an hour today: 8.
    Job("r-short", "research", "v4-32", 1, 16, at(25, 10), at(25, 10, 30)),
    # 8 chips from Sunday 20:00 to Monday 01:00: only Monday's hour (8) is this week.
    Job("r-weekend", "research", "v5litepod-8", 1, 8, at(22, 20), at(23, 1)),
    # Two weeks ago: in no figure.
    Job("r-old", "research", "v5litepod-8", 1, 8, at(10, 9), at(10, 19)),
    # A team without a budget: used a lot, cached nowhere.
    Job("p-big", "platform", "v5p-128", 4, 64, at(25, 1), at(25, 19)),
)
RESEARCH_TODAY, RESEARCH_WEEK = 64 + 8, 64 + 64 + 8 + 8


@dataclass
class World:
    kube: kube.KubeClient
    kube_api: Any
    usage: Any  # a functions-framework test client of team_usage
    config_path: Path


@pytest.fixture
def world(cluster: kube.KubeClient, kube_api: Any, pubsub_api: Any, bigquery_endpoint: str,
          ingest_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
          ) -> Iterator[World]:
    """The test teams with budgets (research: 50 a day and 500 a week; inference: 10 a
    week) and a platform team without one, a fresh metrics dataset holding the events
    of :data:`JOBS`, and the cluster's clock at :data:`NOW`."""
    config: dict[str, Any] = yaml.safe_load(CONFIG.read_text())
    config["teams"]["research"]["budget"] = {"chip_hours_per_day": 50,
                                             "chip_hours_per_week": 500}
    config["teams"]["inference"]["budget"] = {"chip_hours_per_week": 10}
    config["teams"]["platform"] = {"namespace": "platform", "queue": "platform-queue"}
    config["metrics"] = fresh_dataset().model_dump()
    path = tmp_path / "budgets.yaml"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("ACCELOPS_CONFIG", str(path))
    monkeypatch.setenv("BIGQUERY_EMULATOR_HOST", bigquery_endpoint)
    pubsub_api.broker.create_topic(topic("slices-reconcile"))
    kube_api.store.clock = lambda: NOW
    bigquery.reset_client()
    reset_usage_cache()
    apply_schema(PROJECT, MetricsConfig.model_validate(config["metrics"]))
    data, attributes = job_event_message(e for job in JOBS for e in job.events())
    event = envelope(message_id="7770001")
    event["message"]["data"] = base64.b64encode(data).decode()
    event["message"]["attributes"] = attributes
    response = ingest_client.post("/", json=event)
    assert response.status_code == 200, response.get_data(as_text=True)
    usage = functions_framework.create_app("team_usage", str(REPO / "functions" / "main.py"),
                                           "cloudevent").test_client()
    try:
        yield World(cluster, kube_api, usage, path)
    finally:
        bigquery.reset_client()
        reset_usage_cache()


def tick(world: World, message_id: str = "13579024680") -> None:
    event = load_event("pubsub_push_scheduler_tick.json")
    event["message"].update(messageId=message_id, message_id=message_id)
    response = world.usage.post("/", json=event)
    assert response.status_code == 200, response.get_data(as_text=True)


def cached(world: World) -> UsageSnapshot:
    configmap = world.kube.get(CONFIG_MAPS, USAGE_CONFIGMAP, STATE_NAMESPACE)
    return UsageSnapshot.model_validate_json(configmap["data"][USAGE_KEY])


def test_a_tick_caches_each_budgeted_teams_chip_hours_today_and_this_week(world):
    tick(world)

    snapshot = cached(world)
    assert snapshot.as_of == NOW
    assert (snapshot.day.isoformat(), snapshot.week_start.isoformat()) == ("2026-11-25",
                                                                          "2026-11-23")
    assert set(snapshot.teams) == {"research", "inference"}
    research = snapshot.teams["research"]
    assert (research.today, research.week) == pytest.approx((RESEARCH_TODAY, RESEARCH_WEEK))
    assert (snapshot.teams["inference"].today, snapshot.teams["inference"].week) == (0, 0)


def test_a_team_over_budget_is_refused_with_its_usage_and_reset_another_team_is_admitted(
    app_client, world
):
    tick(world)

    refused = app_client.post("/", json=push_envelope(job_request(), message_id="401"))
    inference = {**job_request(), "team": "inference", "tpu": {"type": "v6e-8", "slices": 1}}
    admitted = app_client.post("/", json=push_envelope(inference, message_id="402"))

    assert (refused.status_code, admitted.status_code) == (200, 200)
    assert [j["metadata"]["namespace"] for j in jobsets(world.kube)] == ["inference"]
    [rejection] = pull_rejections()
    assert rejection.attributes["source_message_id"] == "401"
    assert rejection.attributes["rejection_rule"] == "budget"
    assert rejection.attributes["rejection_reason"] == (
        "team 'research' has reached its daily budget: 72 of 50 chip-hours used today (UTC); "
        "it resets at 2026-11-26T00:00:00Z (in 3h 12m)")


def test_after_utc_midnight_the_next_tick_lifts_the_daily_refusal(app_client, world):
    tick(world)
    world.kube_api.store.clock = lambda: at(26, 0, 5)
    tick(world, message_id="13579024681")
    reset_usage_cache()

    response = app_client.post("/", json=push_envelope(job_request(), message_id="403"))

    snapshot = cached(world)
    assert (snapshot.day.isoformat(), snapshot.teams["research"].today) == ("2026-11-26", 0)
    assert snapshot.teams["research"].week == pytest.approx(RESEARCH_WEEK)
    assert response.status_code == 200
    assert len(jobsets(world.kube)) == 1
    assert pull_rejections() == []


def test_a_repeated_tick_rewrites_the_one_configmap(world):
    tick(world)
    world.kube_api.store.clock = lambda: NOW + timedelta(minutes=5)
    tick(world, message_id="13579024682")

    assert cached(world).as_of == NOW + timedelta(minutes=5)
    names = [c["metadata"]["name"] for c in world.kube.list(CONFIG_MAPS, STATE_NAMESPACE)]
    assert names.count(USAGE_CONFIGMAP) == 1


def test_without_budgets_a_tick_writes_nothing(world, monkeypatch):
    config = yaml.safe_load(world.config_path.read_text())
    for team in config["teams"].values():
        team.pop("budget", None)
    path = world.config_path.with_name("no-budgets.yaml")
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("ACCELOPS_CONFIG", str(path))
    world.kube_api.request_log.clear()

    tick(world)

    assert list(world.kube_api.request_log) == []
    assert world.kube.find(CONFIG_MAPS, USAGE_CONFIGMAP, STATE_NAMESPACE) is None


def test_a_missing_view_is_retried_as_a_deployment_error(world, monkeypatch):
    config = yaml.safe_load(world.config_path.read_text())
    config["metrics"] = fresh_dataset().model_dump()  # a dataset nobody created
    path = world.config_path.with_name("no-views.yaml")
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("ACCELOPS_CONFIG", str(path))

    event = load_event("pubsub_push_scheduler_tick.json")
    response = world.usage.post("/", json=event)

    assert response.status_code == 500
    assert world.kube.find(CONFIG_MAPS, USAGE_CONFIGMAP, STATE_NAMESPACE) is None


def test_the_cached_snapshot_is_plain_json_people_can_read(world):
    tick(world)

    raw = json.loads(world.kube.get(CONFIG_MAPS, USAGE_CONFIGMAP, STATE_NAMESPACE)
                     ["data"][USAGE_KEY])
    assert raw["as_of"].startswith("2026-11-25T20:48:00")
    assert raw["teams"]["research"] == {"today": pytest.approx(72), "week": pytest.approx(144)}


def test_jobs_usage_prints_what_the_next_request_of_each_team_would_meet(world, capsys):
    tick(world)

    assert main(["jobs", "usage"]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("usage as of 2026-11-25T20:48:00Z (0 min ago), from ConfigMap "
                               "accelops-system/accelops-team-usage")
    rows = {line.split()[0]: line for line in lines[3:]}
    assert rows["research"].split()[1:4] == ["72", "/", "50"]
    assert rows["research"].endswith("it resets at 2026-11-26T00:00:00Z (in 3h 12m)")
    assert rows["inference"].endswith("admitted")
    assert rows["platform"].endswith("no budget")
