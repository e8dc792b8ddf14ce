"""One subscription's messages: unacked ones with their leases, acked ones kept for seek.

This is the delivery state machine of the real service, per subscription:

* every delivery leases the message under a fresh ack ID until the ack
  deadline; ack removes it, ``modify_ack_deadline(0)`` (a nack) or an expired
  deadline makes it available again after the retry-policy backoff;
* delivery attempts are ``1 + nacks + expirations`` and are only exposed when
  a dead-letter policy is set (0 otherwise, as the real API does); after
  ``max_delivery_attempts`` failed deliveries the message leaves the backlog and
  the broker republishes it to the dead-letter topic;
* with ``retain_acked_messages`` acked messages are kept, so that a seek back in
  time delivers them again.

A ``Backlog`` takes no lock: the broker calls it under its own. Times are the
broker's monotonic clock (``now``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from sandbox.pubsub.filters import Predicate
from sandbox.pubsub.model import (
    PUSH_DEFAULT_MAX_BACKOFF,
    PUSH_DEFAULT_MIN_BACKOFF,
    Delivery,
    Message,
    SubscriptionConfig,
    SubscriptionStats,
    exponential,
)

#: Acked messages kept per subscription for seek (the service keeps 7 days' worth).
MAX_RETAINED = 10_000


@dataclass
class Pending:
    """An unacked message: how often it was delivered, when it may go out again."""

    message: Message
    attempts: int = 0
    available_at: float = 0.0
    ack_id: str | None = None
    lease_deadline: float = 0.0


@dataclass
class Backlog:
    """A subscription's configuration and messages.

    ``topics`` is the broker's live set of topic names: a message is dead-lettered
    only while its dead-letter topic exists (else it keeps being retried).
    """

    config: SubscriptionConfig
    predicate: Predicate
    topics: Container[str]
    pending: dict[str, Pending] = field(default_factory=dict)
    leases: dict[str, str] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    retained: OrderedDict[str, Message] = field(default_factory=OrderedDict)

    def bump(self, counter: str, amount: int = 1) -> None:
        self.counters[counter] = self.counters.get(counter, 0) + amount

    # ---------------------------------------------------------------- intake
    def offer(self, message: Message, now: float) -> None:
        """Take a message published to the topic, unless detached or filtered out."""
        if self.config.detached or not self.predicate(message.attributes):
            return
        self.pending[message.message_id] = Pending(message=message, available_at=now)
        self.bump("published")

    # ------------------------------------------------------------ deliveries
    def lease(self, now: float, limit: int, deadline: float | None,
              new_ack_id: Callable[[], str]) -> list[Delivery]:
        """Lease up to ``limit`` available messages for ``deadline`` seconds (default:
        the subscription's ack deadline)."""
        lease_for = deadline if deadline is not None else self.config.ack_deadline_seconds
        dead_letter = self.config.dead_letter_policy is not None
        deliveries: list[Delivery] = []
        for pending in self.pending.values():
            if len(deliveries) >= limit:
                break
            if pending.ack_id is not None or pending.available_at > now:
                continue
            pending.attempts += 1
            pending.ack_id = new_ack_id()
            pending.lease_deadline = now + lease_for
            self.leases[pending.ack_id] = pending.message.message_id
            self.bump("delivered")
            deliveries.append(Delivery(
                ack_id=pending.ack_id,
                message=pending.message,
                delivery_attempt=pending.attempts if dead_letter else 0,
                attempt=pending.attempts,
                subscription=self.config,
            ))
        return deliveries

    def acknowledge(self, ack_ids: Iterable[str]) -> int:
        """Ack leased messages; unknown or stale ack IDs are ignored. Returns the count."""
        acked = 0
        for ack_id in ack_ids:
            message_id = self.leases.pop(ack_id, None)
            if message_id is None:
                continue
            pending = self.pending.pop(message_id, None)
            if pending is not None:
                self._retain(pending.message)
            self.bump("acked")
            acked += 1
        return acked

    def modify(self, ack_ids: Iterable[str], seconds: float, now: float) -> list[Pending]:
        """Extend leases to ``seconds`` from now; 0 nacks. Returns the messages that
        ran out of delivery attempts (to dead-letter)."""
        exhausted: list[Pending] = []
        for ack_id in ack_ids:
            message_id = self.leases.get(ack_id)
            if message_id is None:
                continue
            pending = self.pending[message_id]
            if seconds == 0:
                if self._fail(pending, now, "nacked"):
                    exhausted.append(pending)
            else:
                pending.lease_deadline = now + seconds
        return exhausted

    def leased(self, ack_ids: Iterable[str]) -> set[str]:
        """Which of ``ack_ids`` still hold a lease."""
        return {ack_id for ack_id in ack_ids if ack_id in self.leases}

    def expire(self, now: float) -> list[Pending]:
        """Fail every lease past its deadline; returns the exhausted messages."""
        overdue = [self.pending[message_id] for message_id in self.leases.values()
                   if self.pending[message_id].lease_deadline <= now]
        return [pending for pending in overdue if self._fail(pending, now, "expired")]

    def _fail(self, pending: Pending, now: float, counter: str) -> bool:
        """A delivery failed (nack or expiry): back off, or leave the backlog when
        exhausted (True: the caller dead-letters it)."""
        if pending.ack_id is not None:
            self.leases.pop(pending.ack_id, None)
        pending.ack_id = None
        self.bump(counter)
        policy = self.config.dead_letter_policy
        if (policy is not None and pending.attempts >= policy.max_delivery_attempts
                and policy.dead_letter_topic in self.topics):
            self.pending.pop(pending.message.message_id, None)
            self.bump("dead_lettered")
            return True
        pending.available_at = now + self._backoff(pending.attempts)
        return False

    def _backoff(self, failures: int) -> float:
        if self.config.retry_policy is not None:
            return self.config.retry_policy.delay(failures)
        if self.config.is_push:
            return exponential(PUSH_DEFAULT_MIN_BACKOFF, PUSH_DEFAULT_MAX_BACKOFF, failures)
        return 0.0

    def next_event(self, now: float) -> float:
        """Seconds until the next lease expiry or backoff end (inf if none)."""
        soonest = float("inf")
        for pending in self.pending.values():
            if pending.ack_id is not None:
                soonest = min(soonest, pending.lease_deadline - now)
            elif pending.available_at > now:
                soonest = min(soonest, pending.available_at - now)
        return max(soonest, 0.001)

    def stats(self) -> SubscriptionStats:
        return SubscriptionStats(outstanding=len(self.pending), leased=len(self.leases),
                                 **self.counters)

    def clear(self) -> None:
        """Drop every message (detach)."""
        self.pending.clear()
        self.leases.clear()
        self.retained.clear()

    # ------------------------------------------------------------------ seek
    def unacked(self) -> list[Message]:
        """The messages not yet acknowledged, leased or not (what a snapshot keeps)."""
        return [pending.message for pending in self.pending.values()]

    def seek_to(self, messages: Iterable[Message], now: float) -> None:
        """Make exactly ``messages`` unacked (a snapshot's); every other one counts as
        acknowledged. Outstanding ack IDs stop working."""
        wanted = {message.message_id: message for message in messages}
        for pending in self.pending.values():
            if pending.message.message_id not in wanted:
                self._retain(pending.message)
        for message_id in wanted:
            self.retained.pop(message_id, None)
        self.leases.clear()
        self.pending = {message_id: Pending(message=message, available_at=now)
                        for message_id, message in _in_order(wanted.values())}

    def seek_time(self, moment: datetime, now: float) -> None:
        """Acknowledge every message published before ``moment``; make the later ones
        unacked again, acked ones too where they were retained."""
        known = [*self.retained.values(), *self.unacked()]
        self.seek_to([message for message in known if message.publish_time >= moment], now)

    def _retain(self, message: Message) -> None:
        if not self.config.retain_acked_messages:
            return
        self.retained[message.message_id] = message
        while len(self.retained) > MAX_RETAINED:
            self.retained.popitem(last=False)


def _in_order(messages: Iterable[Message]) -> list[tuple[str, Message]]:
    """Messages in publish order (numeric message ids)."""
    return sorted(((m.message_id, m) for m in messages), key=lambda item: int(item[0]))
