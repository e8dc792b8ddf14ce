"""The lifecycle records ``submit_job`` publishes, and what a JobSet says about its job (pure).

``submit_job`` observes two transitions (:mod:`shared.metrics.job_event`): a request
that became a JobSet is ``submitted``; a refused one is ``rejected``. Both are built
here from what the handler already holds, so the handler only publishes them.

``submitted`` is dated by the JobSet's ``creationTimestamp``, the instant the cluster
recorded the job, on the same clock as every later transition of it (Kueue's
admission, the pods' start, the JobSet's conditions): the queue wait is the
difference of two instants one clock wrote, which holds even where that clock is not
this machine's (the sandbox's simulated one). It is also the same on every delivery
of the request — a redelivered message, or the request published again under its id,
finds the same JobSet — so the record published again is the very same row. Only
when the cluster gave no timestamp does the message's publish time stand in (then
the handler's now).

``rejected`` is keyed by the request's own ``request_id`` when the refused message
still has a readable one (a JSON object whose ``request_id`` is a string the request
model accepts), else by the Pub/Sub message id, which is what the request id
defaults to: ``accelops jobs status ID`` finds the refusal under the id the user
knows. The team is kept when the message named one as a string. Texts are made
storable (lone surrogates replaced, clipped) since a refusal must always be
recordable, whatever the request held.

:func:`job_facts` reads the attributes every event of a job carries from the JobSet
accelops rendered; ``reconcile_slices`` uses it too, so both functions name a job's
team, shape and size alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from shared.config import TeamPolicy
from shared.errors import PermanentError
from shared.jobspec.labels import ANNOTATION_REQUEST_ID, ANNOTATION_TPU_TYPE, LABEL_TEAM
from shared.jobspec.request import REQUEST_LIMITS, JobRequest
from shared.jobspec.tpu import lookup
from shared.metrics.job_event import JobEventRecord, job_event_id
from shared.metrics.record import parse_instant
from shared.names import dns_label, short_hash
from shared.payload import decode
from shared.safetext import clean

__all__ = ["JobFacts", "job_facts", "record_id", "rejected_event", "submitted_event",
           "team_of"]

# Bounds of the record's text fields (shared.metrics.job_event): Short and reason.
SHORT_CHARS = 256
REASON_CHARS = 1024


def _rule_of(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    """A validator of one field of ``model``, with the field's constraints."""
    field = model.model_fields[name]
    rule: Any = Annotated[(field.annotation, *field.metadata)] if field.metadata else (
        field.annotation)
    return TypeAdapter(rule)


# The request model's own rule for request ids, so a rejected request is keyed by
# its id exactly when submit_job would have used that id; and the record's rule for
# the ids it is keyed by.
_REQUEST_ID = _rule_of(JobRequest, "request_id")
_RECORD_ID = _rule_of(JobEventRecord, "request_id")


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What every lifecycle record of one job carries, read from its JobSet."""

    request_id: str
    jobset: str  # namespace/name
    team: str | None
    tpu_type: str | None
    slices: int
    chips_per_slice: int | None

    def record(self, event: str, at: datetime, *, slice_index: int | None = None,
               pool: str | None = None, **details: Any) -> JobEventRecord:
        """The record of ``event`` of this job (``details``: outcome, reason)."""
        return JobEventRecord(
            event_id=job_event_id(self.request_id, event, slice_index), event=event,  # type: ignore[arg-type]
            at=at, request_id=self.request_id, team=self.team, jobset=self.jobset,
            tpu_type=self.tpu_type, slices=self.slices, chips_per_slice=self.chips_per_slice,
            slice_index=slice_index, pool=pool, **details)


def team_of(labels: Mapping[str, str], namespace: str,
            teams: Mapping[str, TeamPolicy]) -> str | None:
    """The configured team a JobSet was made for.

    The JobSet carries the team as a label value (made label-safe); the team is the
    configured one whose name renders to it, preferring one whose namespace holds the
    JobSet, so every event names the team exactly as its request and the
    configuration do. A label matching no configured team is returned as it is.
    """
    label = labels.get(LABEL_TEAM)
    if not label:
        return None
    named = sorted(name for name in teams if (dns_label(name) or "team") == label)
    here = [name for name in named if teams[name].namespace == namespace]
    return (here or named or [label])[0]


def job_facts(jobset: Mapping[str, Any], teams: Mapping[str, TeamPolicy]) -> JobFacts | None:
    """The facts of a JobSet accelops rendered; None for one without accelops'
    request-id annotation (nothing accelops submitted, so no lifecycle to record)."""
    meta = jobset.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    request_id = annotations.get(ANNOTATION_REQUEST_ID)
    if not isinstance(request_id, str) or not request_id:
        return None
    tpu_type, chips = annotations.get(ANNOTATION_TPU_TYPE), None
    if isinstance(tpu_type, str) and tpu_type:
        try:
            chips = lookup(tpu_type).chips
        except PermanentError:
            chips = None
    else:
        tpu_type = None
    replicated = ((jobset.get("spec") or {}).get("replicatedJobs") or [{}])[0]
    replicas = replicated.get("replicas", 1)
    namespace = str(meta.get("namespace", ""))
    return JobFacts(
        request_id=request_id, jobset=f"{namespace}/{meta.get('name', '')}",
        team=team_of(meta.get("labels") or {}, namespace, teams),
        tpu_type=tpu_type, slices=replicas if isinstance(replicas, int) else 1,
        chips_per_slice=chips)


def _instant(value: Any) -> datetime | None:
    try:
        return parse_instant(value) if value else None
    except ValueError:
        return None


def submitted_event(jobset: Mapping[str, Any], teams: Mapping[str, TeamPolicy], *,
                    publish_time: str | None, now: datetime) -> JobEventRecord:
    """The ``submitted`` record of the JobSet created (or found) for a request; see the
    module docstring for its instant."""
    facts = job_facts(jobset, teams)
    assert facts is not None, "submit_job renders every JobSet with its request id"
    created = (jobset.get("metadata") or {}).get("creationTimestamp")
    at = _instant(created) or _instant(publish_time) or now
    return facts.record("submitted", at)


def record_id(value: str) -> str:
    """``value`` as a record's request id: itself when the record accepts it (Pub/Sub
    message ids are decimal strings), else a digest of it — a sender that is not
    Pub/Sub may put any printable text in a message id."""
    try:
        return str(_RECORD_ID.validate_python(value))
    except ValidationError:
        return f"message-{short_hash(value, length=20)}"


def _raw_object(data: bytes) -> dict[str, Any] | None:
    try:
        raw = decode(data, REQUEST_LIMITS)
    except PermanentError:
        return None
    return raw if isinstance(raw, dict) else None


def _text(value: str | None, limit: int) -> str | None:
    return None if value is None else clean(value, limit).text


def rejected_event(data: bytes, message_id: str, error: PermanentError, *,
                   publish_time: str | None, now: datetime) -> JobEventRecord:
    """The ``rejected`` record of a refused request message; see the module docstring."""
    raw = _raw_object(data) or {}
    request_id: str | None = None
    if isinstance(raw.get("request_id"), str):
        try:
            request_id = _REQUEST_ID.validate_python(raw["request_id"]) or None
        except ValidationError:
            request_id = None
    key = request_id or record_id(message_id)
    team = raw.get("team")
    return JobEventRecord(
        event_id=job_event_id(key, "rejected"), event="rejected",
        at=_instant(publish_time) or now, request_id=key,
        team=_text(team, SHORT_CHARS) if isinstance(team, str) else None,
        reason=_text(error.message, REASON_CHARS), field=_text(error.field, SHORT_CHARS),
        rule=_text(error.rule, SHORT_CHARS))
