"""What the functions answer to requests that never reach their handler, or are not
Pub/Sub messages at all: 400 with the reason, never a 500 that asks for a retry."""

from __future__ import annotations

import logging

import pytest

from tests.functional.test_ingest_metrics import envelope

UNREADABLE = {
    "a structured CloudEvent that is a JSON array": (
        b"[1, 2]", "application/cloudevents+json"),
    "a structured CloudEvent nested 5,000 deep": (
        b"[" * 5000 + b"]" * 5000, "application/cloudevents+json"),
    "a push body nested 5,000 deep": (b"[" * 5000 + b"]" * 5000, "application/json"),
    "a push body with a 5,000-digit number": (
        b'{"message": {"data": "", "messageId": "1"}, "x": ' + b"1" * 5000 + b"}",
        "application/json"),
    "a push body without a message": (b'{"subscription": "s"}', "application/json"),
    "a push body whose message id is not text": (
        b'{"message": {"data": "", "messageId": ["1"]}}', "application/json"),
}


@pytest.mark.parametrize("case", sorted(UNREADABLE))
@pytest.mark.parametrize("function", ["ingest_client", "app_client"])
def test_a_request_that_is_not_a_pubsub_event_is_answered_400_with_the_reason(
    request, case, function
):
    client = request.getfixturevalue(function)
    body, content_type = UNREADABLE[case]

    response = client.post("/", data=body, headers={"Content-Type": content_type})

    assert response.status_code == 400
    assert response.get_data(as_text=True)


def test_a_request_the_framework_cannot_parse_is_logged_with_the_cause(app_client, caplog):
    caplog.set_level(logging.ERROR, logger="accelops")

    app_client.post("/", data=b"[" * 5000 + b"]" * 5000,
                    headers={"Content-Type": "application/cloudevents+json"})

    [entry] = [r for r in caplog.records if r.name == "accelops.entry"]
    assert "RecursionError" in entry.getMessage()


def test_a_failure_inside_the_handler_is_still_a_500_that_pubsub_retries(
    ingest_client, metrics_store, monkeypatch
):
    monkeypatch.delenv("ACCELOPS_PROJECT")

    assert ingest_client.post("/", json=envelope()).status_code == 500


def test_the_frameworks_own_answers_stand(ingest_client):
    assert ingest_client.get("/").status_code == 405
