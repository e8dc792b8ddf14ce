"""The lifecycle transitions one reconcile_slices run observed (pure: no I/O, no clock).

``reconcile_slices`` sees most of a job's life: Kueue admitting it, each slice's node
pool requested and ready (the GKE operations it starts and follows), every pod
running, the JobSet finishing or being deleted first (cancelled), and each slice's
pool deleted (what it reads of the cluster: :mod:`shared.slices.lifecycle`).
:func:`derive_events`
turns one run's view of these into :class:`~shared.metrics.job_event.JobEventRecord`
s, each transition once:

* what was reported is remembered per JobSet in the slice record, which every run
  reads and writes under its lock (``reported``: ``admitted``, ``slice_ready:1``, ...);
  a transition already in it is never derived again, so the views get one row per
  transition however many runs see it (and a republished one has the same key);
* the caller publishes the records before it saves the memory marking them
  reported: a failed publish leaves them unreported, and the next run derives them
  again, under the same keys;
* a transition is dated by the instant the cluster or GKE recorded for it — the
  condition's ``lastTransitionTime``, the operation's start and end time, the
  containers' ``startedAt`` — and by the run's ``now`` only where none exists (a
  JobSet first seen gone; a pool seen ready or gone whose operation was not followed,
  e.g. because the run that saw it end could not publish);
* a JobSet's entry is dropped once it is fully reported — finished, and every slice
  it requested deleted — and gone; one fully reported but still in the cluster is
  kept as a bare name (``done``) so it is not reported again, until it is gone.

``slice_deleted`` is reported only for a job that finished: a pool deleted while its
job lives on (evicted, or a pool in ERROR) is not the end of the slice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from shared.metrics.job_event import JobEventRecord
from shared.names import pool_name
from shared.slices.lifecycle import JobState
from shared.slices.model import PoolView
from shared.telemetry.events import JobFacts

__all__ = ["SliceOperation", "Telemetry", "derive_events"]


@dataclass(frozen=True, slots=True)
class SliceOperation:
    """A node-pool operation on one slice of a JobSet: in flight, or ended this run."""

    action: Literal["create", "delete"]
    jobset: str  # namespace/name
    slice_index: int
    pool: str
    started_at: float | None = None
    ended_at: float | None = None  # None while in flight
    failed: bool = False

    @property
    def in_flight(self) -> bool:
        return self.ended_at is None


@dataclass(frozen=True, slots=True)
class Telemetry:
    """A run's records, and the memory to save once they are published."""

    records: tuple[JobEventRecord, ...]
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    done: tuple[str, ...] = ()


# ------------------------------------------------------------------- deriving
def _facts(key: str, entry: Mapping[str, Any]) -> JobFacts:
    return JobFacts(request_id=str(entry["request_id"]), jobset=key,
                    team=entry.get("team"), tpu_type=entry.get("tpu_type"),
                    slices=int(entry.get("slices") or 0),
                    chips_per_slice=entry.get("chips_per_slice"))


def _entry(facts: JobFacts, reported: Iterable[str]) -> dict[str, Any]:
    return {"request_id": facts.request_id, "team": facts.team, "tpu_type": facts.tpu_type,
            "slices": facts.slices, "chips_per_slice": facts.chips_per_slice,
            "reported": sorted(reported)}


def _instant(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class _Job:
    """Deriving one job's unreported transitions."""

    def __init__(self, facts: JobFacts, reported: Iterable[str]) -> None:
        self.facts = facts
        self.reported = set(reported)
        self.records: list[JobEventRecord] = []

    def emit(self, event: str, at: float, *, slice_index: int | None = None,
             **details: Any) -> None:
        key = event if slice_index is None else f"{event}:{slice_index}"
        if key in self.reported:
            return
        self.reported.add(key)
        pool = None
        if slice_index is not None:
            namespace, _, name = self.facts.jobset.partition("/")
            pool = pool_name(namespace, name, slice_index)
        self.records.append(self.facts.record(event, _instant(at), slice_index=slice_index,
                                              pool=pool, **details))

    def has(self, key: str) -> bool:
        return key in self.reported

    @property
    def complete(self) -> bool:
        return self.has("finished") and all(
            self.has(f"slice_deleted:{i}") for i in range(self.facts.slices)
            if self.has(f"slice_requested:{i}"))


def _slices(job: _Job, pools: Mapping[int, PoolView], operations: Sequence[SliceOperation],
            now: float) -> None:
    """slice_requested and slice_ready of each slice."""
    for index in range(job.facts.slices):
        creates = [op for op in operations if op.action == "create" and op.slice_index == index]
        pool = pools.get(index)
        if creates:
            job.emit("slice_requested", min(op.started_at or now for op in creates),
                     slice_index=index)
        elif pool is not None:
            job.emit("slice_requested", now, slice_index=index)
        ready = [op for op in creates if not op.in_flight and not op.failed]
        if ready:
            job.emit("slice_ready", min(op.ended_at or now for op in ready), slice_index=index)
        elif (pool is not None and pool.status == "RUNNING"
              and not any(op.in_flight for op in creates)):
            job.emit("slice_ready", now, slice_index=index)


def _ending(job: _Job, state: JobState | None, pools: Mapping[int, PoolView],
            operations: Sequence[SliceOperation], now: float) -> None:
    """finished, then slice_deleted of each slice it requested."""
    if state is None:
        job.emit("finished", now, outcome="cancelled",
                 reason="the JobSet was deleted before it finished")
    elif state.outcome is not None:
        job.emit("finished", state.finished_at or now, outcome=state.outcome,
                 reason=state.reason)
    elif state.deleting_at is not None:
        job.emit("finished", state.deleting_at, outcome="cancelled",
                 reason="the JobSet was deleted before it finished")
    if not job.has("finished"):
        return
    for index in range(job.facts.slices):
        if not job.has(f"slice_requested:{index}"):
            continue
        mine = [op for op in operations if op.slice_index == index]
        deleted = [op for op in mine if op.action == "delete" and not op.in_flight
                   and not op.failed]
        if deleted:
            job.emit("slice_deleted", max(op.ended_at or now for op in deleted),
                     slice_index=index)
        elif index not in pools and not any(op.in_flight for op in mine):
            job.emit("slice_deleted", now, slice_index=index)


def derive_events(states: Mapping[str, JobState], pools: Iterable[PoolView],
                  operations: Iterable[SliceOperation],
                  memory: Mapping[str, Mapping[str, Any]], done: Iterable[str],
                  now: float) -> Telemetry:
    """The transitions to publish for this run and the memory to save after publishing.

    ``states``: the accelops JobSets in the cluster; ``pools``: the node pools;
    ``operations``: the slice operations in flight and those that ended in this run;
    ``memory`` / ``done``: what earlier runs reported (see the module docstring);
    ``now``: the cluster's clock.
    """
    pools_of: dict[str, dict[int, PoolView]] = {}
    for pool in pools:
        if pool.managed and pool.slice_index is not None:
            pools_of.setdefault(pool.jobset_key, {})[pool.slice_index] = pool
    operations_of: dict[str, list[SliceOperation]] = {}
    for op in operations:
        operations_of.setdefault(op.jobset, []).append(op)
    finished = set(done) & set(states)  # fully reported, still in the cluster
    records: list[JobEventRecord] = []
    jobs: dict[str, dict[str, Any]] = {}
    for key in sorted((set(states) - finished) | set(memory)):
        state, entry = states.get(key), memory.get(key)
        if state is None and entry is None:
            continue
        facts = state.facts if state is not None else _facts(key, entry or {})
        job = _Job(facts, (entry or {}).get("reported") or ())
        if state is not None and state.admitted_at is not None:
            job.emit("admitted", state.admitted_at)
        elif state is not None and state.unsuspended:
            job.emit("admitted", now)
        _slices(job, pools_of.get(key, {}), operations_of.get(key, []), now)
        if state is not None and state.running_at is not None:
            job.emit("running", state.running_at)
        _ending(job, state, pools_of.get(key, {}), operations_of.get(key, []), now)
        records.extend(job.records)
        if job.complete:
            if state is not None:
                finished.add(key)
            continue
        jobs[key] = _entry(facts, job.reported)
    return Telemetry(tuple(records), jobs, tuple(sorted(finished)))
