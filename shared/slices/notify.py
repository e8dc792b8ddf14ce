"""Asking reconcile_slices to run soon, from another handler (best effort).

submit_job calls this after applying a JobSet so that, when Kueue admits it at
once, its slices are requested within seconds rather than at the next scheduler
tick. The publish runs on a background thread: the Pub/Sub client costs ~0.3 s
to import, which the submit path's cold start should not pay, and a lost trigger
only means waiting for the next tick.
"""

from __future__ import annotations

import threading

from shared import pubsub
from shared.errors import AccelopsError
from shared.log import get_logger

__all__ = ["request_reconcile"]

log = get_logger("accelops.slices")


def _publish(project: str, topic: str, reason: str, jobset: str) -> None:
    try:
        pubsub.publish(project, topic, b"{}", {"trigger": reason, "jobset": jobset})
    except AccelopsError as exc:
        log.warning(f"could not trigger reconcile_slices (the next tick will): {exc.message}",
                    jobset=jobset)


def request_reconcile(project: str, topic: str, reason: str, jobset: str) -> threading.Thread:
    """Publish a reconcile trigger in the background; returns the thread (tests join it)."""
    thread = threading.Thread(target=_publish, args=(project, topic, reason, jobset),
                              name="reconcile-trigger", daemon=True)
    thread.start()
    return thread
