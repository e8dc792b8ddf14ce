"""The public shape of a job's status: what ``accelops jobs`` prints and the jobs API serves.

These models are the JSON contract (``model_dump(mode="json")``, and
``model_json_schema()`` for an OpenAPI document): times are RFC 3339 strings, absent
parts are ``null``. :class:`JobSummary` is one line of ``jobs list``; :class:`JobStatus`
is ``jobs status``: the same fields, the explanation a user reads, and the structured
parts it was written from. ``slices`` is the slice count in both; the per-slice detail
is ``slice_status``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "STATES",
    "FailureKind",
    "FinishedInfo",
    "JobState",
    "JobStatus",
    "JobSummary",
    "QueueInfo",
    "RejectionInfo",
    "SliceFailureInfo",
    "SliceInfo",
]

JobState = Literal["rejected", "queued", "provisioning", "running", "succeeded", "failed",
                   "cancelling"]
STATES: tuple[str, ...] = ("rejected", "queued", "provisioning", "running", "succeeded",
                           "failed", "cancelling")
FailureKind = Literal["stockout", "quota", "reservation", "other"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class QueueInfo(_Model):
    """Where a queued job waits in Kueue, and what it waits for."""

    cluster_queue: str | None = Field(description="the ClusterQueue its LocalQueue feeds")
    local_queue: str = Field(description="namespace/name of its LocalQueue")
    strategy: str | None = Field(None, description="BestEffortFIFO or StrictFIFO")
    flavor: str | None = Field(None, description="the ResourceFlavor its chips count against")
    chips_requested: int
    chips_available: int | None = Field(
        None, description="the flavor's quota not reserved by admitted workloads")
    chips_quota: int | None = Field(None, description="the flavor's nominal quota")
    ahead: list[str] = Field(default_factory=list, description=(
        "namespace/name of the pending Workloads Kueue considers before this one "
        "(priority, then creation time)"))
    admitted: list[str] = Field(default_factory=list, description=(
        "namespace/name of the admitted Workloads holding the flavor's quota"))
    message: str | None = Field(None, description="Kueue's condition message on the Workload")
    preempted: str | None = Field(None, description=(
        "Kueue's Preempted condition message while the job waits after being preempted"))


class SliceInfo(_Model):
    """One TPU slice: its node pool and its pods."""

    index: int
    pool: str | None = Field(description="the node pool made for it (None: not provisioned "
                                         "by accelops)")
    pool_status: str | None = Field(description="GKE's status of the pool; None: no pool yet")
    operation: str | None = Field(None, description="the GKE operation under way on the pool")
    pods_running: int
    pods_total: int
    restarts: int = Field(description="container restarts of its pods")


class SliceFailureInfo(_Model):
    """Why GKE could not create the job's slices, and when accelops tries again."""

    kind: FailureKind
    message: str = Field(description="GKE's message")
    pool: str
    capacity: str = Field(description="spot, on-demand or reservation/<name>")
    attempts: int
    next_attempt: datetime | None


class FinishedInfo(_Model):
    """How the job ended, from its JobSet's condition and its failed pod."""

    outcome: Literal["succeeded", "failed"]
    reason: str | None
    message: str | None
    at: datetime | None
    failed_pod: str | None = None
    exit_code: int | None = None
    termination_message: str | None = None


class RejectionInfo(_Model):
    """Why submit_job refused the request (nothing was created)."""

    reason: str
    field: str | None
    rule: str | None
    at: datetime | None


class JobSummary(_Model):
    """One job in a list."""

    request_id: str
    jobset: str | None = Field(description="namespace/name; None for a rejected request")
    team: str | None
    state: JobState
    tpu_type: str | None
    slices: int | None
    created_at: datetime | None
    summary: str = Field(description="one short line")


class JobStatus(JobSummary):
    """One job, explained."""

    explanation: list[str] = Field(description="what the state means and what to do, "
                                               "line by line")
    queue: QueueInfo | None = None
    slice_status: list[SliceInfo] = Field(default_factory=list)
    slice_failure: SliceFailureInfo | None = None
    finished: FinishedInfo | None = None
    rejection: RejectionInfo | None = None

    def summarized(self) -> JobSummary:
        return JobSummary.model_validate(self.model_dump(include=set(JobSummary.model_fields)))
