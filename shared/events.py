"""Parsing Pub/Sub deliveries into a typed message.

A Pub/Sub message reaches a function in one of two shapes, both as a CloudEvent by
the time the entry point sees it:

* Eventarc (production triggers): binary CloudEvent whose data is
  ``{"message": {...}, "subscription": "..."}``;
* a raw push subscription pointed at functions-framework, which converts the push
  envelope into the same CloudEvent but drops ``subscription`` and
  ``deliveryAttempt``.

Both are accepted; optional fields stay optional. Decoding errors are permanent
(the same bytes will never decode on a retry).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.errors import PermanentError

__all__ = ["PubSubMessage", "parse_pubsub_event"]


@dataclass(frozen=True, slots=True)
class PubSubMessage:
    """One Pub/Sub message as delivered to a function."""

    message_id: str
    data: bytes
    attributes: dict[str, str] = field(default_factory=dict)
    publish_time: str | None = None
    subscription: str | None = None
    delivery_attempt: int | None = None

    def json(self) -> Any:
        """The data decoded as UTF-8 JSON; PermanentError names what is wrong."""
        try:
            text = self.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PermanentError("message data is not UTF-8 text", field="data",
                                 rule="must be UTF-8 JSON") from exc
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise PermanentError(
                f"message data is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                field="data", rule="must be UTF-8 JSON",
            ) from exc


def _attempt(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def parse_pubsub_event(event_id: str | None, data: Any) -> PubSubMessage:
    """Build a PubSubMessage from a CloudEvent's id and data.

    Raises PermanentError when the event does not carry a Pub/Sub message.
    """
    if isinstance(data, (bytes, str)):
        try:
            data = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise PermanentError("event data is not a Pub/Sub message envelope",
                                 field="data") from exc
    if not isinstance(data, Mapping) or not isinstance(data.get("message"), Mapping):
        raise PermanentError("event data has no 'message' object", field="message",
                             rule="Pub/Sub CloudEvent data must contain 'message'")
    message: Mapping[str, Any] = data["message"]
    raw = message.get("data", "")
    if not isinstance(raw, str):
        raise PermanentError("message.data must be a base64 string", field="message.data")
    try:
        payload = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise PermanentError("message.data is not valid base64", field="message.data") from exc
    message_id = message.get("messageId") or message.get("message_id") or event_id
    if not message_id:
        raise PermanentError("message has no messageId", field="message.messageId")
    attributes = message.get("attributes") or {}
    if not isinstance(attributes, Mapping):
        raise PermanentError("message.attributes must be an object",
                             field="message.attributes")
    return PubSubMessage(
        message_id=str(message_id),
        data=payload,
        attributes={str(k): str(v) for k, v in attributes.items()},
        publish_time=message.get("publishTime") or message.get("publish_time"),
        subscription=data.get("subscription"),
        delivery_attempt=_attempt(data.get("deliveryAttempt", message.get("deliveryAttempt"))),
    )
