"""Telling people on the JobSet why its slices are not there yet.

A failed pool create (stockout, quota, a reservation GKE refuses) is otherwise only
in reconcile_slices' logs. The JobSet gets an annotation with GKE's message and the
next attempt time (``kubectl get jobset -o yaml``) and a Warning Event
(``kubectl describe jobset``). Both are best effort: the backoff itself lives in the
slice record, so a failed write here is logged and changes no decision.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

from shared.errors import AccelopsError, AlreadyExistsError
from shared.jobspec.labels import ANNOTATION_SLICE_FAILURE
from shared.kube import EVENTS, JOBSETS, KubeClient
from shared.log import get_logger
from shared.slices.model import SliceFailure

__all__ = ["EVENT_REASON", "clear_failure", "failure_annotation", "report_failure"]

log = get_logger("accelops.slices")

EVENT_REASON = "SliceCreateFailed"
COMPONENT = "accelops-reconcile-slices"


def _rfc3339(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def failure_annotation(failure: SliceFailure) -> str:
    """The annotation value: JSON with GKE's message and the next attempt time."""
    return json.dumps({"message": failure.reason, "pool": failure.pool,
                       "capacity": failure.capacity, "attempts": failure.attempts,
                       "nextAttempt": _rfc3339(failure.next_attempt)}, sort_keys=True)


def _event(namespace: str, name: str, failure: SliceFailure, now: float) -> dict[str, Any]:
    stamp = _rfc3339(now)
    return {
        "apiVersion": "v1", "kind": "Event",
        # One Event per attempt: a redelivered run finds it and creates no second one.
        "metadata": {"name": f"{name}.slice-failure-{failure.attempts}"[:253],
                     "namespace": namespace},
        "involvedObject": {"apiVersion": f"{JOBSETS.group}/{JOBSETS.version}",
                           "kind": "JobSet", "name": name, "namespace": namespace},
        "reason": EVENT_REASON, "type": "Warning",
        "message": (f"creating node pool {failure.pool} ({failure.capacity}) failed: "
                    f"{failure.reason}; attempt {failure.attempts}, next attempt at "
                    f"{_rfc3339(failure.next_attempt)}")[:1024],
        "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        "source": {"component": COMPONENT},
    }


def report_failure(kube: KubeClient, jobset: str, failure: SliceFailure, now: float) -> None:
    """Annotate the JobSet (``namespace/name``) and record a Warning Event on it."""
    namespace, _, name = jobset.partition("/")
    try:
        kube.merge_patch(JOBSETS, name, namespace, {"metadata": {"annotations": {
            ANNOTATION_SLICE_FAILURE: failure_annotation(failure)}}})
        with contextlib.suppress(AlreadyExistsError):  # this attempt's Event exists
            kube.create(EVENTS, _event(namespace, name, failure, now))
    except AccelopsError as exc:
        log.warning(f"could not report the slice failure on {jobset}: {exc.message}",
                    jobset=jobset)


def clear_failure(kube: KubeClient, jobset: str) -> None:
    """Remove the annotation once the JobSet's slices run (or it no longer wants them)."""
    namespace, _, name = jobset.partition("/")
    try:
        kube.merge_patch(JOBSETS, name, namespace,
                         {"metadata": {"annotations": {ANNOTATION_SLICE_FAILURE: None}}})
    except AccelopsError as exc:  # gone already, or not ours to write: nothing to show
        log.info(f"could not clear the slice failure on {jobset}: {exc.message}",
                 jobset=jobset)
