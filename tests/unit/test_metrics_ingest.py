"""Decoding and validating load-test messages into rows (no BigQuery involved)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from shared.metrics.ingest import (
    MAX_INSERT_BYTES,
    MAX_INSERT_ROWS,
    insert_batches,
    parse_message,
    row_size,
)
from shared.metrics.record import MAX_EXCEPTION_CHARS, MAX_INTER_TOKEN_LATENCIES, MetricRecord

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


def record(**change: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "test_id": "lt-1", "request_type": "POST", "request_name": "/v2/models/toy-lm/infer",
        "response_length": 100, "response_time": 12.5, "start_time": 1795255200.25,
        "exception": None, "model_name": "toy-lm", "model_method": "infer",
        "tokenizer": "whitespace", "num_input_tokens": 4, "num_output_tokens": 16,
        "model_response_time": None, "server": "triton", "accelerator": "cpu", "users": 2,
    }
    base.update(change)
    return base


def encode(records: Any) -> bytes:
    return json.dumps(records).encode()


def test_every_good_record_becomes_a_row_keyed_by_message_id_and_index():
    parsed = parse_message("m1", encode([record(), record(response_time=3.0)]), NOW)

    assert [row["row_key"] for row in parsed.rows] == ["m1:0", "m1:1"]
    assert parsed.rejections == []
    row = parsed.rows[1]
    assert row["response_time"] == 3.0
    assert row["message_id"] == "m1"
    assert row["start_time"] == "2026-11-21T10:00:00.250000+00:00"
    assert row["ingested_at"] == NOW.isoformat()


def test_the_same_message_parsed_twice_yields_the_same_row_keys():
    data = encode([record(), record()])

    first = parse_message("m7", data, NOW)
    again = parse_message("m7", data, datetime(2026, 11, 22, tzinfo=UTC))

    assert [r["row_key"] for r in first.rows] == [r["row_key"] for r in again.rows]


def test_a_poison_record_is_rejected_with_its_reason_while_the_others_are_kept():
    bad = record(response_time=-4)
    parsed = parse_message("m2", encode([record(), bad, record()]), NOW)

    assert [row["row_key"] for row in parsed.rows] == ["m2:0", "m2:2"]
    [rejection] = parsed.rejections
    assert rejection["row_key"] == "m2:1"
    assert rejection["record_index"] == 1
    assert rejection["test_id"] == "lt-1"
    assert "response_time" in rejection["reason"]
    assert "greater than or equal to 0" in rejection["reason"]
    assert json.loads(rejection["record"])["response_time"] == -4


def test_a_record_missing_a_required_field_names_that_field():
    incomplete = record()
    del incomplete["test_id"]

    [rejection] = parse_message("m3", encode([incomplete]), NOW).rejections

    assert rejection["reason"].startswith("test_id: Field required")
    assert rejection["test_id"] is None


def test_data_that_is_not_json_becomes_one_rejection_for_the_whole_message():
    parsed = parse_message("m4", b"\xff{not json", NOW)

    assert parsed.rows == []
    [rejection] = parsed.rejections
    assert rejection["row_key"] == "m4:message"
    assert rejection["record_index"] is None
    assert rejection["reason"].startswith("message data is not UTF-8 text")


def test_a_single_record_object_is_accepted_like_a_one_element_array():
    parsed = parse_message("m5", encode(record()), NOW)

    assert [row["row_key"] for row in parsed.rows] == ["m5:0"]


def test_elements_that_are_not_objects_are_rejected_one_by_one():
    parsed = parse_message("m6", encode([record(), 42, "text"]), NOW)

    assert len(parsed.rows) == 1
    assert [r["record_index"] for r in parsed.rejections] == [1, 2]
    assert all(r["reason"] == "record: must be a JSON object" for r in parsed.rejections)


def test_a_json_scalar_message_is_rejected_as_a_whole():
    [rejection] = parse_message("m8", b"17", NOW).rejections

    assert rejection["reason"].startswith("data: must be a JSON array")


def test_iso_timestamps_are_accepted_and_naive_ones_refused():
    parsed = parse_message("m9", encode([record(start_time="2026-11-21T10:00:00Z"),
                                         record(start_time="2026-11-21T10:00:00")]), NOW)

    assert parsed.rows[0]["start_time"] == "2026-11-21T10:00:00+00:00"
    assert "timezone" in parsed.rejections[0]["reason"]


def test_epoch_milliseconds_are_refused_rather_than_stored_in_the_far_future():
    [rejection] = parse_message("m10", encode([record(start_time=1795255200250)]), NOW).rejections

    assert "start_time" in rejection["reason"]


def test_long_exceptions_are_clipped_not_refused():
    parsed = parse_message("m11", encode([record(exception="x" * 10_000)]), NOW)

    assert len(parsed.rows[0]["exception"]) == MAX_EXCEPTION_CHARS


def test_unknown_fields_from_newer_load_generators_are_ignored():
    parsed = parse_message("m12", encode([record(ttft_ms=12.0)]), NOW)

    assert "ttft_ms" not in parsed.rows[0]
    assert parsed.rejections == []


def test_insert_batches_hold_at_most_500_rows():
    rows = parse_message("m13", encode([record()] * 1201), NOW).rows

    sizes = [len(batch) for batch in insert_batches(rows)]

    assert sizes == [MAX_INSERT_ROWS, MAX_INSERT_ROWS, 201]


def test_insert_batches_are_cut_by_bytes_before_rows_when_rows_are_large():
    big = [{"row_key": f"m:{i}", "exception": "é" * 200_000} for i in range(10)]

    batches = list(insert_batches(big))

    assert len(batches) > 1
    assert all(sum(row_size(r) for r in batch) <= MAX_INSERT_BYTES for batch in batches)
    assert [r["row_key"] for batch in batches for r in batch] == [r["row_key"] for r in big]


_SCALARS = st.one_of(st.text(max_size=200), st.integers(-(10**18), 10**18),
                    st.floats(allow_nan=False), st.none(), st.booleans())


@given(st.dictionaries(st.text(min_size=1, max_size=12),
                       st.one_of(_SCALARS, st.lists(st.floats(allow_nan=False), max_size=50)),
                       max_size=8))
def test_row_size_is_never_smaller_than_the_encoded_row(row):
    encoded = json.dumps({"insertId": "k", "json": row})

    assert row_size(row) >= len(encoded.encode())


def test_rows_with_many_inter_token_gaps_are_split_into_requests_under_the_limit():
    # A message just under Pub/Sub's 10 MB of records with every gap kept, each gap
    # with more digits than the load generator sends: its rows weigh over 9 MB.
    gaps = [1234.567891] * MAX_INTER_TOKEN_LATENCIES
    data = encode([record(inter_token_latencies=gaps)] * 340)
    assert len(data) < 10_000_000
    rows = parse_message("m15", data, NOW).rows

    batches = list(insert_batches(rows))

    assert len(batches) == 2  # two requests, not one over BigQuery's 10 MB
    assert sum(len(b) for b in batches) == len(rows) == 340
    for batch in batches:
        body = json.dumps([{"insertId": r["row_key"], "json": r} for r in batch])
        assert len(body.encode()) <= MAX_INSERT_BYTES


def test_rows_match_the_record_model_field_for_field():
    [row] = parse_message("m14", encode([record()]), NOW).rows

    expected = set(MetricRecord.model_fields) | {"row_key", "message_id", "ingested_at"}
    assert set(row) == expected
