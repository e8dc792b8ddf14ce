"""submit_job and the hostile messages a campaign found: each is refused with its field
and rule (2xx, recorded, nothing created), never answered 5xx and retried until it is
dead-lettered. The fuzz suite (tests/fuzz) searches for more; these name each class."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.cloud import pubsub_v1

from shared.jobs import submit
from shared.kube import LEASES
from shared.names import request_key
from tests.functional.conftest import (
    PROJECT,
    job_request,
    jobsets,
    pull_rejections,
    push_envelope,
)


def _with(**changes: Any) -> bytes:
    return json.dumps({**job_request(), **changes}).encode()


def _raw(key: str, text: str) -> bytes:
    """The request with ``key``'s value written as this JSON text."""
    return json.dumps({**job_request(), key: "@"}).replace('"@"', text).encode()


def _tpu(**changes: Any) -> bytes:
    return _with(tpu={"type": "v5litepod-16", "slices": 2, **changes})


HOSTILE: dict[str, tuple[bytes, str, str]] = {
    "nested 975 deep": (b"[" * 975 + b"]" * 975, "data", "nesting depth at most 4"),
    "nested 100,000 deep": (b"[" * 100_000 + b"]" * 100_000, "data", "nesting depth"),
    "an integer of 5,000 digits": (_raw("max_restarts", "9" * 5000), "max_restarts",
                                   "at most 20 digits"),
    "an integer of 5,000 digits in a field nobody reads": (_raw("x", "7" * 5000), "x",
                                                            "at most 20 digits"),
    "a lone surrogate in the team": (_with(team="\ud800"), "team", "valid Unicode"),
    "a lone surrogate in a key": (json.dumps({**job_request(), "\udfff": 1}).encode(),
                                  "\\udfff", "valid Unicode"),
    "a lone surrogate at the root": (b'["\\ud800"]', "<root>", "must be a JSON object"),
    "slices as text": (_tpu(slices="2"), "tpu.slices", "valid integer"),
    "slices as a boolean": (_tpu(slices=True), "tpu.slices", "valid integer"),
    "slices as a float": (_tpu(slices=2.0), "tpu.slices", "valid integer"),
    "max_restarts as text": (_with(max_restarts="3"), "max_restarts", "valid integer"),
    "spot as text": (_tpu(spot="true"), "tpu.spot", "valid boolean"),
    "NaN": (_raw("max_restarts", "NaN"), "max_restarts", "NaN is not a JSON number"),
    "a duplicated key": (_with().replace(b'"team": "research"',
                                         b'"team": "research", "team": "inference"'),
                         "<root>", "each key at most once"),
    "over 256 KiB": (_with(args=["x" * 4000] * 70), "data", "at most 262,144 bytes"),
    "hundreds of unknown fields": (
        json.dumps({**job_request(), **{f"f{i}": i for i in range(300)}}).encode(),
        "<root>", "at most 256 members"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_message_is_refused_with_its_field_and_rule_not_retried(
    app_client, cluster, case
):
    data, field, rule = HOSTILE[case]

    response = app_client.post("/", json=push_envelope(data, message_id="400"))

    assert response.status_code == 200
    assert jobsets(cluster) == []
    [rejection] = pull_rejections()
    assert rejection.attributes["rejection_field"] == field
    assert rule in rejection.attributes["rejection_rule"]
    assert rejection.data == data[:256 * 1024]


@pytest.mark.parametrize("change", [{"name": "train2"}, {"team": "inference",
                                                         "image": "ghcr.io/x/y:1"}])
def test_a_request_id_reused_with_only_the_name_or_team_changed_is_refused(
    app_client, cluster, change
):
    first = {**job_request(), "name": "train", "request_id": "rid-42"}
    app_client.post("/", json=push_envelope(first, message_id="401"))
    [original] = jobsets(cluster)

    response = app_client.post("/", json=push_envelope({**first, **change}, message_id="402"))

    assert response.status_code == 200
    [jobset] = jobsets(cluster)
    assert jobset["metadata"]["uid"] == original["metadata"]["uid"]
    [rejection] = pull_rejections()
    reason = rejection.attributes["rejection_reason"]
    assert rejection.attributes["rejection_field"] == "request_id"
    assert "'rid-42'" in reason
    assert f"research/{original['metadata']['name']}" in reason


def test_the_same_request_id_and_content_again_is_a_duplicate_not_a_refusal(
    app_client, cluster
):
    body = {**job_request(), "request_id": "rid-43"}

    statuses = [app_client.post("/", json=push_envelope(body, message_id=m)).status_code
                for m in ("403", "404")]

    assert statuses == [200, 200]
    assert len(jobsets(cluster)) == 1
    assert pull_rejections() == []


def test_a_message_with_a_hundred_attributes_of_its_own_still_gets_its_rejection_recorded(
    app_client, cluster
):
    envelope = push_envelope(b"not json", message_id="405")
    envelope["message"]["attributes"] = {f"a{i}": "v" * 1024 for i in range(100)}

    response = app_client.post("/", json=envelope)

    assert response.status_code == 200
    [rejection] = pull_rejections()
    assert len(rejection.attributes) == 100
    assert rejection.attributes["rejection_field"] == "data"
    assert int(rejection.attributes["rejection_attributes_dropped"]) == 6


def test_attributes_claiming_to_be_a_rejection_record_are_not_copied_onto_it(
    app_client, cluster
):
    envelope = push_envelope(b"not json", message_id="406")
    envelope["message"]["attributes"] = {"rejection_data_clipped_from": "999999",
                                         "rejection_field": "forged"}

    app_client.post("/", json=envelope)

    [rejection] = pull_rejections()
    assert rejection.attributes["rejection_field"] == "data"
    assert "rejection_data_clipped_from" not in rejection.attributes


def test_a_delivery_waits_for_another_holding_its_request_id_then_fails_to_be_retried(
    app_client, cluster, monkeypatch
):
    monkeypatch.setattr(submit, "REQUEST_LOCK_WAIT_SECONDS", 0.3)
    body = {**job_request(), "request_id": "rid-44"}
    cluster.create(LEASES, {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": f"accelops-request-{request_key('rid-44')}",
                     "namespace": "accelops-system"},
        "spec": {"holderIdentity": "another-delivery", "leaseDurationSeconds": 120,
                 "renewTime": "2999-01-01T00:00:00.000000Z"}})

    response = app_client.post("/", json=push_envelope(body, message_id="407"))

    assert response.status_code == 500
    assert jobsets(cluster) == []
    assert pull_rejections() == []


def test_the_rejections_topic_refusing_a_record_is_retried_not_acknowledged(
    app_client, cluster
):
    publisher = pubsub_v1.PublisherClient()
    publisher.delete_topic(topic=f"projects/{PROJECT}/topics/job-rejections")

    response = app_client.post("/", json=push_envelope(b"[1]", message_id="408"))

    assert response.status_code == 500
