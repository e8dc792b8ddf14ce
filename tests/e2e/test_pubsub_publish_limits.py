"""Pub/Sub's documented publish limits, on the sandbox stand-in and on Google's emulator.

The real service refuses with InvalidArgument a message with more than 100
attributes, a key over 256 bytes, a value over 1024 bytes or data over 10 MB,
and a request of more than 1000 messages
(https://cloud.google.com/pubsub/quotas#resource_limits). Google's emulator does
not enforce the attribute limits, so code that would fail in production passes
against it; the stand-in enforces them, and the contract test at the end pins
down that departure so nobody "simplifies" the stand-in back to the emulator.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions
from google.cloud import pubsub_v1
from google.pubsub_v1 import PubsubMessage
from google.pubsub_v1.services.publisher import PublisherClient as GeneratedPublisher

from sandbox.pubsub import PubSubServer
from sandbox.pubsub.errors import InvalidArgumentError
from tests.e2e import pubsub_fixtures as fx

# Fixtures are registered by binding them in this module's namespace.
pubsub = fx.pubsub
publisher = fx.publisher
topic_path = fx.topic_path

pytestmark = pytest.mark.e2e



def _topic(publisher: Any, name: str = "jobs") -> str:
    return str(publisher.create_topic(name=topic_path(name)).name)


def _publish(publisher: Any, topic: str, attributes: dict[str, str]) -> str:
    """Publish one message through the client's batching path; returns its ID."""
    return str(publisher.publish(topic, b"payload", **attributes).result(timeout=10))


def _publish_request(publisher: Any, topic: str, data: list[bytes]) -> list[str]:
    """Send one Publish request with a message per ``data``; returns the message IDs.

    Bypasses the client's batching, which never sends more than ``max_messages``
    (100 by default), and its retries, which repeat RESOURCE_EXHAUSTED until the
    deadline.
    """
    messages = [PubsubMessage(data=each) for each in data]
    sent = GeneratedPublisher.publish(
        publisher, topic=topic, messages=messages, retry=None, timeout=10
    )
    return list(sent.message_ids)


def _many(count: int) -> dict[str, str]:
    return {f"key-{n}": "value" for n in range(count)}


# ------------------------------------------------------- attribute count
def test_a_message_with_101_attributes_is_refused_with_invalid_argument(publisher: Any) -> None:
    topic = _topic(publisher)
    with pytest.raises(exceptions.InvalidArgument, match="101 attributes; at most 100"):
        _publish(publisher, topic, _many(101))


def test_a_message_with_100_attributes_is_accepted(publisher: Any) -> None:
    assert _publish(publisher, _topic(publisher), _many(100))


# ---------------------------------------------------------- key and value
def test_an_attribute_key_of_257_bytes_is_refused_and_the_error_names_the_key(
    publisher: Any,
) -> None:
    topic = _topic(publisher)
    with pytest.raises(exceptions.InvalidArgument) as refused:
        _publish(publisher, topic, {"k" * 257: "v"})
    assert "257 bytes; at most 256" in str(refused.value)
    assert f"'{'k' * 64}...'" in str(refused.value)


def test_an_attribute_key_of_256_bytes_is_accepted(publisher: Any) -> None:
    assert _publish(publisher, _topic(publisher), {"k" * 256: "v"})


def test_an_attribute_value_of_1025_bytes_is_refused_with_invalid_argument(
    publisher: Any,
) -> None:
    topic = _topic(publisher)
    with pytest.raises(exceptions.InvalidArgument, match="'shard' is 1025 bytes; at most 1024"):
        _publish(publisher, topic, {"shard": "v" * 1025})


def test_an_attribute_value_of_1024_bytes_is_accepted(publisher: Any) -> None:
    assert _publish(publisher, _topic(publisher), {"shard": "v" * 1024})


def test_attribute_sizes_count_utf8_bytes_not_characters(publisher: Any) -> None:
    topic = _topic(publisher)
    with pytest.raises(exceptions.InvalidArgument, match="1026 bytes"):
        _publish(publisher, topic, {"name": "é" * 513})
    with pytest.raises(exceptions.InvalidArgument, match="258 bytes"):
        _publish(publisher, topic, {"é" * 129: "v"})


# ----------------------------------------------------- request and data
def test_a_request_of_1001_messages_is_refused_and_one_of_1000_is_accepted(
    publisher: Any,
) -> None:
    topic = _topic(publisher)
    with pytest.raises(exceptions.InvalidArgument, match="1001 messages; at most 1000"):
        _publish_request(publisher, topic, [b"m"] * 1001)
    assert len(_publish_request(publisher, topic, [b"m"] * 1000)) == 1000


def test_message_data_over_10_mb_is_refused_by_the_broker(pubsub: PubSubServer) -> None:
    # In process: the client refuses a request over 10,000,000 bytes itself
    # (MessageTooLargeError), so no such message ever reaches the server.
    broker = pubsub.broker
    broker.create_topic(topic_path("jobs"))
    with pytest.raises(InvalidArgumentError, match="10000001 bytes; at most 10000000"):
        broker.publish(topic_path("jobs"), b"x" * 10_000_001)
    assert broker.publish(topic_path("jobs"), b"x" * 10_000_000)


def test_a_5_mb_message_the_service_accepts_is_accepted(publisher: Any) -> None:
    topic = _topic(publisher)
    assert len(_publish_request(publisher, topic, [b"x" * 5_000_000])) == 1


# ------------------------------------------------- Google's own emulator
@pytest.fixture
def google_emulator(tmp_path: Path) -> Iterator[str]:
    """Google's cloud-pubsub-emulator on a free loopback port; yields ``host:port``."""
    with fx.running_backend("emulator", tmp_path) as backend:
        yield backend.address


def test_googles_emulator_accepts_what_the_service_refuses_which_is_why_the_stand_in_enforces_limits(  # noqa: E501
    google_emulator: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Known departure of Google's emulator from the documented service.

    The emulator publishes messages with 101 attributes, a 257-byte key, a
    1025-byte value and a "goog"-prefixed key, all of which real Pub/Sub
    refuses with InvalidArgument. Were this test to fail, the emulator has
    started enforcing the limits and could be used to check the stand-in's.
    """
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", google_emulator)
    client = pubsub_v1.PublisherClient()
    try:
        topic = _topic(client)
        assert _publish(client, topic, _many(101))
        assert _publish(client, topic, {"k" * 257: "v"})
        assert _publish(client, topic, {"shard": "v" * 1025})
        assert _publish(client, topic, {"goog-key": "v"})
    finally:
        client.stop()
