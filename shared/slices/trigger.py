"""The reconcile_slices core as a Pub/Sub handler.

Every message is only a trigger — a Cloud Scheduler tick, submit_job's note that
a JobSet was applied, or a Cloud Logging sink entry for a pod that failed
scheduling — and every run reconciles the whole cluster, so the content never
matters and duplicates are harmless. The attribute ``mode=cleanup-only`` (set on
an off-hours scheduler job) restricts the run to deletions.
"""

from __future__ import annotations

from shared.events import PubSubMessage
from shared.log import get_logger
from shared.slices.reconcile import ReconcileReport, reconcile

__all__ = ["on_message"]

log = get_logger("accelops.slices")


def on_message(message: PubSubMessage) -> ReconcileReport:
    cleanup_only = True if message.attributes.get("mode") == "cleanup-only" else None
    report = reconcile(cleanup_only=cleanup_only)
    log.info(f"reconcile: {report.summary()}", actions_due=len(report.plan.actions),
             waiting=list(report.plan.waiting), trigger=message.attributes.get("trigger"))
    return report
