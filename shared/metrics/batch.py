"""Grouping encoded items into batches bounded by count and by bytes.

Two places need it with the same rules: the load generator packs metric records into
Pub/Sub messages (≤ 10 MB each, flushed by count, by age and at shutdown), and
``ingest_metrics`` packs rows into BigQuery insert requests (≤ 500 rows, < 9 MB).
An item larger than ``max_bytes`` on its own still gets a batch of its own: refusing it
here would silently drop data; the caller's validation decides whether it is too big.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["Batcher", "split"]

T = TypeVar("T")


def split(items: Iterable[tuple[T, int]], *, max_count: int,
          max_bytes: int) -> Iterator[list[T]]:
    """Yield consecutive batches of ``(item, size)`` pairs, each within both bounds."""
    if max_count < 1 or max_bytes < 1:
        raise ValueError("max_count and max_bytes must be positive")
    batch: list[T] = []
    size = 0
    for item, item_size in items:
        if batch and (len(batch) >= max_count or size + item_size > max_bytes):
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += item_size
    if batch:
        yield batch


@dataclass
class Batcher(Generic[T]):
    """A growing batch that says when it must be sent: full by count or bytes, or old.

    Pure: time comes in as ``now`` (monotonic seconds), so callers own the clock and
    tests need no sleeps. ``add`` returns a batch that is due because the new item
    would not fit; ``take_due(now)`` returns the batch once it is ``max_age`` old;
    ``drain`` returns whatever is left (at shutdown).
    """

    max_count: int
    max_bytes: int
    max_age: float
    _items: list[T] = field(default_factory=list)
    _bytes: int = 0
    _opened: float | None = None

    def __post_init__(self) -> None:
        if self.max_count < 1 or self.max_bytes < 1 or self.max_age <= 0:
            raise ValueError("max_count, max_bytes and max_age must be positive")

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item: T, size: int, now: float) -> list[T] | None:
        """Add one item; return the previous batch if the item did not fit in it.

        A batch that reaches ``max_count`` exactly is returned at once, with the item.
        """
        full: list[T] | None = None
        if self._items and (len(self._items) >= self.max_count
                            or self._bytes + size > self.max_bytes):
            full = self.drain()
        if not self._items:
            self._opened = now
        self._items.append(item)
        self._bytes += size
        if len(self._items) >= self.max_count:
            if full is not None:
                # Both the old batch and this one are full: hand back the old one now and
                # keep the new one, which is at its count limit, for the next call.
                return full
            return self.drain()
        return full

    def take_due(self, now: float) -> list[T] | None:
        """The current batch if it is at least ``max_age`` old, else ``None``."""
        if self._items and self._opened is not None and now - self._opened >= self.max_age:
            return self.drain()
        return None

    def drain(self) -> list[T]:
        """Everything pending, emptying the batcher."""
        items, self._items, self._bytes, self._opened = self._items, [], 0, None
        return items
