"""The in-memory Pub/Sub broker: publishing, leases, redelivery, dead-lettering, seek.

This is the whole state of the sandbox Pub/Sub and it knows nothing about gRPC
or HTTP, so tests and demos can drive and observe it in-process while the gRPC
server (``server.py``) and the push dispatcher (``push.py``) are thin adapters
over it. Its parts: ``model`` (types and limits), ``validation`` (the service's
rules), ``resources`` (topics, subscriptions and snapshots: the configuration
half, which ``Broker`` extends), ``backlog`` (one subscription's delivery state
machine) and ``snapshots``.

Semantics follow the real service where it matters to application code:
publish assigns increasing numeric message IDs and a publish time, and fans a
message out to every subscription attached to the topic *at publish time* (and
whose filter matches) and to the topic's snapshots; leases, backoff and
dead-lettering are ``Backlog``'s; a message out of delivery attempts is
republished to the dead-letter topic with the ``CloudPubSubDeadLetterSource*``
attributes.

Redelivery timers are evaluated lazily: every read of a subscription first
expires overdue leases, and every waiter sleeps only until the next lease
deadline or backoff expiry, so no timer thread is needed. ``advance_clock``
moves the broker's notion of time forward so tests can cross a 10 s ack
deadline instantly.

One re-entrant condition guards all state: simple, and plenty for a sandbox.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime

from sandbox.pubsub import names
from sandbox.pubsub.backlog import Backlog, Pending
from sandbox.pubsub.errors import FailedPreconditionError, InvalidArgumentError
from sandbox.pubsub.model import (
    MAX_ACK_DEADLINE,
    Delivery,
    Message,
    PushRecord,
    SubscriptionStats,
    rfc3339,
)
from sandbox.pubsub.resources import Resources
from sandbox.pubsub.snapshots import snapshot_name
from sandbox.pubsub.validation import Outgoing, check_publish

# Longest a waiter sleeps without re-checking; a safety net, not a poll rate.
_MAX_WAIT_SLICE = 0.5


class Broker(Resources):
    """Thread-safe in-memory Pub/Sub. All public methods may be called from any thread."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        push_log_size: int = 1000,
    ) -> None:
        super().__init__()
        self._clock = clock
        self._skew = 0.0
        # Message ids stay unique across restarts, as Pub/Sub's are: consumers key rows
        # and objects on them (microseconds since the epoch, then counting up).
        self._message_ids = itertools.count(time.time_ns() // 1000)
        self._ack_ids = itertools.count(1)
        self._push_log: deque[PushRecord] = deque(maxlen=push_log_size)
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

    def publish_batch(self, topic: str, messages: Sequence[Outgoing]) -> list[str]:
        """Publish ``(data, attributes, ordering_key)`` tuples atomically, in order."""
        names.topic(topic)
        check_publish(messages)
        with self._cond:
            self._topic(topic)
            ids = [self._publish_locked(topic, data, attributes, key)
                   for data, attributes, key in messages]
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
            if sub.config.topic == topic:
                sub.offer(message, now)
        self._snapshots.record(topic, message)
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
                deliveries = sub.lease(now, max_messages, ack_deadline_seconds,
                                       functools.partial(self._new_ack_id, sub))
                if deliveries:
                    self._cond.notify_all()
                    return deliveries
                remaining = give_up - time.monotonic()
                if remaining <= 0 or self._closed or (cancelled is not None and cancelled()):
                    return []
                self._cond.wait(min(remaining, sub.next_event(now), _MAX_WAIT_SLICE))

    def _new_ack_id(self, sub: Backlog) -> str:
        return f"{sub.config.name.rsplit('/', 1)[-1]}-{next(self._ack_ids)}"

    def acknowledge(self, subscription: str, ack_ids: Iterable[str]) -> int:
        """Ack leased messages; unknown or stale ack IDs are ignored. Returns the count acked."""
        names.subscription(subscription)
        with self._cond:
            acked = self._sub(subscription).acknowledge(ack_ids)
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
            for pending in sub.modify(ack_ids, seconds, self.now()):
                self._dead_letter(sub, pending)
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
            return sub.leased(ack_ids)

    def _expire(self, sub: Backlog, now: float) -> None:
        for pending in sub.expire(now):
            self._dead_letter(sub, pending)

    def _dead_letter(self, sub: Backlog, pending: Pending) -> None:
        """Republish a message out of delivery attempts to the dead-letter topic."""
        policy = sub.config.dead_letter_policy
        if policy is None:
            return
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
        self._publish_locked(
            policy.dead_letter_topic, message.data, attributes, message.ordering_key
        )

    def seek(self, subscription: str, *, snapshot: str | None = None,
             moment: datetime | None = None) -> None:
        """Seek to a snapshot of the same topic, or to a time: what was published
        before ``moment`` counts as acked, what came after as unacked (acked messages
        too, with ``retain_acked_messages``)."""
        if (snapshot is None) == (moment is None):
            raise InvalidArgumentError("Seek needs exactly one of snapshot and time")
        names.subscription(subscription)
        if snapshot is not None:
            snapshot_name(snapshot)
        with self._cond:
            sub = self._sub(subscription)
            if snapshot is not None:
                taken = self._snapshots.get(snapshot)
                if taken.config.topic != sub.config.topic:
                    raise FailedPreconditionError(
                        f"The subscription's topic {sub.config.topic} is different from that "
                        f"of the snapshot {taken.config.topic}; they must match in order "
                        "for Seek")
                sub.seek_to(taken.messages.values(), self.now())
            elif moment is not None:
                sub.seek_time(moment, self.now())
            self._cond.notify_all()

    # ------------------------------------------------------------- observers
    def stats(self, subscription: str) -> SubscriptionStats:
        """A snapshot of a subscription's counters."""
        with self._cond:
            sub = self._sub(subscription)
            self._expire(sub, self.now())
            return sub.stats()

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
                    (s.next_event(self.now()) for s in self._subscriptions.values()),
                    default=_MAX_WAIT_SLICE,
                )
                self._cond.wait(min(remaining, soonest, _MAX_WAIT_SLICE))

    def wait_idle(self, subscription: str, timeout: float = 10.0) -> bool:
        """Wait until ``subscription`` has no outstanding (unacked) messages."""
        return self.wait_until(lambda: not self._sub(subscription).pending, timeout)


