from __future__ import annotations

import base64
import json

import pytest

from shared.errors import PermanentError
from shared.events import parse_pubsub_event


def _envelope(data: bytes, **extra):
    message = {"data": base64.b64encode(data).decode(), "messageId": "123",
               "publishTime": "2026-11-21T10:00:00Z", "attributes": {"a": "b"}}
    return {"message": message, "subscription": "projects/p/subscriptions/s", **extra}


def test_an_eventarc_message_yields_data_attributes_and_ids():
    message = parse_pubsub_event("ce-1", _envelope(b'{"x": 1}', deliveryAttempt=3))
    assert message.data == b'{"x": 1}'
    assert message.json() == {"x": 1}
    assert message.attributes == {"a": "b"}
    assert message.message_id == "123"
    assert message.subscription == "projects/p/subscriptions/s"
    assert message.delivery_attempt == 3


def test_the_event_id_stands_in_for_a_missing_message_id():
    envelope = _envelope(b"{}")
    del envelope["message"]["messageId"]
    assert parse_pubsub_event("ce-9", envelope).message_id == "ce-9"


def test_data_arriving_as_json_text_is_accepted():
    assert parse_pubsub_event("1", json.dumps(_envelope(b"[]"))).json() == []


def test_an_event_without_a_message_is_permanent():
    with pytest.raises(PermanentError, match="no 'message'"):
        parse_pubsub_event("1", {"hello": "world"})


def test_data_that_is_not_base64_is_permanent():
    envelope = _envelope(b"")
    envelope["message"]["data"] = "%%%"
    with pytest.raises(PermanentError, match="base64"):
        parse_pubsub_event("1", envelope)


@pytest.mark.parametrize("data", [b"not json", b"\xff\xfe", b'{"a": '])
def test_payloads_that_are_not_utf8_json_are_permanent_and_say_so(data: bytes):
    with pytest.raises(PermanentError) as caught:
        parse_pubsub_event("1", _envelope(data)).json()
    assert caught.value.field == "data"
