"""submit_job through functions-framework, with events in the exact delivery formats."""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import sys
from typing import Any

import pytest
from cloudevents.conversion import to_binary
from cloudevents.http import CloudEvent

from shared.kube import NAMESPACES
from tests.functional.conftest import (
    REPO,
    job_request,
    jobsets,
    load_event,
    pull_rejections,
    push_envelope,
)


def test_a_pubsub_push_of_a_valid_request_creates_its_jobset(app_client, cluster):
    response = app_client.post("/", json=load_event("pubsub_push_job_request.json"))

    assert response.status_code == 200
    [jobset] = jobsets(cluster)
    meta = jobset["metadata"]
    assert meta["namespace"] == "research"
    assert meta["labels"]["kueue.x-k8s.io/queue-name"] == "research-queue"
    assert meta["annotations"]["accelops.dev/request-id"] == "9876543210"
    assert jobset["spec"]["replicatedJobs"][0]["replicas"] == 2
    assert pull_rejections() == []


def test_an_eventarc_cloudevent_of_a_valid_request_creates_its_jobset(app_client, cluster):
    stored = load_event("eventarc_job_request.json")
    data = stored.pop("data")
    headers, body = to_binary(CloudEvent(stored, data))

    response = app_client.post("/", headers=headers, data=body)

    assert response.status_code == 200
    [jobset] = jobsets(cluster)
    assert jobset["metadata"]["annotations"]["accelops.dev/request-id"] == "1122334455"


def test_the_same_message_delivered_twice_creates_one_jobset(app_client, cluster, caplog):
    event = load_event("pubsub_push_job_request.json")
    caplog.set_level(logging.INFO, logger="accelops")

    first = app_client.post("/", json=event)
    second = app_client.post("/", json=event)

    assert (first.status_code, second.status_code) == (200, 200)
    assert len(jobsets(cluster)) == 1
    assert any("duplicate" in r.getMessage() for r in caplog.records)


def test_two_messages_with_one_request_id_create_one_jobset(app_client, cluster):
    body = {**job_request(), "request_id": "nightly-2026-11-21"}

    responses = [app_client.post("/", json=push_envelope(body, message_id=m))
                 for m in ("100", "101")]

    assert [r.status_code for r in responses] == [200, 200]
    [jobset] = jobsets(cluster)
    assert jobset["metadata"]["annotations"]["accelops.dev/request-id"] == "nightly-2026-11-21"


def test_a_request_id_reused_for_another_request_is_rejected_and_changes_nothing(
    app_client, cluster
):
    first = {**job_request(), "request_id": "shared-id"}
    second = {**first, "args": ["--steps=999999"]}
    app_client.post("/", json=push_envelope(first, message_id="200"))

    response = app_client.post("/", json=push_envelope(second, message_id="201"))

    assert response.status_code == 200
    [jobset] = jobsets(cluster)
    container = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"][0]
    assert container["args"] == ["--steps=1000"]
    [rejection] = pull_rejections()
    assert rejection.attributes["rejection_field"] == "request_id"


def _invalid(change: dict[str, Any]) -> dict[str, Any]:
    body = job_request()
    for key, value in change.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return body


INVALID_REQUESTS = {
    "not-json": (b"{this is not json", "data", "must be UTF-8 JSON"),
    "schema": (_invalid({"image": None}), "image", "Field required"),
    "unknown-team": (_invalid({"team": "marketing"}), "team", "must be a team"),
    "unknown-tpu-type": (_invalid({"tpu": {"type": "v9-64", "slices": 1}}), "tpu.type",
                         "known"),
    "tpu-type-not-allowed": (_invalid({"tpu": {"type": "v6e-16", "slices": 1}}), "tpu.type",
                             "tpu_types"),
    "image-not-allowed": (_invalid({"image": "docker.io/someone/miner:1"}), "image",
                          "image_prefixes"),
    "zero-slices": (_invalid({"tpu": {"type": "v5litepod-16", "slices": 0}}), "tpu.slices",
                    "greater than or equal to 1"),
    "too-many-slices": (_invalid({"tpu": {"type": "v5litepod-16", "slices": 5}}),
                        "tpu.slices", "at most 4"),
    "pod-spec-injection": (_invalid({"serviceAccountName": "cluster-admin"}),
                           "serviceAccountName", "not allowed"),
    "privileged-injection": (_invalid({"securityContext": {"privileged": True}}),
                             "securityContext", "not allowed"),
}


@pytest.mark.parametrize("case", sorted(INVALID_REQUESTS))
def test_an_invalid_request_is_acknowledged_recorded_and_creates_nothing(
    app_client, cluster, caplog, case
):
    payload, field, rule = INVALID_REQUESTS[case]
    envelope = push_envelope(payload, message_id="300")
    caplog.set_level(logging.INFO, logger="accelops")

    response = app_client.post("/", json=envelope)

    assert response.status_code == 200
    assert jobsets(cluster) == []
    [rejection] = pull_rejections()
    assert base64.b64encode(rejection.data).decode() == envelope["message"]["data"]
    assert rejection.attributes["source_message_id"] == "300"
    assert rejection.attributes["rejection_field"] == field
    assert rule in rejection.attributes["rejection_rule"]
    assert rejection.attributes["origin"] == "ci"  # the original attributes travel along
    [error] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert error.fields["field"] == field
    assert rule in error.fields["rule"]


@pytest.mark.parametrize("code", [503, 500, 429])
def test_kubernetes_answering_an_error_makes_the_delivery_fail_so_pubsub_retries(
    app_client, cluster, kube_api, code
):
    kube_api.faults.fail_next(10, code=code)

    response = app_client.post("/", json=load_event("pubsub_push_job_request.json"))

    assert response.status_code == 500
    kube_api.faults.clear()
    assert jobsets(cluster) == []


def test_a_retry_after_kubernetes_comes_back_creates_exactly_one_jobset(
    app_client, cluster, kube_api
):
    event = load_event("pubsub_push_job_request.json")
    kube_api.stop()
    failed = app_client.post("/", json=event)
    kube_api.start()

    retried = app_client.post("/", json=event)
    again = app_client.post("/", json=event)

    assert failed.status_code == 500
    assert (retried.status_code, again.status_code) == (200, 200)
    assert len(jobsets(cluster)) == 1


def test_a_missing_team_namespace_is_retried_not_rejected(app_client, cluster):
    body = {**job_request(), "team": "inference", "tpu": {"type": "v6e-8", "slices": 1}}
    cluster.delete(NAMESPACES, "inference")

    response = app_client.post("/", json=push_envelope(body))

    assert response.status_code == 500
    assert pull_rejections() == []


def test_a_rejection_that_cannot_be_recorded_is_retried(app_client, cluster, monkeypatch,
                                                          tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text((REPO / "tests/data/config.yaml").read_text().replace(
        "rejections: job-rejections", "rejections: no-such-topic"))
    monkeypatch.setenv("ACCELOPS_CONFIG", str(config))

    response = app_client.post("/", json=push_envelope(b"not json"))

    assert response.status_code == 500


def test_an_unusable_configuration_is_retried_not_rejected(app_client, cluster, monkeypatch):
    monkeypatch.setenv("ACCELOPS_CONFIG", "/nonexistent/config.yaml")

    response = app_client.post("/", json=load_event("pubsub_push_job_request.json"))

    assert response.status_code == 500
    assert pull_rejections() == []


def test_an_event_that_is_not_a_pubsub_message_is_answered_400_with_its_reason(
    app_client, cluster
):
    headers, body = to_binary(CloudEvent(
        {"type": "google.cloud.pubsub.topic.v1.messagePublished", "source": "//test"},
        {"unexpected": True}))

    response = app_client.post("/", headers=headers, data=body)

    assert response.status_code == 400
    assert "no 'message' object" in response.get_data(as_text=True)
    assert jobsets(cluster) == []
    assert pull_rejections() == []


def test_the_rejection_path_never_imports_the_kubernetes_or_container_clients(
    cluster, pubsub_api
):
    script = f"""
import json, sys, base64
import functions_framework
app = functions_framework.create_app("submit_job", {str(REPO / 'functions/main.py')!r},
                                     "cloudevent").test_client()
envelope = json.loads({json.dumps(json.dumps(push_envelope(b"not json")))})
status = app.post("/", json=envelope).status_code
loaded = sorted(m for m in sys.modules
                if m.split(".")[0] == "kubernetes" or m.startswith("google.cloud.container"))
print(json.dumps({{"status": status, "loaded": loaded,
                  "pubsub": "google.cloud.pubsub_v1" in sys.modules}}))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=dict(os.environ), timeout=60, check=True)
    outcome = json.loads(result.stdout.strip().splitlines()[-1])

    assert outcome == {"status": 200, "loaded": [], "pubsub": True}
    assert len(pull_rejections()) == 1


def test_a_created_jobset_asks_reconcile_slices_to_run(app_client, cluster, pubsub_api):
    from sandbox.pubsub import SubscriptionConfig

    topic = "projects/accelops-test/topics/slices-reconcile"
    pubsub_api.broker.create_topic(topic)
    sub = "projects/accelops-test/subscriptions/reconcile-audit"
    pubsub_api.broker.create_subscription(SubscriptionConfig(name=sub, topic=topic))

    response = app_client.post("/", json=load_event("pubsub_push_job_request.json"))
    [delivery] = pubsub_api.broker.pull(sub, 10, timeout=5)

    assert response.status_code == 200
    [jobset] = jobsets(cluster)
    assert delivery.message.attributes == {
        "trigger": "jobset-applied",
        "jobset": f"research/{jobset['metadata']['name']}"}
