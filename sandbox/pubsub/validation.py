"""Validation with the real service's rules: publish limits and subscription settings.

Code that passes the sandbox should not then fail in production, so a publish
over the documented limits and a subscription setting out of range are refused
with INVALID_ARGUMENT and a message naming the limit, as the service does
(Google's emulator enforces neither; see tests/e2e/test_pubsub_publish_limits.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from urllib.parse import urlsplit

from sandbox.pubsub import names
from sandbox.pubsub.errors import InvalidArgumentError
from sandbox.pubsub.model import (
    ATTRIBUTE_KEY_MAX_BYTES,
    ATTRIBUTE_MAX_BYTES,
    DEFAULT_ACK_DEADLINE,
    DEFAULT_DELIVERY_ATTEMPTS,
    DEFAULT_MAX_BACKOFF,
    DEFAULT_MIN_BACKOFF,
    MAX_ACK_DEADLINE,
    MAX_ATTRIBUTES,
    MAX_BACKOFF,
    MAX_DELIVERY_ATTEMPTS,
    MAX_MESSAGE_BYTES,
    MAX_PUBLISH_MESSAGES,
    MIN_ACK_DEADLINE,
    MIN_DELIVERY_ATTEMPTS,
    RetryPolicy,
    SubscriptionConfig,
)

#: One message of a publish request: data, attributes, ordering key.
Outgoing = tuple[bytes, Mapping[str, str], str]


def as_dict(values: Mapping[str, str] | None) -> dict[str, str]:
    """A plain dict copy of labels or attributes (None is empty)."""
    return dict(values or {})


def _clip(text: str, limit: int = 64) -> str:
    """``text`` cut to ``limit`` characters, so an error message stays readable."""
    return text if len(text) <= limit else f"{text[:limit]}..."


def _utf8_size(text: str, key: str) -> int:
    """Size of ``text`` in UTF-8; raises InvalidArgumentError if it has no UTF-8 form."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(f"Attribute {_clip(key)!r} is not valid UTF-8") from exc


def _checked_size(data: bytes, attributes: Mapping[str, str]) -> int:
    """Check one message against the publish limits; returns its data + attribute bytes.

    Raises InvalidArgumentError, as the real service does, naming the limit broken.
    """
    if not data and not attributes:
        raise InvalidArgumentError(
            "Some messages contain no data and no attributes; at least one is required"
        )
    if len(data) > MAX_MESSAGE_BYTES:
        raise InvalidArgumentError(
            f"Message data is {len(data)} bytes; at most {MAX_MESSAGE_BYTES} bytes are allowed"
        )
    if len(attributes) > MAX_ATTRIBUTES:
        raise InvalidArgumentError(
            f"A message has {len(attributes)} attributes; at most {MAX_ATTRIBUTES} are allowed"
        )
    size = len(data)
    for key, value in attributes.items():
        if not key or key.startswith("goog"):
            raise InvalidArgumentError(f"Invalid attribute key: {_clip(key)!r}")
        key_bytes = _utf8_size(key, key)
        if key_bytes > ATTRIBUTE_KEY_MAX_BYTES:
            raise InvalidArgumentError(
                f"Attribute key {_clip(key)!r} is {key_bytes} bytes; "
                f"at most {ATTRIBUTE_KEY_MAX_BYTES} bytes are allowed"
            )
        value_bytes = _utf8_size(value, key)
        if value_bytes > ATTRIBUTE_MAX_BYTES:
            raise InvalidArgumentError(
                f"The value of attribute {_clip(key)!r} is {value_bytes} bytes; "
                f"at most {ATTRIBUTE_MAX_BYTES} bytes are allowed"
            )
        size += key_bytes + value_bytes
    return size



def check_publish(messages: Sequence[Outgoing]) -> None:
    """Refuse a publish request the service would refuse (InvalidArgumentError)."""
    if not messages:
        raise InvalidArgumentError("The request contains no messages")
    if len(messages) > MAX_PUBLISH_MESSAGES:
        raise InvalidArgumentError(
            f"The request contains {len(messages)} messages; "
            f"at most {MAX_PUBLISH_MESSAGES} are allowed"
        )
    # Data plus attribute bytes is a lower bound of the serialized request size.
    request_bytes = sum(_checked_size(data, attributes) for data, attributes, _ in messages)
    if request_bytes > MAX_MESSAGE_BYTES:
        raise InvalidArgumentError(
            f"The request is at least {request_bytes} bytes; "
            f"at most {MAX_MESSAGE_BYTES} bytes are allowed"
        )


def normalise(config: SubscriptionConfig) -> SubscriptionConfig:
    """Apply real-service defaults and reject out-of-range settings."""
    deadline = config.ack_deadline_seconds or DEFAULT_ACK_DEADLINE
    if not MIN_ACK_DEADLINE <= deadline <= MAX_ACK_DEADLINE:
        raise InvalidArgumentError(
            f"Invalid ack_deadline_seconds({deadline}). "
            f"Must be between {MIN_ACK_DEADLINE} and {MAX_ACK_DEADLINE}."
        )
    endpoint = config.push_config.push_endpoint
    if endpoint:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidArgumentError(f"Invalid push_endpoint given: {endpoint}")
    retry = config.retry_policy
    if retry is not None:
        minimum = retry.minimum_backoff or DEFAULT_MIN_BACKOFF
        maximum = retry.maximum_backoff or DEFAULT_MAX_BACKOFF
        if not (0 < minimum <= MAX_BACKOFF and 0 < maximum <= MAX_BACKOFF):
            raise InvalidArgumentError("Retry policy backoffs must be between 0 and 600 s")
        if minimum > maximum:
            raise InvalidArgumentError(
                "Retry policy minimum_backoff must not exceed maximum_backoff"
            )
        retry = RetryPolicy(minimum_backoff=minimum, maximum_backoff=maximum)
    dead_letter = config.dead_letter_policy
    if dead_letter is not None:
        if not dead_letter.dead_letter_topic:
            dead_letter = None
        else:
            names.topic(dead_letter.dead_letter_topic)
            attempts = dead_letter.max_delivery_attempts or DEFAULT_DELIVERY_ATTEMPTS
            if not MIN_DELIVERY_ATTEMPTS <= attempts <= MAX_DELIVERY_ATTEMPTS:
                raise InvalidArgumentError(
                    f"Invalid max_delivery_attempts({attempts}). Must be between "
                    f"{MIN_DELIVERY_ATTEMPTS} and {MAX_DELIVERY_ATTEMPTS}."
                )
            dead_letter = replace(dead_letter, max_delivery_attempts=attempts)
    return replace(
        config,
        ack_deadline_seconds=deadline,
        retry_policy=retry,
        dead_letter_policy=dead_letter,
        labels=as_dict(config.labels),
        push_config=replace(
            config.push_config, attributes=as_dict(config.push_config.attributes)
        ),
    )

