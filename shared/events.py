"""Parsing Pub/Sub deliveries into a typed message.

A Pub/Sub message reaches a function in one of two shapes, both as a CloudEvent by
the time the entry point sees it:

* Eventarc (production triggers): binary CloudEvent whose data is
  ``{"message": {...}, "subscription": "..."}``;
* a raw push subscription pointed at functions-framework, which converts the push
  envelope into the same CloudEvent but drops ``subscription`` and
  ``deliveryAttempt``.

Both are accepted; optional fields stay optional. Decoding errors are permanent
(the same bytes will never decode on a retry). The envelope is decoded within limits
of its own, and the fields a function relies on (the message id above all) are
checked, since a sender that is not Pub/Sub can post anything.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.errors import InvalidEventError, PermanentError
from shared.payload import Limits, check, decode

__all__ = ["ENVELOPE_LIMITS", "PubSubMessage", "parse_pubsub_event"]


# An envelope carries one message of at most 10 MB, base64-encoded (4/3), and at most
# 100 attributes; nothing Pub/Sub sends is deeper than message.attributes.
ENVELOPE_LIMITS = Limits(max_bytes=16_000_000, max_depth=4, max_string_chars=14_000_000,
                         max_items=200)
# Pub/Sub message ids are decimal strings; a sender that is not Pub/Sub may put
# anything there, and the id ends up in object names, row keys and attributes.
_MESSAGE_ID = re.compile(r"^[\x21-\x7e]{1,128}$")


@dataclass(frozen=True, slots=True)
class PubSubMessage:
    """One Pub/Sub message as delivered to a function. ``data`` is the decoded bytes,
    still untrusted: consumers decode it with their own limits (``shared.payload``)."""

    message_id: str
    data: bytes
    attributes: dict[str, str] = field(default_factory=dict)
    publish_time: str | None = None
    subscription: str | None = None
    delivery_attempt: int | None = None


def _attempt(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit() and len(value) <= 6:
        return int(value)
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _envelope(data: Any) -> Any:
    """The envelope as a decoded value within ENVELOPE_LIMITS (functions-framework has
    usually decoded it already; binary CloudEvents may carry it as text)."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    try:
        if isinstance(data, bytes):
            data = decode(data, ENVELOPE_LIMITS)
    except PermanentError as exc:
        raise InvalidEventError(f"event data is not a Pub/Sub message envelope: "
                                f"{exc.message}", field="data", rule=exc.rule) from exc
    problem = check(data, ENVELOPE_LIMITS)
    if problem is not None:
        raise InvalidEventError(f"event data is not a Pub/Sub message envelope: {problem}",
                                field=problem.field, rule=problem.rule)
    return data


def parse_pubsub_event(event_id: Any, data: Any) -> PubSubMessage:
    """Build a PubSubMessage from a CloudEvent's id and data.

    Raises InvalidEventError when the event does not carry a Pub/Sub message.
    """
    data = _envelope(data)
    if not isinstance(data, Mapping) or not isinstance(data.get("message"), Mapping):
        raise InvalidEventError("event data has no 'message' object", field="message",
                             rule="Pub/Sub CloudEvent data must contain 'message'")
    message: Mapping[str, Any] = data["message"]
    raw = message.get("data", "")
    if not isinstance(raw, str):
        raise InvalidEventError("message.data must be a base64 string", field="message.data")
    try:
        payload = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidEventError("message.data is not valid base64",
                                field="message.data") from exc
    message_id = message.get("messageId") or message.get("message_id") or event_id
    if isinstance(message_id, int) and not isinstance(message_id, bool):
        message_id = str(message_id)
    if not isinstance(message_id, str) or not _MESSAGE_ID.match(message_id):
        raise InvalidEventError("message has no usable messageId", field="message.messageId",
                                rule="1-128 printable ASCII characters, no spaces")
    attributes = message.get("attributes") or {}
    if not isinstance(attributes, Mapping) or not all(
            isinstance(v, str) for v in attributes.values()):
        raise InvalidEventError("message.attributes must be an object of strings",
                                field="message.attributes")
    return PubSubMessage(
        message_id=message_id,
        data=payload,
        attributes=dict(attributes),
        publish_time=_text(message.get("publishTime") or message.get("publish_time")),
        subscription=_text(data.get("subscription")),
        delivery_attempt=_attempt(data.get("deliveryAttempt", message.get("deliveryAttempt"))),
    )
