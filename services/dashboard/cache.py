"""Built reports, kept so a page and its charts cost the metrics store one read.

A report page and its chart images arrive as separate requests; without a cache each
chart would rebuild the whole report (a compared page cost 20 BigQuery queries). Here
a page builds its report once (one query per view) and its charts are drawn from that
same report, each chart once.

How long an entry lives depends on whether the tests are still running: a finished
test (its load generator recorded the stop, or nothing has arrived for
:data:`SETTLED_AFTER`) no longer changes, so its report is kept for an hour; a live one
for :data:`LIVE_SECONDS`, which is also the pages' ``max-age``. The least recently used
entry goes first beyond :data:`MAX_ENTRIES`. Entries are per process (Cloud Run
instances each keep their own): a cache miss costs queries, never correctness.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Generic, TypeVar

from shared.metrics.loadtest.model import TestSummary

__all__ = ["FINISHED_SECONDS", "LIVE_SECONDS", "MAX_ENTRIES", "SETTLED_AFTER", "TtlCache",
           "settled"]

LIVE_SECONDS = 30.0
FINISHED_SECONDS = 3600.0
MAX_ENTRIES = 64
# A test without a stop record whose last request is this old is not coming back.
SETTLED_AFTER = timedelta(minutes=10)

V = TypeVar("V")


def settled(summaries: list[TestSummary], now: datetime | None = None) -> bool:
    """Whether none of these tests can still change."""
    now = now or datetime.now(UTC)
    return all(s.finished or now - s.ended > SETTLED_AFTER for s in summaries)


@dataclass
class _Entry(Generic[V]):
    value: V
    expires: float


class TtlCache(Generic[V]):
    """Values by key, each with its own lifetime, the least recently used dropped first.

    ``get`` builds a missing or expired value with ``build`` outside any lock held by
    other keys; two threads that miss the same key at once may both build it (the
    last one wins), which costs a query, not a wrong answer.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 max_entries: int = MAX_ENTRIES) -> None:
        self._clock = clock
        self._max = max_entries
        self._entries: OrderedDict[Hashable, _Entry[V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], V],
            lifetime: Callable[[V], float]) -> V:
        """The value kept at ``key``, or ``build()``'s, kept for ``lifetime(value)`` s."""
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.expires > now:
                self._entries.move_to_end(key)
                return entry.value
        value = build()
        with self._lock:
            self._entries[key] = _Entry(value, self._clock() + lifetime(value))
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return value

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
