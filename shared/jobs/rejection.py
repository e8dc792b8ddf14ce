"""Recording a refused job request on the rejections topic.

The record is the original message with the reason as attributes, published and
awaited *before* the event is acknowledged: if the publish fails the event is retried,
so no refusal goes unrecorded. Since the record must never fail for the reason the
request did, :func:`rejection_record` makes it fit Pub/Sub's limits whatever the input
was: reason texts are cleaned (lone surrogates replaced) and clipped to an attribute's
1024 bytes by the adapter; the original attributes are copied only while they are valid
and there is room for them (100 in all, ours first); data larger than a request may be
is cut to :data:`REQUEST_LIMITS` ``.max_bytes`` — a clipped record says so and how large
the original was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from shared import pubsub
from shared.errors import PermanentError
from shared.jobspec.request import REQUEST_LIMITS
from shared.log import get_logger

if TYPE_CHECKING:
    from shared.config import AccelopsConfig, Settings
    from shared.events import PubSubMessage

__all__ = ["RejectionRecord", "publish_rejection", "rejection_record"]

log = get_logger("accelops.submit")

REJECTED_BY = "submit_job"
# Attribute names the record may set; a message's own attributes of these names are
# never copied, so a sender cannot forge what the record says about itself.
RESERVED = frozenset({"rejected_by", "rejection_reason", "rejection_field", "rejection_rule",
                      "source_message_id", "rejection_data_clipped_from",
                      "rejection_attributes_dropped"})


@dataclass(frozen=True, slots=True)
class RejectionRecord:
    data: bytes
    attributes: dict[str, str]


def rejection_record(message: PubSubMessage, error: PermanentError) -> RejectionRecord:
    """The message to publish for a refused request (pure; always within Pub/Sub's limits)."""
    ours = {
        "rejected_by": REJECTED_BY,
        "rejection_reason": error.message,
        "rejection_field": error.field or "",
        "rejection_rule": error.rule or "",
        "source_message_id": message.message_id,
    }
    data = message.data
    if len(data) > REQUEST_LIMITS.max_bytes:
        ours["rejection_data_clipped_from"] = str(len(data))
        data = data[:REQUEST_LIMITS.max_bytes]
    theirs = {k: v for k, v in message.attributes.items() if k not in RESERVED}
    # Ours first, and room for the count of dropped attributes should there be any.
    room = pubsub.MAX_ATTRIBUTES - len(ours) - 1
    kept = [(k, v) for k, v in theirs.items() if pubsub.valid_attribute_key(k)][:room]
    if len(kept) < len(theirs):
        ours["rejection_attributes_dropped"] = str(len(theirs) - len(kept))
    return RejectionRecord(data, {**dict(kept), **ours})


def publish_rejection(message: PubSubMessage, error: PermanentError, settings: Settings,
                      config: AccelopsConfig) -> None:
    """Publish the rejection record and wait until Pub/Sub stored it.

    Raises the adapter's errors: when the record cannot be stored (no project set,
    topic missing, Pub/Sub unreachable) they are deployment or transient errors, so
    the event is retried rather than acknowledged unrecorded.
    """
    log.error(f"job request rejected: {error.message}", message_id=message.message_id,
              **error.as_fields())
    record = rejection_record(message, error)
    settings.require("project")
    assert settings.project is not None
    pubsub.publish(settings.project, config.topics.rejections, record.data, record.attributes)
