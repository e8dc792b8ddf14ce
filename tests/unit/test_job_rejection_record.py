from __future__ import annotations

from shared.errors import PermanentError
from shared.events import PubSubMessage
from shared.jobs.rejection import rejection_record
from shared.jobspec.request import REQUEST_LIMITS
from shared.pubsub import MAX_ATTRIBUTES, valid_attribute_key

ERROR = PermanentError("tpu.slices: must be at most 4", field="tpu.slices",
                       rule="at most 4 slices")
OURS = {"rejected_by", "rejection_reason", "rejection_field", "rejection_rule",
        "source_message_id"}


def _message(data: bytes = b'{"name": "x"}', attributes: dict[str, str] | None = None,
             message_id: str = "m-7") -> PubSubMessage:
    return PubSubMessage(message_id=message_id, data=data, attributes=attributes or {})


def test_the_record_says_who_refused_the_request_why_and_which_message():
    record = rejection_record(_message(attributes={"origin": "cli"}), ERROR)

    assert record.attributes == {
        "origin": "cli",
        "rejected_by": "submit_job",
        "rejection_reason": "tpu.slices: must be at most 4",
        "rejection_field": "tpu.slices",
        "rejection_rule": "at most 4 slices",
        "source_message_id": "m-7",
    }


def test_an_error_without_field_or_rule_still_records_both_attributes():
    record = rejection_record(_message(), PermanentError("not a job request"))

    assert record.attributes["rejection_field"] == ""
    assert record.attributes["rejection_rule"] == ""
    assert record.attributes.keys() >= OURS


def test_a_message_with_a_hundred_attributes_yields_at_most_a_hundred_and_counts_the_rest():
    attributes = {f"attr_{i:03}": str(i) for i in range(100)}

    record = rejection_record(_message(attributes=attributes), ERROR)

    assert len(record.attributes) == MAX_ATTRIBUTES
    assert record.attributes.keys() >= OURS
    kept = record.attributes.keys() - OURS - {"rejection_attributes_dropped"}
    assert int(record.attributes["rejection_attributes_dropped"]) == 100 - len(kept)
    assert all(record.attributes[k] == attributes[k] for k in kept)


def test_a_clipped_record_with_many_attributes_still_fits():
    data = b"x" * (REQUEST_LIMITS.max_bytes + 1)
    attributes = {f"attr_{i:03}": str(i) for i in range(100)}

    record = rejection_record(_message(data, attributes), ERROR)

    assert len(record.attributes) == MAX_ATTRIBUTES
    assert "rejection_data_clipped_from" in record.attributes
    kept = len(record.attributes) - len(OURS) - 2
    assert int(record.attributes["rejection_attributes_dropped"]) == 100 - kept


def test_attribute_keys_pubsub_would_refuse_are_dropped_and_counted():
    refused = {"googclient_x": "1", "k" * 257: "2", "": "3", "\ud800": "4"}
    attributes = {"keep_me": "yes", **refused}

    record = rejection_record(_message(attributes=attributes), ERROR)

    assert record.attributes["keep_me"] == "yes"
    assert not refused.keys() & record.attributes.keys()
    assert record.attributes["rejection_attributes_dropped"] == "4"
    assert all(valid_attribute_key(k) for k in record.attributes)


def test_a_key_of_exactly_256_bytes_is_kept():
    key = "é" * 128  # 256 bytes in UTF-8

    record = rejection_record(_message(attributes={key: "v"}), ERROR)

    assert record.attributes[key] == "v"
    assert "rejection_attributes_dropped" not in record.attributes


def test_an_original_attribute_named_like_ours_never_overrides_ours():
    forged = {"rejected_by": "someone_else", "rejection_reason": "all fine",
              "source_message_id": "m-0", "rejection_field": "f", "rejection_rule": "r"}

    record = rejection_record(_message(attributes=forged), ERROR)

    assert record.attributes["rejected_by"] == "submit_job"
    assert record.attributes["rejection_reason"] == ERROR.message
    assert record.attributes["source_message_id"] == "m-7"
    assert record.attributes["rejection_field"] == "tpu.slices"
    assert record.attributes["rejection_rule"] == "at most 4 slices"
    assert "rejection_attributes_dropped" not in record.attributes


def test_data_larger_than_a_request_may_be_is_clipped_and_says_how_large_it_was():
    size = REQUEST_LIMITS.max_bytes * 3 + 7
    data = bytes(range(256)) * (size // 256) + b"z" * (size % 256)

    record = rejection_record(_message(data), ERROR)

    assert record.data == data[:REQUEST_LIMITS.max_bytes]
    assert record.attributes["rejection_data_clipped_from"] == str(size)


def test_data_at_the_request_limit_is_kept_byte_for_byte():
    data = b"\xff\x00" * (REQUEST_LIMITS.max_bytes // 2)

    record = rejection_record(_message(data), ERROR)

    assert record.data == data
    assert "rejection_data_clipped_from" not in record.attributes


def test_small_data_that_is_not_even_utf8_is_kept_byte_for_byte():
    data = b"\xc3\x28 not json \x00"

    record = rejection_record(_message(data), ERROR)

    assert record.data == data
