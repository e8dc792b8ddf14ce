"""Node-pool action records as pool_schedule publishes them, parsed into rows (no BigQuery)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.metrics.ingest import parse_message, parse_pool_action_message
from shared.metrics.pool_action import (
    POOL_ACTION_KIND,
    PoolActionRecord,
    pool_action_id,
    pool_action_message,
)
from shared.metrics.run import KIND_ATTRIBUTE
from shared.metrics.schema import POOL_ACTION_FIELDS

EVENT = Path(__file__).resolve().parents[1] / "events" / "pubsub_push_pool_actions.json"

NOW = datetime(2026, 11, 23, 18, 0, 5, tzinfo=UTC)
AT = datetime(2026, 11, 23, 18, 0, tzinfo=UTC)


def action(**change: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "action_id": pool_action_id("p-1", "us-central2-b", "train", "pool-a", "remove", AT),
        "at": AT.isoformat(), "project": "p-1", "location": "us-central2-b",
        "cluster": "train", "pool": "pool-a", "action": "remove", "method": "resize",
        "reason": "off hours", "accelerator_type": "tpu-v5-lite-podslice",
        "accelerator_count": 16, "schedule": "nights", "team": "research",
    }
    base.update(change)
    return base


def encode(records: Any) -> bytes:
    return json.dumps(records).encode()


def test_each_action_becomes_a_row_keyed_by_its_action_id():
    parsed = parse_pool_action_message("m1", encode([action()]), NOW)

    [row] = parsed.rows
    assert row["row_key"] == ("projects/p-1/locations/us-central2-b/clusters/train/pool-a:"
                              "remove:2026-11-23T18:00:00+00:00")
    assert row["at"] == "2026-11-23T18:00:00+00:00"
    assert (row["message_id"], row["ingested_at"]) == ("m1", NOW.isoformat())
    assert parsed.rejections == []


def test_the_same_action_in_another_message_keeps_its_key():
    first = parse_pool_action_message("m1", encode([action()]), NOW)
    again = parse_pool_action_message("m2", encode([action()]), NOW + timedelta(minutes=5))

    assert [r["row_key"] for r in first.rows] == [r["row_key"] for r in again.rows]


def test_rows_carry_exactly_the_columns_of_the_pool_actions_table():
    [row] = parse_pool_action_message("m1", encode([action()]), NOW).rows

    assert set(row) == {field.name for field in POOL_ACTION_FIELDS}
    assert row["forced"] is False


def test_a_bad_action_is_rejected_with_its_reason_and_the_others_are_kept():
    records = [action(), action(accelerator_count=16.0), action(pool="pool-b")]

    parsed = parse_pool_action_message("m3", encode(records), NOW)

    assert [r["pool"] for r in parsed.rows] == ["pool-a", "pool-b"]
    [rejection] = parsed.rejections
    assert rejection["row_key"] == "m3:1"
    assert rejection["reason"] == "accelerator_count: Input should be a valid integer"


@pytest.mark.parametrize(("change", "reason"), [
    ({"method": None}, "method: a remove names how it was done: resize or delete"),
    ({"method": "recreate"}, "method: a remove is done by resize or delete, not recreate"),
    ({"action": "restore", "method": "delete"},
     "method: a restore is done by resize or recreate, not delete"),
    ({"action": "skip"}, "method: a skip changes nothing, so it has no method (got resize)"),
    ({"action": "pause"}, "action: Input should be 'remove', 'restore' or 'skip'"),
    ({"at": "2026-11-23T18:00:00"}, "at: must carry a timezone (or be epoch seconds)"),
    ({"action_id": "pool a; drop table"}, "action_id: String should match pattern"),
    ({"pool": ""}, "pool: String should have at least 1 character"),
    ({"accelerator_count": -1}, "accelerator_count: Input should be greater than or equal to 0"),
    ({"forced": "yes"}, "forced: Input should be a valid boolean"),
])
def test_an_action_that_breaks_a_rule_is_refused_naming_the_field(change, reason):
    [rejection] = parse_pool_action_message("m4", encode([action(**change)]), NOW).rejections

    assert rejection["reason"].startswith(reason)


def test_a_skip_without_a_method_and_a_recreate_are_accepted():
    records = [action(action="skip", method=None), action(action="restore", method="recreate")]

    parsed = parse_pool_action_message("m5", encode(records), NOW)

    assert [(r["action"], r["method"]) for r in parsed.rows] == [("skip", None),
                                                                  ("restore", "recreate")]


def test_a_message_that_is_not_json_is_one_rejection_of_the_whole_message():
    parsed = parse_pool_action_message("m6", b"\xffnot json", NOW)

    assert parsed.rows == []
    assert [r["row_key"] for r in parsed.rejections] == ["m6:message"]


def test_the_publishers_message_parses_back_into_the_same_records():
    records = [PoolActionRecord.model_validate(action()),
               PoolActionRecord.model_validate(action(action="skip", method=None, pool="b",
                                                      forced=True))]

    data, attributes = pool_action_message(records)

    assert attributes == {KIND_ATTRIBUTE: POOL_ACTION_KIND}
    rows = parse_pool_action_message("m7", data, NOW).rows
    assert [PoolActionRecord.model_validate(
        {k: v for k, v in row.items() if k not in ("row_key", "message_id", "ingested_at")})
        for row in rows] == records


def test_a_publisher_may_build_a_record_from_an_aware_datetime_but_not_a_naive_one():
    record = PoolActionRecord.model_validate(action(at=AT))

    assert record.at == AT
    with pytest.raises(ValueError, match="timezone"):
        PoolActionRecord.model_validate(action(at=AT.replace(tzinfo=None)))


def test_the_stored_push_event_holds_valid_actions_and_no_request_records():
    message = json.loads(EVENT.read_text())["message"]
    data = base64.b64decode(message["data"])

    assert message["attributes"] == {KIND_ATTRIBUTE: POOL_ACTION_KIND}
    assert len(parse_pool_action_message("e", data, NOW).rows) == 3
    # Read as request records (no kind attribute), every one would be refused.
    assert parse_message("e", data, NOW).rows == []
