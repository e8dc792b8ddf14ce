"""One transition in a job's life, recorded once for the lifecycle views and budgets.

A job moves through ``submitted`` → ``admitted`` → ``slice_requested`` (per slice) →
``slice_ready`` (per slice) → ``running`` → ``finished`` → ``slice_deleted`` (per
slice), or ends at ``rejected``. Each transition is observed by the function that
sees it happen — ``submit_job`` (submitted, rejected) and ``reconcile_slices`` (the
rest) — and published on the metrics topic as a message with the attribute
``kind=job_event`` whose data is a JSON array of records (:func:`job_event_message`).
``ingest_metrics`` writes them to the ``job_events`` table; the views pair them into
queue wait, provisioning time, run time and chip-hours per team, TPU type and day.

The row key is the record's ``event_id`` (:func:`job_event_id`: the request id, the
event and, for per-slice events, the slice index), deterministic, so a transition
observed again by a later run, or a redelivered message, is one row in the views.

``at`` is when the transition happened as the cluster or GKE recorded it (a Workload's
Admitted condition, an operation's end time, a JobSet's Completed condition), not when
it was observed, wherever such a time exists.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, StringConstraints, model_validator

from shared.metrics.record import Count, Instant, Short
from shared.metrics.run import KIND_ATTRIBUTE

__all__ = ["EVENTS", "JOB_EVENT_KIND", "PER_SLICE", "EventKind", "JobEventRecord",
           "Outcome", "job_event_id", "job_event_message"]

JOB_EVENT_KIND = "job_event"

EventKind = Literal["submitted", "rejected", "admitted", "slice_requested", "slice_ready",
                    "running", "finished", "slice_deleted"]
EVENTS: tuple[str, ...] = get_args(EventKind)
# Events that happen once per slice of a job, keyed by the slice index as well.
PER_SLICE = frozenset({"slice_requested", "slice_ready", "slice_deleted"})
Outcome = Literal["succeeded", "failed", "cancelled"]

# Request ids are 1 to 128 characters of [A-Za-z0-9._:/-] (shared/jobspec/request.py); a
# rejected message without a readable one is keyed by its Pub/Sub message id.
_Id = Annotated[str, StringConstraints(min_length=1, max_length=256,
                                       pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")]
EventId = Annotated[str, StringConstraints(min_length=1, max_length=320,
                                           pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")]
_Text = Annotated[str, StringConstraints(max_length=1024)]


class JobEventRecord(BaseModel):
    """One transition of one job. Unknown fields are ignored (newer publishers)."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    event_id: EventId
    event: EventKind
    # When the transition happened (see the module docstring).
    at: Instant
    request_id: _Id
    # The team as the request named it (a rejected request's may be unknown or absent).
    team: Short | None = None
    # ``namespace/name`` of the JobSet; None for a rejected request.
    jobset: Short | None = None
    tpu_type: Short | None = None
    slices: Count | None = None
    # TPU chips of one slice; a job holds slices * chips_per_slice while it runs.
    chips_per_slice: Count | None = None
    # Per-slice events: which slice, and the node pool made for it.
    slice_index: Count | None = None
    pool: Short | None = None
    # finished: how it ended; rejected: the field and rule it broke.
    outcome: Outcome | None = None
    reason: _Text | None = None
    field: Short | None = None
    rule: Short | None = None

    @model_validator(mode="after")
    def _shape(self) -> JobEventRecord:
        if (self.event in PER_SLICE) != (self.slice_index is not None):
            raise ValueError(f"slice_index: a {self.event} event "
                             f"{'names' if self.event in PER_SLICE else 'has no'} slice")
        if (self.event == "finished") != (self.outcome is not None):
            raise ValueError(f"outcome: only a finished event has one (event {self.event})")
        if self.event_id != job_event_id(self.request_id, self.event, self.slice_index):
            raise ValueError("event_id: must be job_event_id(request_id, event, slice_index)")
        return self


def job_event_id(request_id: str, event: str, slice_index: int | None = None) -> str:
    """The deterministic row key: ``REQUEST_ID:EVENT`` or ``REQUEST_ID:EVENT:SLICE``."""
    key = f"{request_id}:{event}"
    return key if slice_index is None else f"{key}:{slice_index}"


def job_event_message(records: Iterable[JobEventRecord]) -> tuple[bytes, dict[str, str]]:
    """The data and attributes of the metrics-topic message carrying ``records``."""
    data = json.dumps([record.model_dump(mode="json") for record in records],
                      separators=(",", ":"), ensure_ascii=False).encode()
    return data, {KIND_ATTRIBUTE: JOB_EVENT_KIND}
