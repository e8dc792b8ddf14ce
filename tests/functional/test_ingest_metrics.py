"""ingest_metrics through functions-framework, writing to a real BigQuery endpoint."""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from shared import bigquery
from tests.bigquery_fixtures import count
from tests.functional.conftest import REPO, load_event

EVENT = "pubsub_push_loadtest_metrics.json"


def envelope(records: Any = None, message_id: str = "5550001") -> dict[str, Any]:
    """The stored push event, optionally with other records or another message id."""
    event = copy.deepcopy(load_event(EVENT))
    if records is not None:
        data = records if isinstance(records, bytes) else json.dumps(records).encode()
        event["message"]["data"] = base64.b64encode(data).decode()
    event["message"].update(messageId=message_id, message_id=message_id)
    return event


def stored_records() -> list[dict[str, Any]]:
    data = load_event(EVENT)["message"]["data"]
    records: list[dict[str, Any]] = json.loads(base64.b64decode(data))
    return records


def test_a_pushed_batch_of_records_lands_in_the_views(ingest_client, metrics_store):
    response = ingest_client.post("/", json=envelope())

    assert response.status_code == 200
    assert count(metrics_store, "requests_unique") == 3
    [summary] = bigquery.query(
        "accelops-test", f"SELECT * FROM `accelops-test.{metrics_store.dataset}.test_summary`")
    assert summary["test_id"] == "lt-20261121-100000-ab12"
    assert summary["requests"] == 3
    assert summary["errors"] == 1
    assert summary["output_tokens"] == 32


def test_a_redelivered_message_adds_no_duplicates_to_the_views(ingest_client, metrics_store):
    for _ in range(3):
        assert ingest_client.post("/", json=envelope()).status_code == 200

    assert count(metrics_store, "requests_unique") == 3
    assert count(metrics_store, "test_summary", "requests = 3") == 1
    # The raw table may hold the copies (the local endpoint ignores insertIds); only the
    # views promise uniqueness.
    assert count(metrics_store, "requests") >= 3


def test_a_poison_record_is_rejected_with_its_reason_and_the_good_ones_are_stored(
    ingest_client, metrics_store, caplog
):
    records = stored_records()
    records[1]["response_time"] = "fast"

    response = ingest_client.post("/", json=envelope(records, message_id="5550002"))

    assert response.status_code == 200
    assert count(metrics_store, "requests_unique") == 2
    [rejection] = bigquery.query(
        "accelops-test", f"SELECT * FROM `accelops-test.{metrics_store.dataset}.rejections`")
    assert rejection["row_key"] == "5550002:1"
    assert rejection["reason"].startswith("response_time: Input should be a valid number")
    assert json.loads(rejection["record"])["response_time"] == "fast"
    assert "rejected 1" in caplog.text


def test_a_message_that_is_not_json_is_acknowledged_and_recorded_as_rejected(
    ingest_client, metrics_store
):
    response = ingest_client.post("/", json=envelope(b"records, but not JSON",
                                                     message_id="5550003"))

    assert response.status_code == 200
    assert count(metrics_store, "requests") == 0
    assert count(metrics_store, "rejections", "row_key = '5550003:message'") == 1


def test_bigquery_unreachable_fails_the_delivery_and_the_retry_stores_it_once(
    ingest_client, metrics_store, bigquery_endpoint, monkeypatch
):
    monkeypatch.setattr(bigquery, "INSERT_DEADLINE", 1.0)
    monkeypatch.setenv("BIGQUERY_EMULATOR_HOST", "http://127.0.0.1:9")  # nothing listens

    failed = ingest_client.post("/", json=envelope())

    monkeypatch.setenv("BIGQUERY_EMULATOR_HOST", bigquery_endpoint)
    retried = ingest_client.post("/", json=envelope())
    assert failed.status_code == 500
    assert retried.status_code == 200
    assert count(metrics_store, "requests_unique") == 3


def test_a_missing_table_is_retried_not_acknowledged(ingest_client, metrics_store,
                                                     monkeypatch, tmp_path):
    config = tmp_path / "elsewhere.yaml"
    config.write_text("metrics:\n  dataset: never_created\n")
    monkeypatch.setenv("ACCELOPS_CONFIG", str(config))

    response = ingest_client.post("/", json=envelope())

    assert response.status_code == 500


def test_a_missing_project_setting_is_retried_not_acknowledged(ingest_client, metrics_store,
                                                               monkeypatch):
    monkeypatch.delenv("ACCELOPS_PROJECT")

    assert ingest_client.post("/", json=envelope()).status_code == 500


@pytest.mark.parametrize("size", [499, 500, 501, 1201])
def test_large_messages_are_written_in_requests_of_at_most_500_rows(
    ingest_client, metrics_store, size
):
    record = stored_records()[0]
    records = [dict(record, start_time=record["start_time"] + i / 1000) for i in range(size)]

    response = ingest_client.post("/", json=envelope(records, message_id=f"big-{size}"))

    assert response.status_code == 200
    assert count(metrics_store, "requests_unique") == size


def test_ingesting_imports_neither_kubernetes_nor_the_container_or_pubsub_clients(
    metrics_store
):
    script = f"""
import json, sys
import functions_framework
app = functions_framework.create_app("ingest_metrics", {str(REPO / 'functions/main.py')!r},
                                     "cloudevent").test_client()
status = app.post("/", json=json.loads({json.dumps(json.dumps(envelope(message_id="cold-1")))}
                                       )).status_code
loaded = sorted(m for m in sys.modules if m.split(".")[0] == "kubernetes"
                or m.startswith(("google.cloud.container", "google.cloud.pubsub")))
print(json.dumps({{"status": status, "loaded": loaded}}))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=dict(os.environ), timeout=60, check=True)

    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"status": 200, "loaded": []}
