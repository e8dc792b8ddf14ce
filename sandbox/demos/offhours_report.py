"""What the schedule scenario reports, computed from what it observed (pure).

Savings come from the audit rows alone, as anyone reading the pool_actions table
can compute them: a pool's accelerators times the hours from its remove row to the
restore row that follows. Readiness comes from GKE's operations: a restored pool
is ready when the last operation started on it since its restore began is done
(a resize back, then its autoscaling; or the create of a deleted slice).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.slices.observe import parse_time

__all__ = ["Saving", "flat_spec", "ready_at", "savings", "spec_differences"]


@dataclass(frozen=True, slots=True)
class Saving:
    """One off-hours period of one pool."""

    pool: str
    method: str  # resize | delete
    accelerator_type: str | None
    accelerators: int
    team: str | None
    removed: dt.datetime
    restored: dt.datetime | None  # None: still removed

    def hours(self, until: dt.datetime) -> float:
        return ((self.restored or until) - self.removed).total_seconds() / 3600

    def accelerator_hours(self, until: dt.datetime) -> float:
        return self.accelerators * self.hours(until)


def _at(record: Mapping[str, Any]) -> dt.datetime:
    return dt.datetime.fromisoformat(str(record["at"]))


def savings(records: Iterable[Mapping[str, Any]]) -> list[Saving]:
    """Each removal, from its remove row to the next restore row of the same pool.
    A row published again (a retried tick, same ``action_id``) counts once."""
    unique: dict[str, Mapping[str, Any]] = {}
    for record in records:
        unique.setdefault(str(record["action_id"]), record)
    rows = sorted(unique.values(), key=_at)
    found = []
    for index, row in enumerate(rows):
        if row["action"] != "remove":
            continue
        key = (row["project"], row["location"], row["cluster"], row["pool"])
        restore = next((r for r in rows[index + 1:] if r["action"] == "restore"
                        and (r["project"], r["location"], r["cluster"], r["pool"]) == key),
                       None)
        found.append(Saving(str(row["pool"]), str(row["method"]), row.get("accelerator_type"),
                            int(row.get("accelerator_count") or 0), row.get("team"),
                            _at(row), _at(restore) if restore is not None else None))
    return found


def _pool_of(operation: Mapping[str, Any]) -> str | None:
    target = str(operation.get("targetLink", ""))
    return target.rsplit("/nodePools/", 1)[1] if "/nodePools/" in target else None


def ready_at(operations: Iterable[Mapping[str, Any]], pool: str,
             since: dt.datetime) -> dt.datetime | None:
    """When the last operation started on ``pool`` at or after ``since`` ended; None
    while one still runs, or when none started."""
    ends = []
    for operation in operations:
        start = parse_time(operation.get("startTime"))
        if _pool_of(operation) != pool or start is None or start < since.timestamp():
            continue
        end = parse_time(operation.get("endTime"))
        if end is None or operation.get("status") != "DONE":
            return None
        ends.append(end)
    return dt.datetime.fromtimestamp(max(ends), dt.UTC) if ends else None


def flat_spec(spec: Mapping[str, Any], ignore: Iterable[str] = ()) -> dict[str, Any]:
    """A NodePool's fields by dotted path, the top-level fields in ``ignore`` aside."""
    skipped = set(ignore)
    return _flat({k: v for k, v in spec.items() if k not in skipped})


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def spec_differences(before: Mapping[str, Any], after: Mapping[str, Any],
                     ignore: Iterable[str] = ()) -> list[str]:
    """Fields (dotted paths) whose values differ between two NodePools, the top-level
    fields in ``ignore`` aside."""
    old, new = flat_spec(before, ignore), flat_spec(after, ignore)
    return sorted(f"{path}: {old.get(path)!r} -> {new.get(path)!r}"
                  for path in old.keys() | new.keys() if old.get(path) != new.get(path))
