from __future__ import annotations

import base64
import json

import pytest

from shared.errors import InvalidEventError, PermanentError
from shared.events import parse_pubsub_event


def _envelope(data: bytes, **extra):
    message = {"data": base64.b64encode(data).decode(), "messageId": "123",
               "publishTime": "2026-11-21T10:00:00Z", "attributes": {"a": "b"}}
    return {"message": message, "subscription": "projects/p/subscriptions/s", **extra}


def test_an_eventarc_message_yields_data_attributes_and_ids():
    message = parse_pubsub_event("ce-1", _envelope(b'{"x": 1}', deliveryAttempt=3))
    assert message.data == b'{"x": 1}'
    assert message.attributes == {"a": "b"}
    assert message.message_id == "123"
    assert message.subscription == "projects/p/subscriptions/s"
    assert message.delivery_attempt == 3


def test_the_event_id_stands_in_for_a_missing_message_id():
    envelope = _envelope(b"{}")
    del envelope["message"]["messageId"]
    assert parse_pubsub_event("ce-9", envelope).message_id == "ce-9"


def test_data_arriving_as_json_text_is_accepted():
    assert parse_pubsub_event("1", json.dumps(_envelope(b"[]"))).data == b"[]"


def test_an_event_without_a_message_is_permanent():
    with pytest.raises(PermanentError, match="no 'message'"):
        parse_pubsub_event("1", {"hello": "world"})


def test_data_that_is_not_base64_is_permanent():
    envelope = _envelope(b"")
    envelope["message"]["data"] = "%%%"
    with pytest.raises(PermanentError, match="base64"):
        parse_pubsub_event("1", envelope)


@pytest.mark.parametrize("message_id", ["", "has space", "x" * 129, "\ud800", 7.5, ["1"],
                                        {"id": 1}, True])
def test_a_message_id_that_could_not_come_from_pubsub_is_permanent(message_id):
    envelope = _envelope(b"{}")
    envelope["message"]["messageId"] = message_id

    with pytest.raises(PermanentError) as caught:
        parse_pubsub_event(None, envelope)

    assert caught.value.field == "message.messageId"


def test_a_numeric_message_id_is_read_as_text():
    envelope = _envelope(b"{}")
    envelope["message"]["messageId"] = 42

    assert parse_pubsub_event(None, envelope).message_id == "42"


@pytest.mark.parametrize("attributes", [{"n": 1}, {"a": "\ud800"}, {"\udfff": "v"}, ["a"]])
def test_attributes_that_pubsub_could_not_have_sent_are_permanent(attributes):
    envelope = _envelope(b"{}")
    envelope["message"]["attributes"] = attributes

    with pytest.raises(PermanentError):
        parse_pubsub_event(None, envelope)


TOO_DEEP = b'{"message": {"data": "", "messageId": "1"}, "a": {"b": {"c": {"d": {}}}}}'


@pytest.mark.parametrize("body", [b"[" * 5000 + b"]" * 5000,
                                  b'{"message": ' + b"1" * 5000 + b"}", TOO_DEEP])
def test_an_envelope_beyond_its_limits_is_refused_as_invalid_not_a_crash(body):
    with pytest.raises(InvalidEventError, match="not a Pub/Sub message envelope"):
        parse_pubsub_event("1", body)
