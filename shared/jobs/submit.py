"""Submitting a job request: decide (pure), then act (Kubernetes, Pub/Sub).

``plan_submission`` turns a Pub/Sub message into the JobSet to create, or raises
PermanentError saying which field broke which rule. ``submit_message`` carries the
plan out idempotently:

* the JobSet name derives from (name, request id), and the request id defaults to
  the message id, so a redelivery finds the JobSet it created the first time;
* an existing JobSet with the same request hash is a duplicate (acknowledged, not
  touched); one with another hash means the request id was reused for a different
  request, which is refused rather than silently rewriting a queued job;
* a refused request is published, bytes unchanged, to the rejections topic with
  the reason as attributes *before* the event is acknowledged; if that publish
  fails the event is retried, so no refusal goes unrecorded;
* a broken configuration or an unreachable cluster is transient: the message is
  retried (and dead-lettered by Pub/Sub after its maximum attempts), never refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from shared.config import AccelopsConfig, Settings, load_config_or_retry
from shared.errors import (
    ConflictError,
    NotFoundError,
    PermanentError,
    TransientError,
)
from shared.events import PubSubMessage
from shared.jobs.policy import check_policy
from shared.jobs.render import (
    ANNOTATION_REQUEST_HASH,
    ANNOTATION_REQUEST_ID,
    ANNOTATION_TPU_TYPE,
    LABEL_QUEUE,
    render_jobset,
)
from shared.jobs.request import parse_job_request
from shared.log import get_logger

__all__ = ["FIELD_MANAGER", "SubmitOutcome", "plan_submission", "submit_message"]

log = get_logger("accelops.submit")

FIELD_MANAGER = "accelops-submit"


@dataclass(frozen=True, slots=True)
class SubmitOutcome:
    """What happened to one message."""

    status: Literal["created", "duplicate", "rejected"]
    name: str | None = None
    namespace: str | None = None
    reason: str | None = None


def plan_submission(message: PubSubMessage, config: AccelopsConfig) -> dict[str, Any]:
    """The JobSet a message asks for; PermanentError when it must be refused."""
    request = parse_job_request(message.json())
    admission = check_policy(request, config)
    return render_jobset(admission, request.request_id or message.message_id)


def submit_message(message: PubSubMessage, settings: Settings | None = None) -> SubmitOutcome:
    """Handle one job-request message.

    Returns the outcome (the event may be acknowledged). Raises TransientError when
    the event must be retried: configuration unusable, Kubernetes or Pub/Sub
    unavailable.
    """
    settings = settings or Settings.from_env()
    config = load_config_or_retry(settings)
    try:
        jobset = plan_submission(message, config)
    except PermanentError as exc:
        return reject(message, exc, settings, config)
    try:
        outcome = _apply(jobset, settings)
    except PermanentError as exc:
        if isinstance(exc, (NotFoundError, ConflictError)):
            # A missing namespace or CRD, or a field owned by someone else, is the
            # cluster's state, not the request's: retry until it is fixed.
            raise TransientError(f"cannot apply JobSet: {exc.message}") from exc
        return reject(message, exc, settings, config)
    if outcome.status == "created" and config.slices.enabled and settings.project:
        from shared.slices.notify import request_reconcile

        request_reconcile(settings.project, config.topics.slices_reconcile, "jobset-applied",
                          f"{outcome.namespace}/{outcome.name}")
    return outcome


def _apply(jobset: dict[str, Any], settings: Settings) -> SubmitOutcome:
    from shared.kube import JOBSETS, get_client

    meta = jobset["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    ours = meta["annotations"][ANNOTATION_REQUEST_HASH]
    kube = get_client(settings)
    existing = kube.find(JOBSETS, name, namespace)
    if existing is not None:
        theirs = (existing.get("metadata", {}).get("annotations") or {}).get(
            ANNOTATION_REQUEST_HASH)
        if theirs != ours:
            raise PermanentError(
                f"request id {meta['annotations'][ANNOTATION_REQUEST_ID]!r} was already "
                f"used for a different request (JobSet {namespace}/{name})",
                field="request_id", rule="must be unique per distinct request",
            )
        log.info("duplicate job request: JobSet already exists", jobset=name,
                 namespace=namespace)
        return SubmitOutcome("duplicate", name, namespace)
    kube.apply(JOBSETS, jobset, field_manager=FIELD_MANAGER)
    spec = jobset["spec"]["replicatedJobs"][0]
    log.info("JobSet applied", jobset=name, namespace=namespace,
             queue=meta["labels"][LABEL_QUEUE],
             tpu_type=meta["annotations"][ANNOTATION_TPU_TYPE],
             slices=spec["replicas"], vms_per_slice=spec["template"]["spec"]["parallelism"])
    return SubmitOutcome("created", name, namespace)


def reject(message: PubSubMessage, error: PermanentError, settings: Settings,
           config: AccelopsConfig) -> SubmitOutcome:
    """Record a refused message on the rejections topic, then let it be acknowledged."""
    from shared import pubsub

    log.error(f"job request rejected: {error.message}", message_id=message.message_id,
              **error.as_fields())
    attributes = {
        **message.attributes,
        "rejected_by": "submit_job",
        "rejection_reason": error.message,
        "rejection_field": error.field or "",
        "rejection_rule": error.rule or "",
        "source_message_id": message.message_id,
    }
    try:
        settings.require("project")
        assert settings.project is not None
        pubsub.publish(settings.project, config.topics.rejections, message.data, attributes)
    except (PermanentError, TransientError) as exc:
        raise TransientError(
            f"could not record the rejection of message {message.message_id}: {exc.message}"
        ) from exc
    return SubmitOutcome("rejected", reason=error.message)
