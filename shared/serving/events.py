"""Cloud Storage object-finalize events, in the two shapes they arrive in.

* **Eventarc** (production): a CloudEvent of type
  ``google.cloud.storage.object.v1.finalized`` whose data is the object resource
  (``bucket``, ``name``, ``generation``, ``md5Hash``, ``crc32c``, ``size``, ...).
* **Cloud Storage Pub/Sub notifications** (what fake-gcs-server sends, and an
  alternative production route): a Pub/Sub message with attributes ``eventType``
  (``OBJECT_FINALIZE``), ``bucketId``, ``objectId``, ``objectGeneration``,
  ``payloadFormat`` and the object resource as JSON data (or none with
  ``payloadFormat=NONE``).

Both become one :class:`ObjectEvent`; anything but a finalize (a delete, a
metadata update, an archive) is None: acknowledged without effect. The identity of
an event is (bucket, name, generation): redeliveries and the same upload reported
by both routes share it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.errors import InvalidEventError, PermanentError
from shared.events import parse_pubsub_event
from shared.payload import Limits, decode

__all__ = ["FINALIZED", "ObjectEvent", "log_fields", "parse_storage_event"]

FINALIZED = "google.cloud.storage.object.v1.finalized"
_PUBSUB_PUBLISHED = "google.cloud.pubsub.topic.v1.messagePublished"
_NOTIFICATION_FINALIZE = "OBJECT_FINALIZE"
# Bucket names: 3-222 characters of lowercase letters, digits, '-', '_' and '.'.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")
_GENERATION = re.compile(r"^[0-9]{1,20}$")
# An object resource is small; a large one is not from Cloud Storage.
_OBJECT_LIMITS = Limits(max_bytes=256_000, max_depth=4, max_string_chars=8_192,
                        max_items=200)


@dataclass(frozen=True, slots=True)
class ObjectEvent:
    """One finalized object generation."""

    bucket: str
    name: str
    generation: int
    md5_hash: str | None = None  # base64, as Cloud Storage reports it
    crc32c: str | None = None  # base64
    size: int | None = None

    @property
    def key(self) -> str:
        """The idempotency key: ``gs://bucket/name#generation``."""
        return f"gs://{self.bucket}/{self.name}#{self.generation}"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _from_resource(resource: Mapping[str, Any], bucket: Any, name: Any,
                   generation: Any) -> ObjectEvent:
    if not isinstance(bucket, str) or not _BUCKET.match(bucket):
        raise InvalidEventError("storage event has no valid bucket", field="bucket")
    if not isinstance(name, str) or not name or len(name) > 1024 or "\x00" in name:
        raise InvalidEventError("storage event has no valid object name", field="name")
    if isinstance(generation, int) and not isinstance(generation, bool):
        generation = str(generation)
    if not isinstance(generation, str) or not _GENERATION.match(generation):
        raise InvalidEventError("storage event has no valid generation", field="generation")
    size = resource.get("size")
    return ObjectEvent(
        bucket=bucket, name=name, generation=int(generation),
        md5_hash=_text(resource.get("md5Hash")), crc32c=_text(resource.get("crc32c")),
        size=int(size) if isinstance(size, (int, str)) and str(size).isdigit() else None,
    )


def _resource(data: Any) -> Mapping[str, Any]:
    if data is None or data == b"" or data == "":
        return {}
    if isinstance(data, (bytes, str)):
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
        try:
            data = decode(raw, _OBJECT_LIMITS)
        except PermanentError as exc:
            raise InvalidEventError(f"storage event data is not an object resource: "
                                    f"{exc.message}", field="data", rule=exc.rule) from exc
    if not isinstance(data, Mapping):
        raise InvalidEventError("storage event data is not an object resource", field="data")
    return data


def parse_storage_event(cloud_event: Any) -> ObjectEvent | None:
    """The finalized object an event reports, or None for any other kind of event.

    Raises InvalidEventError when the event is neither an Eventarc storage event nor
    a Pub/Sub message.
    """
    event_type = cloud_event.get("type")
    if isinstance(event_type, str) and event_type.startswith("google.cloud.storage.object."):
        if event_type != FINALIZED:
            return None
        resource = _resource(cloud_event.data)
        return _from_resource(resource, resource.get("bucket"), resource.get("name"),
                              resource.get("generation"))
    if event_type not in (_PUBSUB_PUBLISHED, None) and not isinstance(cloud_event.data,
                                                                      Mapping):
        raise InvalidEventError(f"event type {str(event_type)[:80]!r} is not a storage event",
                                field="type")
    message = parse_pubsub_event(cloud_event.get("id"), cloud_event.data)
    attributes = message.attributes
    if attributes.get("eventType") != _NOTIFICATION_FINALIZE:
        return None
    resource = _resource(message.data) if attributes.get("payloadFormat") != "NONE" else {}
    return _from_resource(resource, attributes.get("bucketId"), attributes.get("objectId"),
                          attributes.get("objectGeneration"))


def log_fields(event: ObjectEvent | None) -> dict[str, Any]:
    """What every log line about this event carries."""
    return {"object": event.key} if event is not None else {}
