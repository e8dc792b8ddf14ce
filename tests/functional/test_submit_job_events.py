"""submit_job's lifecycle records (submitted, rejected) on the metrics topic, read back
with google-cloud-pubsub from the Pub/Sub stand-in."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from shared.metrics.job_event import JobEventRecord
from tests.functional.conftest import (
    job_request,
    jobsets,
    load_event,
    pull_job_events,
    pull_rejections,
    push_envelope,
)
from tests.jobs_fixtures import METRICS_TOPIC, PROJECT


def records(messages: list[Any]) -> list[JobEventRecord]:
    """Every record of the job_event messages, as ingest_metrics validates them."""
    found = []
    for message in messages:
        assert message.attributes["kind"] == "job_event"
        found.extend(JobEventRecord.model_validate(r) for r in json.loads(message.data))
    return found


def test_a_created_jobset_is_published_as_submitted_at_its_creation_time(app_client, cluster):
    assert app_client.post("/", json=load_event("pubsub_push_job_request.json")).status_code \
        == 200

    [jobset] = jobsets(cluster)
    [record] = records(pull_job_events())
    meta = jobset["metadata"]
    assert record.event == "submitted"
    assert record.event_id == "9876543210:submitted"
    assert record.request_id == "9876543210"
    assert record.team == "research"
    assert record.jobset == f"research/{meta['name']}"
    assert (record.tpu_type, record.slices, record.chips_per_slice) == ("v5litepod-16", 2, 16)
    assert record.at == datetime.fromisoformat(meta["creationTimestamp"].replace("Z", "+00:00"))


def test_a_redelivered_request_publishes_the_very_same_submitted_record_again(
    app_client, cluster
):
    body = {**job_request(), "request_id": "nightly-2026-11-21"}
    for message_id in ("100", "100", "101"):  # a redelivery, then a second publish
        assert app_client.post("/", json=push_envelope(body, message_id)).status_code == 200

    found = records(pull_job_events())

    assert len(jobsets(cluster)) == 1
    assert len(found) == 3
    assert {r.model_dump_json() for r in found} == {found[0].model_dump_json()}
    assert found[0].event_id == "nightly-2026-11-21:submitted"


def test_a_refused_request_is_published_as_rejected_under_its_own_request_id(
    app_client, cluster
):
    body = {**job_request(), "request_id": "too-big-1", "tpu": {"type": "v5litepod-16",
                                                                 "slices": 9}}

    assert app_client.post("/", json=push_envelope(body, "555")).status_code == 200

    [record] = records(pull_job_events())
    assert record.event_id == "too-big-1:rejected"
    assert record.team == "research"
    assert (record.field, record.rule) == ("tpu.slices", "must be at most 4")
    assert "9 slices requested" in (record.reason or "")
    assert record.jobset is None
    assert record.at == datetime.fromisoformat("2026-11-21T10:00:00.123+00:00")  # publishTime
    assert len(pull_rejections()) == 1  # the rejection record is still published
    assert jobsets(cluster) == []


def test_a_request_without_a_usable_request_id_is_rejected_under_its_message_id(
    app_client, cluster
):
    bodies = [b"\xff not json", json.dumps({"team": "x" * 400, "request_id": "-bad id"}).encode()]
    for index, data in enumerate(bodies):
        assert app_client.post("/", json=push_envelope(data, f"77{index}")).status_code == 200

    first, second = sorted(records(pull_job_events()), key=lambda r: r.request_id)
    assert (first.request_id, first.team) == ("770", None)
    assert first.field is not None
    assert second.request_id == "771"
    assert second.team is not None
    assert len(second.team) == 256
    assert second.team.endswith("characters in all]")


def test_the_request_is_retried_when_its_lifecycle_record_cannot_be_published(
    app_client, cluster, pubsub_api
):
    pubsub_api.broker.delete_topic(f"projects/{PROJECT}/topics/{METRICS_TOPIC}")

    created = app_client.post("/", json=load_event("pubsub_push_job_request.json"))
    refused = app_client.post("/", json=push_envelope(b"[]", "556"))

    # Retried, not acknowledged: the JobSet stays (a redelivery finds it), and the
    # refusal is not recorded until its lifecycle record can be.
    assert (created.status_code, refused.status_code) == (500, 500)
    assert len(jobsets(cluster)) == 1
    assert pull_rejections() == []
