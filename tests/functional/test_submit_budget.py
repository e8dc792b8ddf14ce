"""submit_job holds each team to its budget, read from the cached usage ConfigMap.

The ConfigMap is written here as team_usage writes it (its own module's model), on the
Kubernetes stand-in; the rest — the JobSet list, the rejection record on Pub/Sub — is
the deployed function's path through functions-framework.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared import kube
from shared.jobs.budget.gate import reset_usage_cache
from shared.jobs.budget.model import USAGE_CONFIGMAP, USAGE_KEY, TeamUsage, UsageSnapshot
from shared.kube import CONFIG_MAPS
from tests.functional.conftest import job_request, jobsets, pull_rejections, push_envelope
from tests.jobs_fixtures import CONFIG, topic

STATE_NAMESPACE = "accelops-system"


@pytest.fixture
def budgets(cluster: kube.KubeClient, pubsub_api: Any, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[kube.KubeClient]:
    """The test configuration with a daily and weekly budget for research only (and the
    topic submit_job nudges reconcile_slices on, so that its nudges find one)."""
    pubsub_api.broker.create_topic(topic("slices-reconcile"))
    config: dict[str, Any] = yaml.safe_load(CONFIG.read_text())
    config["teams"]["research"]["budget"] = {"chip_hours_per_day": 100,
                                             "chip_hours_per_week": 400}
    path = tmp_path / "budgets.yaml"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("ACCELOPS_CONFIG", str(path))
    reset_usage_cache()
    yield cluster
    reset_usage_cache()


def cache_usage(client: kube.KubeClient, *, today: float, week: float,
                as_of: datetime | None = None) -> None:
    as_of = as_of or datetime.now(UTC)
    monday = (as_of - timedelta(days=as_of.weekday())).date()
    snapshot = UsageSnapshot(as_of=as_of, day=as_of.date(), week_start=monday,
                             teams={"research": TeamUsage(today=today, week=week)})
    client.create(CONFIG_MAPS, {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": USAGE_CONFIGMAP, "namespace": STATE_NAMESPACE},
        "data": {USAGE_KEY: snapshot.model_dump_json()}})


def usage_reads(kube_api: Any) -> int:
    return sum(1 for method, path in kube_api.request_log
               if method == "GET" and path.endswith(f"/configmaps/{USAGE_CONFIGMAP}"))


def test_a_request_of_a_team_over_its_daily_budget_is_rejected_with_budget_usage_and_reset(
    app_client, budgets
):
    cache_usage(budgets, today=120.5, week=130)

    response = app_client.post("/", json=push_envelope(job_request(), message_id="300"))

    assert response.status_code == 200
    assert jobsets(budgets) == []
    [rejection] = pull_rejections()
    attributes = rejection.attributes
    assert (attributes["rejection_field"], attributes["rejection_rule"]) == ("team", "budget")
    reason = attributes["rejection_reason"]
    midnight = datetime.combine(datetime.now(UTC).date() + timedelta(days=1),
                                datetime.min.time(), UTC)
    assert reason.startswith("team 'research' has reached its daily budget: "
                             "120.5 of 100 chip-hours used today (UTC)")
    assert f"resets at {midnight:%Y-%m-%dT%H:%M:%SZ} (in " in reason


def test_a_team_under_its_budget_gets_its_jobset(app_client, budgets):
    cache_usage(budgets, today=99.9, week=399.9)

    response = app_client.post("/", json=push_envelope(job_request(), message_id="301"))

    assert response.status_code == 200
    assert len(jobsets(budgets)) == 1
    assert pull_rejections() == []


def test_a_team_without_a_budget_is_admitted_without_reading_the_usage(
    app_client, budgets, kube_api
):
    cache_usage(budgets, today=10_000, week=10_000)
    request = {**job_request(), "team": "inference", "tpu": {"type": "v6e-8", "slices": 1}}

    response = app_client.post("/", json=push_envelope(request, message_id="302"))

    assert response.status_code == 200
    assert [j["metadata"]["namespace"] for j in jobsets(budgets)] == ["inference"]
    assert usage_reads(kube_api) == 0


def test_a_redelivered_request_stays_a_duplicate_after_its_team_went_over_budget(
    app_client, budgets
):
    cache_usage(budgets, today=0, week=0)
    envelope = push_envelope(job_request(), message_id="303")
    app_client.post("/", json=envelope)
    budgets.delete(CONFIG_MAPS, USAGE_CONFIGMAP, STATE_NAMESPACE)
    cache_usage(budgets, today=500, week=500)
    reset_usage_cache()

    again = app_client.post("/", json=envelope)

    assert again.status_code == 200
    assert len(jobsets(budgets)) == 1
    assert pull_rejections() == []


def test_submissions_in_a_burst_read_the_usage_once(app_client, budgets, kube_api):
    cache_usage(budgets, today=1, week=1)

    for n in range(3):
        request = {**job_request(), "request_id": f"burst-{n}"}
        app_client.post("/", json=push_envelope(request, message_id=f"31{n}"))

    assert len(jobsets(budgets)) == 3
    assert usage_reads(kube_api) == 1


def test_without_a_cached_usage_a_team_with_a_budget_is_admitted_and_a_warning_logged(
    app_client, budgets, caplog
):
    caplog.set_level(logging.WARNING, logger="accelops")

    response = app_client.post("/", json=push_envelope(job_request(), message_id="320"))

    assert response.status_code == 200
    assert len(jobsets(budgets)) == 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any("without a budget check" in r.getMessage() for r in warnings)


def test_a_stale_cached_usage_is_not_enforced(app_client, budgets, caplog):
    caplog.set_level(logging.WARNING, logger="accelops")
    cache_usage(budgets, today=5_000, week=5_000,
                as_of=datetime.now(UTC) - timedelta(hours=2))

    response = app_client.post("/", json=push_envelope(job_request(), message_id="321"))

    assert response.status_code == 200
    assert len(jobsets(budgets)) == 1
    assert any("old" in r.getMessage() and "stale" in r.getMessage() for r in caplog.records)


def test_usage_the_function_may_not_read_admits_the_request_and_logs_an_error(
    app_client, budgets, kube_api, caplog
):
    caplog.set_level(logging.WARNING, logger="accelops")
    cache_usage(budgets, today=5_000, week=5_000)
    kube_api.faults.fail_next(1, code=403, method="GET", path_contains=USAGE_CONFIGMAP)

    response = app_client.post("/", json=push_envelope(job_request(), message_id="322"))

    assert response.status_code == 200
    assert len(jobsets(budgets)) == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("budgets are not enforced" in m for m in errors)


def test_the_kubernetes_api_failing_on_the_usage_read_retries_the_delivery(
    app_client, budgets, kube_api
):
    cache_usage(budgets, today=5_000, week=5_000)
    kube_api.faults.fail_next(1, code=503, method="GET", path_contains=USAGE_CONFIGMAP)

    response = app_client.post("/", json=push_envelope(job_request(), message_id="323"))

    assert response.status_code == 500
    assert jobsets(budgets) == []
    assert pull_rejections() == []
