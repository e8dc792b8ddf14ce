"""The in-memory Pub/Sub broker: topics, subscriptions, leases and redelivery.

This is the whole data model of the sandbox Pub/Sub and it knows nothing about
gRPC or HTTP, so tests and demos can drive and observe it in-process while the
gRPC server (``server.py``) and the push dispatcher (``push.py``) are thin
adapters over it.

Semantics follow the real service where it matters to application code:

* publish assigns increasing numeric message IDs and a publish time, and fans a
  message out to every subscription attached to the topic *at publish time*
  (and whose filter matches);
* every delivery leases the message under a fresh ack ID until the ack
  deadline; ack removes it, ``modify_ack_deadline(0)`` (a nack) or an expired
  deadline makes it available again after the retry-policy backoff;
* delivery attempts are ``1 + nacks + expirations`` and are only exposed when
  a dead-letter policy is set (0 otherwise, as the real API does); after
  ``max_delivery_attempts`` failed deliveries the message is republished to the
  dead-letter topic with the ``CloudPubSubDeadLetterSource*`` attributes.

Redelivery timers are evaluated lazily: every read of a subscription first
expires overdue leases, and every waiter sleeps only until the next lease
deadline or backoff expiry, so no timer thread is needed. ``advance_clock``
moves the broker's notion of time forward so tests can cross a 10 s ack
deadline instantly.

One re-entrant condition guards all state: simple, and plenty for a sandbox.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from sandbox.pubsub import names
from sandbox.pubsub.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    NotFoundError,
)
from sandbox.pubsub.filters import Predicate, compile_filter

# The service's publish limits (documented; Google's emulator does not enforce them).
from shared.pubsub import (
    ATTRIBUTE_KEY_MAX_BYTES,
    ATTRIBUTE_MAX_BYTES,
    MAX_ATTRIBUTES,
    MAX_MESSAGE_BYTES,
    MAX_PUBLISH_MESSAGES,
)

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

#: Attributes the real service adds to a dead-lettered message.
DEAD_LETTER_ATTRIBUTES = (
    "CloudPubSubDeadLetterSourceDeliveryCount",
    "CloudPubSubDeadLetterSourceSubscription",
    "CloudPubSubDeadLetterSourceSubscriptionProject",
    "CloudPubSubDeadLetterSourceTopicPublishTime",
)

# Longest a waiter sleeps without re-checking; a safety net, not a poll rate.
_MAX_WAIT_SLICE = 0.5


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
        return _exponential(self.minimum_backoff, self.maximum_backoff, failures)


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


@dataclass
class _Pending:
    message: Message
    attempts: int = 0
    available_at: float = 0.0
    ack_id: str | None = None
    lease_deadline: float = 0.0


@dataclass
class _Subscription:
    config: SubscriptionConfig
    predicate: Predicate
    pending: dict[str, _Pending] = field(default_factory=dict)
    leases: dict[str, str] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)

    def bump(self, counter: str, amount: int = 1) -> None:
        self.counters[counter] = self.counters.get(counter, 0) + amount


def _exponential(minimum: float, maximum: float, failures: int) -> float:
    if failures <= 0:
        return 0.0
    return float(min(maximum, minimum * (2 ** min(failures - 1, 32))))


def _labels(labels: Mapping[str, str] | None) -> dict[str, str]:
    return dict(labels or {})


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


class Broker:
    """Thread-safe in-memory Pub/Sub. All public methods may be called from any thread."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        push_log_size: int = 1000,
    ) -> None:
        self._clock = clock
        self._skew = 0.0
        self._cond = threading.Condition(threading.RLock())
        self._topics: dict[str, TopicConfig] = {}
        self._subscriptions: dict[str, _Subscription] = {}
        # Message ids stay unique across restarts, as Pub/Sub's are: consumers key rows
        # and objects on them (microseconds since the epoch, then counting up).
        self._message_ids = itertools.count(time.time_ns() // 1000)
        self._ack_ids = itertools.count(1)
        self._push_log: deque[PushRecord] = deque(maxlen=push_log_size)
        self._listeners: list[Callable[[], None]] = []
        self._closed = False

    # ------------------------------------------------------------------ time
    def now(self) -> float:
        """The broker's monotonic time (real monotonic time plus ``advance_clock`` skew)."""
        return self._clock() + self._skew

    def advance_clock(self, seconds: float) -> None:
        """Jump the broker's clock forward: expire leases and backoffs without sleeping."""
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        with self._cond:
            self._skew += seconds
            self._cond.notify_all()

    def wake(self) -> None:
        """Wake every waiter so it re-checks its cancellation condition."""
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        """Make every blocking call return promptly (used on server shutdown)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    # ------------------------------------------------------------- listeners
    def add_config_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` (outside the lock) after any topic/subscription change."""
        with self._cond:
            self._listeners.append(listener)

    def _config_changed(self) -> None:
        with self._cond:
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    # ---------------------------------------------------------------- topics
    def create_topic(self, name: str, labels: Mapping[str, str] | None = None) -> TopicConfig:
        """Create a topic; ``AlreadyExistsError`` if it exists."""
        names.topic(name)
        with self._cond:
            if name in self._topics:
                raise AlreadyExistsError("Topic already exists")
            topic = TopicConfig(name=name, labels=_labels(labels))
            self._topics[name] = topic
        self._config_changed()
        return topic

    def get_topic(self, name: str) -> TopicConfig:
        """Return a topic's configuration or raise ``NotFoundError``."""
        names.topic(name)
        with self._cond:
            return self._topic(name)

    def update_topic(self, name: str, *, labels: Mapping[str, str] | None = None) -> TopicConfig:
        """Replace a topic's labels (the only mutable topic setting modelled)."""
        names.topic(name)
        with self._cond:
            topic = replace(self._topic(name), labels=_labels(labels))
            self._topics[name] = topic
        self._config_changed()
        return topic

    def list_topics(self, project: str) -> list[TopicConfig]:
        """Topics of ``projects/{project}``, sorted by name."""
        names.project_name(project)
        prefix = project + "/topics/"
        with self._cond:
            return sorted(
                (t for n, t in self._topics.items() if n.startswith(prefix)),
                key=lambda t: t.name,
            )

    def list_topic_subscriptions(self, topic: str) -> list[str]:
        """Names of the subscriptions attached to ``topic``."""
        names.topic(topic)
        with self._cond:
            self._topic(topic)
            return sorted(n for n, s in self._subscriptions.items() if s.config.topic == topic)

    def delete_topic(self, name: str) -> None:
        """Delete a topic; its subscriptions survive, attached to ``_deleted-topic_``."""
        names.topic(name)
        with self._cond:
            self._topic(name)
            del self._topics[name]
            for sub in self._subscriptions.values():
                if sub.config.topic == name:
                    sub.config = replace(sub.config, topic=names.DELETED_TOPIC)
            self._cond.notify_all()
        self._config_changed()

    def _topic(self, name: str) -> TopicConfig:
        try:
            return self._topics[name]
        except KeyError:
            raise NotFoundError(f"Topic not found: {name}") from None

    # --------------------------------------------------------- subscriptions
    def create_subscription(self, config: SubscriptionConfig) -> SubscriptionConfig:
        """Create a subscription; it only sees messages published from now on."""
        names.subscription(config.name)
        names.topic(config.topic)
        config = self._normalise(config)
        predicate = compile_filter(config.filter)
        with self._cond:
            if config.name in self._subscriptions:
                raise AlreadyExistsError("Subscription already exists")
            self._topic(config.topic)
            self._check_dead_letter_topic(config)
            self._subscriptions[config.name] = _Subscription(config=config, predicate=predicate)
            self._cond.notify_all()
        self._config_changed()
        return config

    def get_subscription(self, name: str) -> SubscriptionConfig:
        """Return a subscription's configuration or raise ``NotFoundError``."""
        names.subscription(name)
        with self._cond:
            return self._sub(name).config

    def update_subscription(self, name: str, **changes: Any) -> SubscriptionConfig:
        """Change mutable settings (push config, deadlines, policies, labels).

        ``changes`` are ``SubscriptionConfig`` field names; ``name``, ``topic``,
        ``filter`` and ``enable_message_ordering`` are immutable, as in the real API.
        """
        immutable = {"name", "topic", "filter", "enable_message_ordering", "detached"}
        bad = immutable.intersection(changes)
        if bad:
            raise InvalidArgumentError(f"Cannot update immutable field(s): {sorted(bad)}")
        names.subscription(name)
        with self._cond:
            sub = self._sub(name)
            config = self._normalise(replace(sub.config, **changes))
            self._check_dead_letter_topic(config)
            sub.config = config
            self._cond.notify_all()
        self._config_changed()
        return config

    def list_subscriptions(self, project: str | None = None) -> list[SubscriptionConfig]:
        """Subscriptions of ``projects/{project}`` (all when None), sorted by name."""
        prefix = ""
        if project is not None:
            names.project_name(project)
            prefix = project + "/subscriptions/"
        with self._cond:
            return sorted(
                (s.config for n, s in self._subscriptions.items() if n.startswith(prefix)),
                key=lambda c: c.name,
            )

    def delete_subscription(self, name: str) -> None:
        """Delete a subscription and drop its backlog."""
        names.subscription(name)
        with self._cond:
            self._sub(name)
            del self._subscriptions[name]
            self._cond.notify_all()
        self._config_changed()

    def detach_subscription(self, name: str) -> None:
        """Detach a subscription from its topic: backlog dropped, no new messages."""
        names.subscription(name)
        with self._cond:
            sub = self._sub(name)
            sub.config = replace(sub.config, detached=True)
            sub.pending.clear()
            sub.leases.clear()
            self._cond.notify_all()
        self._config_changed()

    def _sub(self, name: str) -> _Subscription:
        try:
            return self._subscriptions[name]
        except KeyError:
            raise NotFoundError(f"Subscription does not exist: {name}") from None

    def _check_dead_letter_topic(self, config: SubscriptionConfig) -> None:
        policy = config.dead_letter_policy
        if policy is not None and policy.dead_letter_topic not in self._topics:
            raise NotFoundError(f"Dead letter topic not found: {policy.dead_letter_topic}")

    @staticmethod
    def _normalise(config: SubscriptionConfig) -> SubscriptionConfig:
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
            labels=_labels(config.labels),
            push_config=replace(
                config.push_config, attributes=_labels(config.push_config.attributes)
            ),
        )

    # --------------------------------------------------------------- publish
    def publish(
        self,
        topic: str,
        data: bytes = b"",
        attributes: Mapping[str, str] | None = None,
        ordering_key: str = "",
    ) -> str:
        """Publish one message; returns its message ID."""
        return self.publish_batch(topic, [(data, attributes or {}, ordering_key)])[0]

    def publish_batch(
        self, topic: str, messages: Sequence[tuple[bytes, Mapping[str, str], str]]
    ) -> list[str]:
        """Publish ``(data, attributes, ordering_key)`` tuples atomically, in order."""
        names.topic(topic)
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
        with self._cond:
            self._topic(topic)
            ids = [
                self._publish_locked(topic, data, attributes, key)
                for data, attributes, key in messages
            ]
            self._cond.notify_all()
        return ids

    def _publish_locked(
        self, topic: str, data: bytes, attributes: Mapping[str, str], ordering_key: str
    ) -> str:
        message = Message(
            message_id=str(next(self._message_ids)),
            data=bytes(data),
            attributes=dict(attributes),
            publish_time=datetime.now(UTC),
            ordering_key=ordering_key,
        )
        now = self.now()
        for sub in self._subscriptions.values():
            if sub.config.topic != topic or sub.config.detached:
                continue
            if not sub.predicate(message.attributes):
                continue
            sub.pending[message.message_id] = _Pending(message=message, available_at=now)
            sub.bump("published")
        return message.message_id

    # ------------------------------------------------------------ deliveries
    def pull(
        self,
        subscription: str,
        max_messages: int = 100,
        *,
        ack_deadline_seconds: float | None = None,
        timeout: float = 0.0,
        cancelled: Callable[[], bool] | None = None,
    ) -> list[Delivery]:
        """Lease up to ``max_messages`` available messages.

        Waits up to ``timeout`` real seconds for at least one message (returns
        early, empty, when ``cancelled()`` turns true or the broker closes).
        ``ack_deadline_seconds`` overrides the subscription's deadline for these
        leases (streaming pull's ``stream_ack_deadline_seconds``).
        """
        if max_messages <= 0:
            raise InvalidArgumentError("max_messages must be greater than 0")
        names.subscription(subscription)
        give_up = time.monotonic() + max(timeout, 0.0)
        with self._cond:
            while True:
                sub = self._sub(subscription)
                now = self.now()
                self._expire(sub, now)
                deliveries = self._lease(sub, now, max_messages, ack_deadline_seconds)
                if deliveries:
                    self._cond.notify_all()
                    return deliveries
                remaining = give_up - time.monotonic()
                if remaining <= 0 or self._closed or (cancelled is not None and cancelled()):
                    return []
                self._cond.wait(min(remaining, self._next_event(sub, now), _MAX_WAIT_SLICE))

    def _lease(
        self, sub: _Subscription, now: float, limit: int, deadline: float | None
    ) -> list[Delivery]:
        lease_for = deadline if deadline is not None else sub.config.ack_deadline_seconds
        dead_letter = sub.config.dead_letter_policy is not None
        deliveries: list[Delivery] = []
        for pending in sub.pending.values():
            if len(deliveries) >= limit:
                break
            if pending.ack_id is not None or pending.available_at > now:
                continue
            pending.attempts += 1
            pending.ack_id = f"{sub.config.name.rsplit('/', 1)[-1]}-{next(self._ack_ids)}"
            pending.lease_deadline = now + lease_for
            sub.leases[pending.ack_id] = pending.message.message_id
            sub.bump("delivered")
            deliveries.append(
                Delivery(
                    ack_id=pending.ack_id,
                    message=pending.message,
                    delivery_attempt=pending.attempts if dead_letter else 0,
                    attempt=pending.attempts,
                    subscription=sub.config,
                )
            )
        return deliveries

    def acknowledge(self, subscription: str, ack_ids: Iterable[str]) -> int:
        """Ack leased messages; unknown or stale ack IDs are ignored. Returns the count acked."""
        names.subscription(subscription)
        acked = 0
        with self._cond:
            sub = self._sub(subscription)
            for ack_id in ack_ids:
                message_id = sub.leases.pop(ack_id, None)
                if message_id is None:
                    continue
                sub.pending.pop(message_id, None)
                sub.bump("acked")
                acked += 1
            if acked:
                self._cond.notify_all()
        return acked

    def modify_ack_deadline(
        self, subscription: str, ack_ids: Iterable[str], seconds: float
    ) -> None:
        """Extend leases to ``seconds`` from now; 0 is a nack (redeliver after backoff)."""
        if not 0 <= seconds <= MAX_ACK_DEADLINE:
            raise InvalidArgumentError(
                f"Invalid ack deadline given: {seconds}. Must be between 0 and 600 seconds."
            )
        names.subscription(subscription)
        with self._cond:
            sub = self._sub(subscription)
            now = self.now()
            for ack_id in ack_ids:
                message_id = sub.leases.get(ack_id)
                if message_id is None:
                    continue
                pending = sub.pending[message_id]
                if seconds == 0:
                    self._fail(sub, pending, now, "nacked")
                else:
                    pending.lease_deadline = now + seconds
            self._cond.notify_all()

    def nack(self, subscription: str, ack_ids: Iterable[str]) -> None:
        """Shorthand for ``modify_ack_deadline(subscription, ack_ids, 0)``."""
        self.modify_ack_deadline(subscription, ack_ids, 0)

    def leased(self, subscription: str, ack_ids: Iterable[str]) -> set[str]:
        """Which of ``ack_ids`` still hold a lease (for streaming-pull flow control)."""
        with self._cond:
            sub = self._subscriptions.get(subscription)
            if sub is None:
                return set()
            self._expire(sub, self.now())
            return {ack_id for ack_id in ack_ids if ack_id in sub.leases}

    def _expire(self, sub: _Subscription, now: float) -> None:
        overdue = [
            sub.pending[message_id]
            for message_id in sub.leases.values()
            if sub.pending[message_id].lease_deadline <= now
        ]
        for pending in overdue:
            self._fail(sub, pending, now, "expired")

    def _fail(self, sub: _Subscription, pending: _Pending, now: float, counter: str) -> None:
        """A delivery failed (nack or expiry): back off, or dead-letter when exhausted."""
        if pending.ack_id is not None:
            sub.leases.pop(pending.ack_id, None)
        pending.ack_id = None
        sub.bump(counter)
        policy = sub.config.dead_letter_policy
        if (
            policy is not None
            and pending.attempts >= policy.max_delivery_attempts
            and policy.dead_letter_topic in self._topics
        ):
            self._dead_letter(sub, pending, policy)
            return
        pending.available_at = now + self._backoff(sub.config, pending.attempts)

    @staticmethod
    def _backoff(config: SubscriptionConfig, failures: int) -> float:
        if config.retry_policy is not None:
            return config.retry_policy.delay(failures)
        if config.is_push:
            return _exponential(PUSH_DEFAULT_MIN_BACKOFF, PUSH_DEFAULT_MAX_BACKOFF, failures)
        return 0.0

    def _dead_letter(self, sub: _Subscription, pending: _Pending, policy: DeadLetterPolicy) -> None:
        project, subscription_id = names.subscription(sub.config.name)
        message = pending.message
        attributes = dict(message.attributes)
        attributes.update(
            {
                "CloudPubSubDeadLetterSourceDeliveryCount": str(pending.attempts),
                "CloudPubSubDeadLetterSourceSubscription": subscription_id,
                "CloudPubSubDeadLetterSourceSubscriptionProject": project,
                "CloudPubSubDeadLetterSourceTopicPublishTime": rfc3339(message.publish_time),
            }
        )
        sub.pending.pop(message.message_id, None)
        sub.bump("dead_lettered")
        self._publish_locked(
            policy.dead_letter_topic, message.data, attributes, message.ordering_key
        )

    def _next_event(self, sub: _Subscription, now: float) -> float:
        """Seconds until the next lease expiry or backoff end in ``sub`` (inf if none)."""
        soonest = float("inf")
        for pending in sub.pending.values():
            if pending.ack_id is not None:
                soonest = min(soonest, pending.lease_deadline - now)
            elif pending.available_at > now:
                soonest = min(soonest, pending.available_at - now)
        return max(soonest, 0.001)

    # ------------------------------------------------------------- observers
    def stats(self, subscription: str) -> SubscriptionStats:
        """A snapshot of a subscription's counters."""
        with self._cond:
            sub = self._sub(subscription)
            self._expire(sub, self.now())
            return SubscriptionStats(
                outstanding=len(sub.pending), leased=len(sub.leases), **sub.counters
            )

    def record_push(self, record: PushRecord) -> None:
        """Log a push attempt (called by the push dispatcher)."""
        with self._cond:
            self._push_log.append(record)
            sub = self._subscriptions.get(record.subscription)
            if sub is not None:
                sub.bump("push_successes" if record.acked else "push_failures")
            self._cond.notify_all()

    def push_log(self, subscription: str | None = None) -> list[PushRecord]:
        """Recent push attempts, oldest first, optionally for one subscription."""
        with self._cond:
            return [r for r in self._push_log if subscription in (None, r.subscription)]

    def wait_until(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Block until ``condition()`` (evaluated under the broker lock) holds.

        Re-evaluated on every broker change; returns False on timeout.
        """
        give_up = time.monotonic() + timeout
        with self._cond:
            while True:
                for sub in self._subscriptions.values():
                    self._expire(sub, self.now())
                if condition():
                    return True
                remaining = give_up - time.monotonic()
                if remaining <= 0:
                    return False
                soonest = min(
                    (self._next_event(s, self.now()) for s in self._subscriptions.values()),
                    default=_MAX_WAIT_SLICE,
                )
                self._cond.wait(min(remaining, soonest, _MAX_WAIT_SLICE))

    def wait_idle(self, subscription: str, timeout: float = 10.0) -> bool:
        """Wait until ``subscription`` has no outstanding (unacked) messages."""
        return self.wait_until(lambda: not self._sub(subscription).pending, timeout)

    # ----------------------------------------------------------- persistence
    def export_config(self) -> dict[str, Any]:
        """Topics and subscriptions as JSON-ready data (messages are not included)."""
        with self._cond:
            return {
                "topics": [_topic_to_dict(t) for t in self._topics.values()],
                "subscriptions": [
                    _subscription_to_dict(s.config) for s in self._subscriptions.values()
                ],
            }

    def import_config(self, data: Mapping[str, Any]) -> None:
        """Recreate topics and subscriptions from ``export_config`` output (skips existing)."""
        for raw_topic in data.get("topics", []):
            with contextlib.suppress(AlreadyExistsError):
                self.create_topic(raw_topic["name"], raw_topic.get("labels"))
        for raw_sub in data.get("subscriptions", []):
            config = _subscription_from_dict(raw_sub)
            if config.topic == names.DELETED_TOPIC:
                continue
            # A subscription whose (dead-letter) topic is gone is skipped, not fatal.
            with contextlib.suppress(AlreadyExistsError, NotFoundError):
                self.create_subscription(config)


def _topic_to_dict(topic: TopicConfig) -> dict[str, Any]:
    return {"name": topic.name, "labels": dict(topic.labels)}


def _subscription_to_dict(config: SubscriptionConfig) -> dict[str, Any]:
    return {
        "name": config.name,
        "topic": config.topic,
        "ack_deadline_seconds": config.ack_deadline_seconds,
        "push_endpoint": config.push_config.push_endpoint,
        "push_attributes": dict(config.push_config.attributes),
        "retry_policy": None
        if config.retry_policy is None
        else {
            "minimum_backoff": config.retry_policy.minimum_backoff,
            "maximum_backoff": config.retry_policy.maximum_backoff,
        },
        "dead_letter_policy": None
        if config.dead_letter_policy is None
        else {
            "dead_letter_topic": config.dead_letter_policy.dead_letter_topic,
            "max_delivery_attempts": config.dead_letter_policy.max_delivery_attempts,
        },
        "labels": dict(config.labels),
        "filter": config.filter,
        "enable_message_ordering": config.enable_message_ordering,
    }


def _subscription_from_dict(raw: Mapping[str, Any]) -> SubscriptionConfig:
    retry = raw.get("retry_policy")
    dead_letter = raw.get("dead_letter_policy")
    return SubscriptionConfig(
        name=raw["name"],
        topic=raw["topic"],
        ack_deadline_seconds=int(raw.get("ack_deadline_seconds", DEFAULT_ACK_DEADLINE)),
        push_config=PushConfig(
            push_endpoint=raw.get("push_endpoint", ""),
            attributes=dict(raw.get("push_attributes", {})),
        ),
        retry_policy=None
        if not retry
        else RetryPolicy(float(retry["minimum_backoff"]), float(retry["maximum_backoff"])),
        dead_letter_policy=None
        if not dead_letter
        else DeadLetterPolicy(
            dead_letter["dead_letter_topic"], int(dead_letter["max_delivery_attempts"])
        ),
        labels=dict(raw.get("labels", {})),
        filter=raw.get("filter", ""),
        enable_message_ordering=bool(raw.get("enable_message_ordering", False)),
    )
