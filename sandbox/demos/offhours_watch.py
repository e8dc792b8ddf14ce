"""What pool_schedule did, tick by tick, for a scenario that follows it.

Two sources, both what production offers: the function's log and its audit rows.
The log (one JSON line per pool decision, then a summary with the instant the tick
planned for, ending "N audit row(s)") tells when a tick is over and what it decided
for each pool. The audit rows go to the metrics topic (attribute
``kind=pool_action``, a JSON array per tick, each row stamped with the tick's
instant); they are read through a pull subscription of our own, created before the
first tick that should be seen. The summary's count says how many rows to wait for,
so no pull waits on a tick that published none.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.errors import AccelopsError
from shared.metrics.pool_action import POOL_ACTION_KIND

__all__ = ["Tick", "TickWatch", "WatchError"]

_SUMMARY = "pool schedule: "
_AUDITS = re.compile(r"(\d+) audit row\(s\)$")
# "sandbox/v5e-dev: skipped, busy (...) -> operation operation-123": cluster/pool, note.
_DECISION = re.compile(r"^[^/\s]+/([a-z0-9-]+): (.*?)(?: -> .*)?$")


class WatchError(AccelopsError):
    pass


@dataclass(frozen=True, slots=True)
class Tick:
    """One tick: when it planned for, its decision per pool, the audit rows it
    published, its summary."""

    at: dt.datetime
    decisions: dict[str, str]
    records: list[dict[str, Any]] = field(default_factory=list)
    summary: str = ""


def _entries(chunk: bytes) -> list[dict[str, Any]]:
    found = []
    for line in chunk.decode("utf-8", errors="replace").splitlines():
        if line.startswith("{"):
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def _instant(text: object) -> dt.datetime:
    return dt.datetime.fromisoformat(str(text))


class TickWatch:
    """Follows pool_schedule's ticks in its ``log`` and its audit rows on ``topic``."""

    def __init__(self, log: Path, project: str, topic: str,
                 subscription: str = "pool-actions-demo") -> None:
        from google.cloud import pubsub_v1  # type: ignore[attr-defined,unused-ignore]

        self._log = log
        self._offset = 0
        self._lines: list[str] = []  # decisions of the tick being read
        self._subscriber = pubsub_v1.SubscriberClient()
        self._path = self._subscriber.subscription_path(project, subscription)
        self._topic = f"projects/{project}/topics/{topic}"
        self._ticks: list[Tick] = []  # read from the log, not yet given out
        self._rows: list[dict[str, Any]] = []  # pulled, not yet given to a tick
        self.records: list[dict[str, Any]] = []  # every audit row pulled

    def start(self) -> TickWatch:
        """Subscribe: the rows of ticks from now on can be read."""
        from google.api_core import exceptions as gexc

        with contextlib.suppress(gexc.AlreadyExists):
            self._subscriber.create_subscription(request={"name": self._path,
                                                          "topic": self._topic})
        return self

    def close(self) -> None:
        self._subscriber.close()

    def _read(self) -> list[Tick]:
        """The ticks finished in the log since the last read (without their rows)."""
        if not self._log.exists():
            return []
        with open(self._log, "rb") as log:
            log.seek(self._offset)
            data = log.read()
        ticks = []
        for raw in data.splitlines(keepends=True):
            if not raw.endswith(b"\n"):
                break  # a line still being written
            self._offset += len(raw)
            for entry in _entries(raw):
                if entry.get("logger") != "accelops.schedule":
                    continue
                text = str(entry.get("message", ""))
                if not text.startswith(_SUMMARY):
                    self._lines.append(text)
                    continue
                decisions = {m[1]: m[2] for m in map(_DECISION.match, self._lines) if m}
                self._lines = []
                ticks.append(Tick(_instant(entry["at"]), decisions,
                                  summary=text[len(_SUMMARY):]))
        return ticks

    def _pull(self, at: dt.datetime, count: int, deadline: float) -> list[dict[str, Any]]:
        """The ``count`` audit rows of the tick at ``at``."""
        def mine() -> list[dict[str, Any]]:
            return [row for row in self._rows if _instant(row["at"]) == at]

        while len(mine()) < count:
            if time.monotonic() > deadline:
                raise WatchError(f"the tick at {at.isoformat()} reported {count} audit "
                                 f"row(s); {len(mine())} arrived on {self._topic}")
            response = self._subscriber.pull(
                request={"subscription": self._path, "max_messages": 50}, timeout=5)
            if not response.received_messages:
                continue
            self._subscriber.acknowledge(request={"subscription": self._path, "ack_ids": [
                m.ack_id for m in response.received_messages]})
            for received in response.received_messages:
                if received.message.attributes.get("kind") == POOL_ACTION_KIND:
                    rows = json.loads(received.message.data)
                    self._rows.extend(rows)
                    self.records.extend(rows)
        taken = mine()
        self._rows = [row for row in self._rows if row not in taken]
        return taken

    def tick_at(self, since: dt.datetime, timeout: float = 30.0) -> Tick:
        """The first tick pool_schedule finishes for an instant at or after ``since``
        (earlier ones are passed over), with its audit rows. Raises WatchError after
        ``timeout`` real seconds."""
        deadline = time.monotonic() + timeout
        while True:
            self._ticks.extend(self._read())
            while self._ticks:
                tick = self._ticks.pop(0)
                if tick.at >= since:
                    audits = _AUDITS.search(tick.summary)
                    rows = self._pull(tick.at, int(audits[1]) if audits else 0, deadline)
                    return Tick(tick.at, tick.decisions, rows, tick.summary)
            if time.monotonic() > deadline:
                raise WatchError(f"no pool_schedule tick for {since.isoformat()} or later "
                                 f"within {timeout:.0f}s (see {self._log})")
            time.sleep(0.05)
