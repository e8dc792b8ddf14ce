"""What reconcile_slices remembers between runs, kept in one ConfigMap.

Runs are short-lived and may overlap (a scheduler tick and a submit trigger at
once), so the record is also the lock: before starting a GKE operation a run
writes its intents with the ConfigMap's resourceVersion; a concurrent run's write
then fails with 409 and that run stops without acting. The record holds the
operations in flight (observed on later runs, never waited for), the cluster-wide
backoff after GKE said "busy" or "too many requests", each JobSet's streak of
failed pool creates with its next attempt time, when pools were first seen idle,
a short history of started operations, and which lifecycle transitions of each
job were already published (:mod:`shared.slices.events`).

The per-JobSet failure streaks live here rather than only on the JobSets: this
record is the one object reconcile_slices already reads and writes (under its
lock) every run, so the planner gets them with no extra call, and a user editing
or re-applying a JobSet cannot reset its backoff. The JobSet carries a copy (an
annotation and an Event) for people to read.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from shared import configmaps
from shared.errors import ConflictError
from shared.kube import KubeClient
from shared.log import get_logger
from shared.slices.model import SliceFailure

__all__ = ["RECORD_NAME", "SliceRecord", "load_record", "save_if_changed",
           "save_record"]

log = get_logger("accelops.slices")

RECORD_NAME = "accelops-slices"
HISTORY_LENGTH = 50


@dataclass
class SliceRecord:
    # Each: action, pool, jobset, reason, capacity, started, operation (None until
    # GKE accepted it).
    operations: list[dict[str, Any]] = field(default_factory=list)
    backoff_until: float = 0.0
    backoff_attempts: int = 0
    backoff_reason: str = ""
    idle_since: dict[str, float] = field(default_factory=dict)
    failures: dict[str, dict[str, Any]] = field(default_factory=dict)  # jobset key -> streak
    history: list[dict[str, Any]] = field(default_factory=list)
    # Lifecycle telemetry: per JobSet key, its facts and the transitions published;
    # and the JobSets fully reported that are still in the cluster.
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    done: list[str] = field(default_factory=list)
    # Slice operations that ended, until the transitions they mark are published
    # (shared.slices.events.SliceOperation fields).
    ended: list[dict[str, Any]] = field(default_factory=list)
    # When (this machine's clock) a run took the record to publish transitions;
    # 0 once it saved what it published.
    reporting: float = 0.0
    resource_version: str | None = None  # of the ConfigMap it was read from
    stored: dict[str, str] | None = None  # the data as last read or written

    @property
    def changed(self) -> bool:
        return self.to_data() != self.stored

    def failure_views(self) -> dict[str, SliceFailure]:
        return {key: SliceFailure.from_dict(raw) for key, raw in self.failures.items()}

    def set_failures(self, failures: dict[str, SliceFailure]) -> None:
        self.failures = {key: dict(f.as_dict()) for key, f in failures.items()}

    def remember(self, entry: dict[str, Any]) -> None:
        self.history = [*self.history, entry][-HISTORY_LENGTH:]

    def to_data(self) -> dict[str, str]:
        body = asdict(self)
        body.pop("resource_version")
        body.pop("stored")
        return {"state.json": json.dumps(body, sort_keys=True)}


def load_record(kube: KubeClient, namespace: str) -> SliceRecord:
    """The record, or an empty one when none was written yet."""
    stored = configmaps.find(kube, RECORD_NAME, namespace)
    if stored is None:
        return SliceRecord()
    raw = json.loads(stored.data.get("state.json") or "{}")
    if raw.get("inflight"):  # written by a version that ran one operation at a time
        raw.setdefault("operations", [raw["inflight"]])
    known = {k: v for k, v in raw.items() if k in SliceRecord.__dataclass_fields__}
    record = SliceRecord(**known)
    record.resource_version = stored.version
    record.stored = record.to_data()
    return record


def save_record(kube: KubeClient, namespace: str, record: SliceRecord) -> None:
    """Write the record; ConflictError when someone wrote it since it was read."""
    data = record.to_data()
    saved = configmaps.write(kube, RECORD_NAME, namespace, data,
                             version=record.resource_version,
                             labels={"app.kubernetes.io/managed-by": "accelops"})
    record.resource_version = saved.version
    record.stored = data


def save_if_changed(kube: KubeClient, namespace: str, record: SliceRecord) -> None:
    """Write the record if this run changed it (most runs change nothing); a concurrent
    run's write since it was read wins (it holds the fresher view)."""
    if not record.changed:
        return
    try:
        save_record(kube, namespace, record)
    except ConflictError:
        log.info("slice record changed by a concurrent run; not overwriting it")
