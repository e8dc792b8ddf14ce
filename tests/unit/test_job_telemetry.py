"""The submitted and rejected records submit_job publishes, built from what it holds."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from shared.config import AccelopsConfig
from shared.errors import PermanentError
from shared.jobspec.policy import check_policy
from shared.jobspec.render import render_jobset
from shared.jobspec.request import parse_job_request
from shared.metrics.job_event import JobEventRecord
from shared.telemetry.events import job_facts, record_id, rejected_event, submitted_event, team_of

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
CONFIG = AccelopsConfig.model_validate({"teams": {
    "research": {"namespace": "research", "queue": "research-queue"},
    "inference": {"namespace": "inference", "queue": "inference-queue"}}})
REQUEST = {"name": "llama", "team": "research", "image": "us-docker.pkg.dev/acme/t:1",
           "tpu": {"type": "v5p-128", "slices": 3}}
ERROR = PermanentError("9 slices requested; at most 4", field="tpu.slices",
                       rule="must be at most 4")


def jobset(request_id: str = "req-1", **changes: object) -> dict:
    request = parse_job_request({**REQUEST, **changes})
    return render_jobset(check_policy(request, CONFIG), request_id)


def test_a_jobset_names_the_configured_team_it_was_made_for_with_its_shape():
    facts = job_facts(jobset(), CONFIG.teams)

    assert facts is not None
    assert facts.team == "research"
    assert facts.request_id == "req-1"
    assert facts.jobset.startswith("research/llama-")
    assert (facts.tpu_type, facts.slices, facts.chips_per_slice) == ("v5p-128", 3, 64)


def test_a_team_label_matching_no_configured_team_is_kept_as_it_is():
    assert team_of({"accelops.dev/team": "gone"}, "x", CONFIG.teams) == "gone"
    assert team_of({}, "x", CONFIG.teams) is None
    assert team_of({"accelops.dev/team": "research"}, "elsewhere", CONFIG.teams) == "research"


def test_a_jobset_accelops_did_not_submit_has_no_lifecycle():
    foreign = {"metadata": {"name": "x", "namespace": "y", "annotations": {}}, "spec": {}}

    assert job_facts(foreign, CONFIG.teams) is None


def test_submitted_is_dated_by_the_jobset_creation_then_the_publish_time_then_now():
    created = {**jobset(), "metadata": {**jobset()["metadata"],
                                        "creationTimestamp": "2026-11-21T09:00:00Z"}}

    dated = submitted_event(created, CONFIG.teams, publish_time="2026-11-21T08:59:59.5Z",
                            now=NOW)
    published = submitted_event(jobset(), CONFIG.teams,
                                publish_time="2026-11-21T08:59:59.5Z", now=NOW)
    unknown = submitted_event(jobset(), CONFIG.teams, publish_time="yesterday", now=NOW)

    assert dated.at == datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
    assert published.at == datetime(2026, 11, 21, 8, 59, 59, 500000, tzinfo=UTC)
    assert unknown.at == NOW
    assert dated.event_id == "req-1:submitted"


def test_a_rejection_is_keyed_by_the_request_id_the_request_model_accepts():
    data = json.dumps({"request_id": "  nightly-7  ", "team": "research"}).encode()

    record = rejected_event(data, "42", ERROR, publish_time=None, now=NOW)

    assert record.event_id == "nightly-7:rejected"
    assert (record.team, record.field, record.rule) == ("research", "tpu.slices",
                                                         "must be at most 4")
    assert record.reason == ERROR.message
    assert record.at == NOW


@pytest.mark.parametrize("data", [
    b"not json", b"[1, 2]", b'{"request_id": 7}', b'{"request_id": "-leading-dash"}',
    b'{"request_id": ""}', json.dumps({"request_id": "x" * 129}).encode(),
])
def test_a_rejection_without_a_usable_request_id_is_keyed_by_the_message_id(data):
    record = rejected_event(data, "1234567", ERROR, publish_time="2026-11-21T10:00:00Z",
                            now=NOW)

    assert record.request_id == "1234567"
    assert record.at == datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


def test_any_text_the_sender_controls_still_makes_a_valid_record():
    data = json.dumps({"team": "\ud800" + "t" * 1000}).encode()
    error = PermanentError("\udfff" * 5000, field="f" * 400, rule="r\ud800")

    record = rejected_event(data, "a message id+with spaces?", error, publish_time=None,
                            now=NOW)

    again = JobEventRecord.model_validate_json(record.model_dump_json())
    assert again == record
    assert record.request_id == record_id("a message id+with spaces?")
    assert record.request_id.startswith("message-")
    assert len(record.team or "") == 256
    assert len(record.reason or "") == 1024
    assert "\ufffd" in (record.team or "")

