"""The sandbox Pub/Sub's data model: limits, configuration and message types.

Plain frozen dataclasses shared by the broker, the gRPC conversions, the push
dispatcher and the state file; nothing here holds state or takes a lock. The
limits and defaults are the real service's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

#: Real service limits.
MIN_ACK_DEADLINE = 10
MAX_ACK_DEADLINE = 600
DEFAULT_ACK_DEADLINE = 10
MIN_DELIVERY_ATTEMPTS = 5
MAX_DELIVERY_ATTEMPTS = 100
DEFAULT_DELIVERY_ATTEMPTS = 5
MAX_BACKOFF = 600.0
DEFAULT_MIN_BACKOFF = 10.0
DEFAULT_MAX_BACKOFF = 600.0
#: Push backoff of the real service when a subscription has no retry policy.
PUSH_DEFAULT_MIN_BACKOFF = 0.1
PUSH_DEFAULT_MAX_BACKOFF = 60.0
MAX_PULL_MESSAGES = 1000
#: Publish limits (https://cloud.google.com/pubsub/quotas#resource_limits): 100 attributes
#: per message, keys of at most 256 bytes, values of at most 1,024 bytes; 10 MB of data
#: per message, and 1,000 messages and 10 MB per publish request. The stand-in's own copy,
#: not the library's (shared/pubsub.py): a wrong limit there must not pass on both sides
#: (tests/unit/test_stand_in_facts.py compares them).
MAX_ATTRIBUTES = 100
ATTRIBUTE_KEY_MAX_BYTES = 256
ATTRIBUTE_MAX_BYTES = 1024
MAX_MESSAGE_BYTES = 10_000_000
MAX_PUBLISH_MESSAGES = 1000

#: Attributes the real service adds to a dead-lettered message.
DEAD_LETTER_ATTRIBUTES = (
    "CloudPubSubDeadLetterSourceDeliveryCount",
    "CloudPubSubDeadLetterSourceSubscription",
    "CloudPubSubDeadLetterSourceSubscriptionProject",
    "CloudPubSubDeadLetterSourceTopicPublishTime",
)

#: How long the real service keeps a subscription's messages (and a snapshot), 7 days.
RETENTION_SECONDS = 7 * 24 * 3600.0


def rfc3339(moment: datetime) -> str:
    """Format a UTC time the way Pub/Sub JSON does (``2024-01-02T03:04:05.678Z``)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential redelivery backoff: ``min * 2**(failures-1)`` capped at ``max``."""

    minimum_backoff: float = DEFAULT_MIN_BACKOFF
    maximum_backoff: float = DEFAULT_MAX_BACKOFF

    def delay(self, failures: int) -> float:
        """Seconds to wait before redelivering after ``failures`` failed deliveries."""
        return exponential(self.minimum_backoff, self.maximum_backoff, failures)


@dataclass(frozen=True)
class DeadLetterPolicy:
    """Where messages go after ``max_delivery_attempts`` failed deliveries."""

    dead_letter_topic: str
    max_delivery_attempts: int = DEFAULT_DELIVERY_ATTEMPTS


@dataclass(frozen=True)
class PushConfig:
    """Push endpoint of a subscription; an empty endpoint means a pull subscription."""

    push_endpoint: str = ""
    attributes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicConfig:
    """A topic's configuration."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SubscriptionConfig:
    """A subscription's configuration (the part persisted to the state file)."""

    name: str
    topic: str
    ack_deadline_seconds: int = DEFAULT_ACK_DEADLINE
    push_config: PushConfig = field(default_factory=PushConfig)
    retry_policy: RetryPolicy | None = None
    dead_letter_policy: DeadLetterPolicy | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    filter: str = ""
    enable_message_ordering: bool = False
    detached: bool = False
    #: Keep acknowledged messages, so that seeking back in time replays them.
    retain_acked_messages: bool = False

    @property
    def is_push(self) -> bool:
        """Whether the broker's push dispatcher, not clients, consumes this subscription."""
        return bool(self.push_config.push_endpoint)


@dataclass(frozen=True)
class Message:
    """A published message as stored and delivered."""

    message_id: str
    data: bytes
    attributes: Mapping[str, str]
    publish_time: datetime
    ordering_key: str = ""


@dataclass(frozen=True)
class Delivery:
    """One delivery of a message: what a pull returns and a push POSTs."""

    ack_id: str
    message: Message
    #: 1-based attempt number when a dead-letter policy is set, else 0 (like the API).
    delivery_attempt: int
    #: 1-based attempt number, always counted (for logs and observers).
    attempt: int
    #: Configuration at delivery time (push endpoint, ack deadline, ...).
    subscription: SubscriptionConfig


@dataclass(frozen=True)
class SubscriptionStats:
    """Counters for observers; ``outstanding`` counts unacked messages (leased or not)."""

    published: int = 0
    delivered: int = 0
    acked: int = 0
    nacked: int = 0
    expired: int = 0
    dead_lettered: int = 0
    push_successes: int = 0
    push_failures: int = 0
    outstanding: int = 0
    leased: int = 0


@dataclass(frozen=True)
class PushRecord:
    """One push attempt, kept in a bounded log for demos and assertions."""

    subscription: str
    message_id: str
    attempt: int
    status: int | None
    error: str | None
    latency: float
    acked: bool
    at: datetime


@dataclass(frozen=True)
class SnapshotConfig:
    """A snapshot: what it is of, not the messages it holds."""

    name: str
    topic: str
    expire_time: datetime
    labels: Mapping[str, str] = field(default_factory=dict)


def exponential(minimum: float, maximum: float, failures: int) -> float:
    """``minimum * 2**(failures-1)`` capped at ``maximum``; 0 before any failure."""
    if failures <= 0:
        return 0.0
    return float(min(maximum, minimum * (2 ** min(failures - 1, 32))))

