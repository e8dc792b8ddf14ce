"""Submitting a job request: decide (pure), then act (Kubernetes, Pub/Sub).

``plan_submission`` turns a Pub/Sub message into the JobSet to create, or raises
PermanentError saying which field broke which rule. ``on_message`` carries the
plan out idempotently, with the request id as the idempotency key of the *whole*
request:

* the JobSet name derives from (name, request id), and the request id defaults to
  the message id, so a redelivery finds the JobSet it created the first time;
* every JobSet carries a label derived from its request id, so one list call finds
  whatever was made for that id in any namespace, under any name. :func:`judge`
  decides from that list: the earliest-created JobSet owns the id; if it is the one
  this request would make (same name, namespace and request hash), the message is a
  duplicate (acknowledged, nothing touched); otherwise the id was reused for a
  different request, which is refused naming the id and the JobSet that holds it;
* when nothing holds the id yet, the JobSet is created under a Lease named after the
  request id (``shared.lease``), and the list is read again under it: two deliveries
  of different requests racing under one id cannot both find nothing, so the second
  is refused (or, with the same request, is a duplicate);
* a refused request is recorded on the rejections topic before the event is
  acknowledged (``shared.jobs.rejection``);
* the job's lifecycle starts here: a created (or found) JobSet is published as
  ``submitted`` and a refused request as ``rejected`` on the metrics topic
  (``shared.telemetry.events``, ``shared.telemetry.emit``), awaited before the event is
  acknowledged; a redelivery publishes the same record again, under the same key;
* a broken configuration or an unreachable cluster is transient: the message is
  retried (and dead-lettered by Pub/Sub after its maximum attempts), never refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from shared.config import AccelopsConfig, Settings, load_config_or_retry
from shared.errors import PermanentError
from shared.events import PubSubMessage
from shared.jobs.budget.gate import enforce_budget
from shared.jobs.rejection import publish_rejection
from shared.jobspec.labels import (
    ANNOTATION_REQUEST_HASH,
    ANNOTATION_REQUEST_ID,
    ANNOTATION_TPU_TYPE,
    LABEL_QUEUE,
    LABEL_REQUEST_KEY,
)
from shared.jobspec.policy import check_policy
from shared.jobspec.render import render_jobset
from shared.jobspec.request import read_job_request
from shared.kube import JOBSETS, get_client
from shared.lease import hold
from shared.log import get_logger
from shared.slices.notify import request_reconcile
from shared.telemetry.emit import publish_job_events
from shared.telemetry.events import rejected_event, submitted_event

if TYPE_CHECKING:
    from shared.kube import KubeClient

__all__ = ["SubmitOutcome", "Verdict", "judge", "on_message", "plan_submission"]

log = get_logger("accelops.submit")

# Longer than submit_job can run (its timeout): a holder is presumed dead after it.
REQUEST_LOCK_SECONDS = 120
# How long a delivery waits for another one holding its request id (which takes
# milliseconds) before failing so that Pub/Sub retries it.
REQUEST_LOCK_WAIT_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class SubmitOutcome:
    """What happened to one message."""

    status: Literal["created", "duplicate", "rejected"]
    name: str | None = None
    namespace: str | None = None
    reason: str | None = None
    # The JobSet as created, or as found by a duplicate (its creationTimestamp).
    jobset: dict[str, Any] | None = None


def plan_submission(message: PubSubMessage, config: AccelopsConfig) -> dict[str, Any]:
    """The JobSet a message asks for; PermanentError when it must be refused."""
    return _plan(message, config)[1]


def _plan(message: PubSubMessage, config: AccelopsConfig) -> tuple[str, dict[str, Any]]:
    request = read_job_request(message.data)
    admission = check_policy(request, config)
    return request.team, render_jobset(admission, request.request_id or message.message_id)


def on_message(message: PubSubMessage, settings: Settings | None = None) -> SubmitOutcome:
    """Handle one job-request message.

    Returns the outcome (the event may be acknowledged). Raises TransientError when
    the event must be retried: configuration unusable, Kubernetes or Pub/Sub
    unavailable, the team's namespace or the JobSet CRD missing.
    """
    settings = settings or Settings.from_env()
    config = load_config_or_retry(settings)
    try:
        team, jobset = _plan(message, config)
        outcome = _create(jobset, settings, config.slices.state_namespace,
                          holder=message.message_id,
                          admit=lambda kube: enforce_budget(kube, config, team))
    except PermanentError as exc:
        publish_job_events(settings, config, [rejected_event(
            message.data, message.message_id, exc, publish_time=message.publish_time,
            now=datetime.now(UTC))])
        publish_rejection(message, exc, settings, config)
        return SubmitOutcome("rejected", reason=exc.message)
    publish_job_events(settings, config, [submitted_event(
        outcome.jobset or jobset, config.teams, publish_time=message.publish_time,
        now=datetime.now(UTC))])
    if outcome.status == "created" and config.slices.enabled and settings.project:
        request_reconcile(settings.project, config.topics.slices_reconcile, "jobset-applied",
                          f"{outcome.namespace}/{outcome.name}")
    return outcome


# --------------------------------------------------------------------------- decide
def _ref(jobset: dict[str, Any]) -> tuple[str, str]:
    meta = jobset.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def _annotation(jobset: dict[str, Any], key: str) -> str | None:
    value = ((jobset.get("metadata") or {}).get("annotations") or {}).get(key)
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class Verdict:
    """Who holds a request id. ``owner`` is None when nothing does yet; ``ours`` says
    whether the owner is the JobSet this request makes."""

    owner: dict[str, Any] | None
    ours: bool

    def refusal(self, request_id: str) -> PermanentError:
        assert self.owner is not None
        namespace, name = _ref(self.owner)
        return PermanentError(
            f"request id {request_id!r} was already used for a different request "
            f"(JobSet {namespace}/{name})",
            field="request_id", rule="must be unique per distinct request",
        )


def judge(jobset: dict[str, Any], found: list[dict[str, Any]]) -> Verdict:
    """Whether the request of ``jobset`` is new, a duplicate, or reuses a request id.

    ``found`` are the JobSets listed by the request-key label. Pure: the owner is the
    earliest created of those carrying the same request id (then by namespace and
    name, so every observer picks the same one).
    """
    request_id = _annotation(jobset, ANNOTATION_REQUEST_ID)
    same_id = [j for j in found if _annotation(j, ANNOTATION_REQUEST_ID) == request_id]
    if not same_id:
        return Verdict(owner=None, ours=False)
    owner = min(same_id, key=lambda j: (
        str((j.get("metadata") or {}).get("creationTimestamp", "")), *_ref(j)))
    ours = (_ref(owner) == _ref(jobset) and _annotation(owner, ANNOTATION_REQUEST_HASH)
            == _annotation(jobset, ANNOTATION_REQUEST_HASH))
    return Verdict(owner=owner, ours=ours)


# ----------------------------------------------------------------------------- act
def _create(jobset: dict[str, Any], settings: Settings, lock_namespace: str, *,
            holder: str, admit: Callable[[KubeClient], None] = lambda kube: None,
            ) -> SubmitOutcome:
    meta = jobset["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    key = meta["labels"][LABEL_REQUEST_KEY]
    request_id = meta["annotations"][ANNOTATION_REQUEST_ID]
    kube = get_client(settings)

    def decided() -> SubmitOutcome | None:
        """Duplicate (an outcome), refused (raises), or nothing holds the id (None)."""
        verdict = judge(jobset, kube.list(JOBSETS, label_selector=f"{LABEL_REQUEST_KEY}={key}"))
        if verdict.owner is None:
            return None
        if not verdict.ours:
            raise verdict.refusal(request_id)
        log.info("duplicate job request: JobSet already exists", jobset=name,
                 namespace=namespace)
        return SubmitOutcome("duplicate", name, namespace, jobset=verdict.owner)

    if (outcome := decided()) is not None:
        return outcome
    # Only a request that would start a job is held to its team's budget: a duplicate
    # of one already created is acknowledged as such, whatever the team used since.
    admit(kube)
    with hold(kube, lock_namespace, f"accelops-request-{key}", holder=holder,
              seconds=REQUEST_LOCK_SECONDS, wait=REQUEST_LOCK_WAIT_SECONDS):
        # Another delivery may have created it between the first look and the lock.
        if (outcome := decided()) is not None:
            return outcome
        created = kube.create(JOBSETS, jobset)
    spec = jobset["spec"]["replicatedJobs"][0]
    log.info("JobSet created", jobset=name, namespace=namespace,
             queue=meta["labels"][LABEL_QUEUE],
             tpu_type=meta["annotations"][ANNOTATION_TPU_TYPE],
             slices=spec["replicas"], vms_per_slice=spec["template"]["spec"]["parallelism"])
    return SubmitOutcome("created", name, namespace, jobset=created or None)
