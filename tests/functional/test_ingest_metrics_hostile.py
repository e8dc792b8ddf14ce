"""ingest_metrics and the hostile records a campaign found: a poison record is refused
alone, with its reason, and its rejection row can always be written."""

from __future__ import annotations

import base64
import json

import pytest

from shared import bigquery
from tests.bigquery_fixtures import count
from tests.functional.test_ingest_metrics import envelope, stored_records


def _rejections(store, message_id: str) -> list[dict]:
    return bigquery.query(
        "accelops-test", f"SELECT * FROM `accelops-test.{store.dataset}.rejections` "
        f"WHERE message_id = '{message_id}' ORDER BY row_key")


def _poisoned(key: str, json_text: str) -> bytes:
    """The stored records with record 1's ``key`` written as this JSON text."""
    records = stored_records()
    records[1][key] = "@"
    return json.dumps(records).replace('"@"', json_text).encode()


POISON = {
    "a start time with no UTC equivalent": (
        _poisoned("start_time", '"9999-12-31T23:59:59-01:00"'), "start_time: out of range"),
    "a 310-digit start time": (_poisoned("start_time", "9" * 310), "at most 40 digits"),
    "a boolean response time": (_poisoned("response_time", "true"), "valid number"),
    "a lone surrogate test id": (_poisoned("test_id", '"\\ud800"'), "valid Unicode"),
    "a float user count": (_poisoned("users", "4.0"), "users: Input should be a valid integer"),
    "an integer of 5,000 digits": (_poisoned("users", "1" * 5000), "at most 40 digits"),
    "Infinity": (_poisoned("response_time", "Infinity"), "Infinity is not a JSON number"),
    "nesting beyond the parser": (_poisoned("x", "[" * 50_000 + "]" * 50_000),
                                  "nesting depth at most 8"),
}


@pytest.mark.parametrize("case", sorted(POISON))
def test_one_poison_record_is_rejected_alone_and_the_others_are_stored(
    ingest_client, metrics_store, case
):
    data, reason = POISON[case]

    response = ingest_client.post("/", json=envelope(data, message_id="6660001"))

    assert response.status_code == 200
    assert count(metrics_store, "requests_unique") == 2
    [rejection] = _rejections(metrics_store, "6660001")
    assert rejection["row_key"] == "6660001:1"
    assert reason in rejection["reason"]


def test_a_rejected_record_with_a_lone_surrogate_keeps_its_exact_text_in_base64(
    ingest_client, metrics_store
):
    data = _poisoned("request_name", '"caf\\u00e9 \\udc80"')

    ingest_client.post("/", json=envelope(data, message_id="6660002"))

    [rejection] = _rejections(metrics_store, "6660002")
    assert "café \ufffd" in rejection["record"]
    original = base64.b64decode(rejection["record_base64"]).decode("utf-8", "surrogatepass")
    assert json.loads(original)["request_name"] == "café \udc80"


def test_a_message_that_is_not_utf8_is_kept_byte_for_byte_in_base64(ingest_client,
                                                                      metrics_store):
    data = b'[{"test_id": "\xff\xfe"}]'

    ingest_client.post("/", json=envelope(data, message_id="6660003"))

    [rejection] = _rejections(metrics_store, "6660003")
    assert rejection["row_key"] == "6660003:message"
    assert base64.b64decode(rejection["record_base64"]) == data


def test_a_message_of_more_than_5000_records_is_rejected_as_a_whole(ingest_client,
                                                                    metrics_store):
    records = [stored_records()[0]] * 5001

    response = ingest_client.post("/", json=envelope(records, message_id="6660004"))

    assert response.status_code == 200
    assert count(metrics_store, "requests") == 0
    [rejection] = _rejections(metrics_store, "6660004")
    assert "at most 5,000 records" in rejection["reason"]


def test_a_huge_refused_record_is_stored_clipped_with_a_marker(ingest_client, metrics_store):
    data = _poisoned("request_name", json.dumps("y" * 60_000))

    ingest_client.post("/", json=envelope(data, message_id="6660005"))

    [rejection] = _rejections(metrics_store, "6660005")
    assert len(rejection["record"]) <= 16_384
    assert rejection["record"].endswith("… [clipped]")
