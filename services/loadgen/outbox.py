"""Encoded records on their way to Pub/Sub: the open batch, the closed ones, the counts.

A :class:`~shared.metrics.batch.Batcher` decides when a batch is closed (full by count
or bytes, old, or flushed); closed batches queue in order and leave the queue only
when the publisher confirms them. A batch whose publish failed stays at the head of
the queue and is tried again, so a Pub/Sub outage delays records instead of losing
them; what is still queued when the process must end is counted, never guessed.

Run records (:mod:`services.loadgen.runs`) travel the same queue as messages of their
own (:class:`RunMessage`), with the same retry and the same accounting, counted
apart (``*_runs``). Queuing one closes the open batch first, so messages leave in
the order things happened: the records of a test before its stop record.

No I/O and no clock of its own: the Locust plugin calls it from its greenlets, tests
call it directly.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from shared.metrics.batch import Batcher

from .records import MESSAGE_DATA_LIMIT, record_size

__all__ = ["Outbox", "RunMessage"]


@dataclass(frozen=True, eq=False)
class RunMessage:
    """One encoded run record, published as a message of its own."""

    test_id: str
    data: bytes


Item = list[bytes] | RunMessage


@dataclass
class Outbox:
    """Records waiting to become messages, and messages waiting to be published."""

    max_count: int
    max_age: float
    max_bytes: int = MESSAGE_DATA_LIMIT - 1
    published_records: int = 0
    published_messages: int = 0
    publish_errors: int = 0
    rejected_records: int = 0
    late_records: int = 0
    published_runs: int = 0
    rejected_runs: int = 0
    late_runs: int = 0
    closed: bool = False
    _batcher: Batcher[bytes] = field(init=False)
    _ready: deque[Item] = field(init=False, default_factory=deque)

    def __post_init__(self) -> None:
        self._batcher = Batcher(self.max_count, self.max_bytes, self.max_age)

    def add(self, encoded: bytes, now: float) -> bool:
        """Add one encoded record; True when a batch is ready to publish.

        After :meth:`close` the record is only counted (``late_records``).
        """
        if self.closed:
            self.late_records += 1
            return False
        full = self._batcher.add(encoded, record_size(encoded), now)
        if full:
            self._ready.append(full)
        return bool(self._ready)

    def add_run(self, message: RunMessage) -> bool:
        """Queue a run record behind everything recorded so far; True unless closed
        (then it is only counted, ``late_runs``)."""
        if self.closed:
            self.late_runs += 1
            return False
        self.flush()
        self._ready.append(message)
        return True

    def flush_due(self, now: float) -> bool:
        """Close the open batch if it is old enough; True when a batch is ready."""
        due = self._batcher.take_due(now)
        if due:
            self._ready.append(due)
        return bool(self._ready)

    def flush(self) -> bool:
        """Close the open batch whatever its age; True when a batch is ready."""
        rest = self._batcher.drain()
        if rest:
            self._ready.append(rest)
        return bool(self._ready)

    def resize(self, max_count: int, max_age: float) -> None:
        """New bounds for the batches to come; the open batch is closed first."""
        self.flush()
        self.max_count, self.max_age = max_count, max_age
        self._batcher = Batcher(max_count, self.max_bytes, max_age)

    def close(self) -> None:
        """Flush and refuse further records (shutdown)."""
        self.flush()
        self.closed = True

    def head(self) -> Item | None:
        """The oldest closed batch (or run message), queued until confirmed or rejected."""
        return self._ready[0] if self._ready else None

    def published(self, item: Item) -> None:
        """The head batch (or run message) is stored by Pub/Sub."""
        self._pop(item)
        self.published_messages += 1
        if isinstance(item, RunMessage):
            self.published_runs += 1
        else:
            self.published_records += len(item)

    def failed(self) -> None:
        """Publishing the head failed for now; it stays queued."""
        self.publish_errors += 1

    def rejected(self, item: Item) -> None:
        """Pub/Sub refused the head for good; it is dropped and counted."""
        self._pop(item)
        self.publish_errors += 1
        if isinstance(item, RunMessage):
            self.rejected_runs += 1
        else:
            self.rejected_records += len(item)

    def _pop(self, item: Item) -> None:
        if not self._ready or self._ready[0] is not item:
            raise ValueError("only the head batch can leave the queue")
        self._ready.popleft()

    @property
    def open_records(self) -> int:
        """Records in the batch still being filled."""
        return len(self._batcher)

    @property
    def queued_records(self) -> int:
        """Records in closed batches not yet confirmed."""
        return sum(len(item) for item in self._ready if not isinstance(item, RunMessage))

    @property
    def pending_runs(self) -> int:
        """Run messages not yet confirmed."""
        return sum(isinstance(item, RunMessage) for item in self._ready)

    @property
    def idle(self) -> bool:
        """Nothing is waiting: no open batch, nothing queued."""
        return not self._ready and self.open_records == 0

    @property
    def pending_records(self) -> int:
        """Records not yet confirmed by Pub/Sub, open batch included."""
        return self.open_records + self.queued_records

    @property
    def lost_records(self) -> int:
        """Records that did not, and now will not, reach Pub/Sub (once closed)."""
        return self.pending_records + self.rejected_records + self.late_records

    @property
    def lost_runs(self) -> int:
        """Run messages that did not, and now will not, reach Pub/Sub (once closed)."""
        return self.pending_runs + self.rejected_runs + self.late_runs
