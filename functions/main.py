"""Cloud Run function entry points.

Each entry point is thin and has the same shape: it hands its CloudEvent to the
``on_message(message)`` of its core module in ``shared`` (``on_object(event)`` for the
storage-triggered ``deploy_model``) through ``shared.handler``, and returns (ack) or
raises (retry). Imports happen inside the entry points so a function instance loads
only what its own event needs: the cold start of a Cloud Run function is dominated by
import time, and the Kubernetes and Google clients cost hundreds of milliseconds each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import functions_framework

from shared.entry_errors import install

if TYPE_CHECKING:
    from cloudevents.http import CloudEvent

__all__ = ["deploy_model", "ingest_metrics", "pool_schedule", "reconcile_models",
           "reconcile_slices", "submit_job", "team_usage"]

# A request that cannot be read as an event answers 400 with its reason, not 500.
install(functions_framework.errorhandler, functions_framework.crash_handler, __name__)


@functions_framework.cloud_event
def submit_job(cloud_event: CloudEvent) -> None:
    """A job request published to Pub/Sub → a Kueue-queued JobSet."""
    from shared.handler import handle_pubsub
    from shared.jobs.submit import on_message

    handle_pubsub(cloud_event, on_message, "submit_job")


@functions_framework.cloud_event
def reconcile_slices(cloud_event: CloudEvent) -> None:
    """A scheduler tick, a submitted JobSet or a pod that failed scheduling → one
    reconcile of TPU node pools (create for admitted JobSets, delete when done)."""
    from shared.handler import handle_pubsub
    from shared.slices.trigger import on_message

    handle_pubsub(cloud_event, on_message, "reconcile_slices")


@functions_framework.cloud_event
def ingest_metrics(cloud_event: CloudEvent) -> None:
    """Load-test records published by the load generator → BigQuery rows; bad records
    → the rejections table. Returns only once BigQuery has accepted both."""
    from shared.handler import handle_pubsub
    from shared.metrics.ingest import on_message

    handle_pubsub(cloud_event, on_message, "ingest_metrics")


@functions_framework.cloud_event
def deploy_model(cloud_event: CloudEvent) -> None:
    """A finalized object in the models bucket (an Eventarc storage event or a Cloud
    Storage Pub/Sub notification) → a rollout when it is a version's manifest."""
    from shared.handler import handle_event
    from shared.serving.deploy import on_object
    from shared.serving.events import log_fields, parse_storage_event

    handle_event(cloud_event, parse_storage_event, on_object, "deploy_model", log_fields)


@functions_framework.cloud_event
def reconcile_models(cloud_event: CloudEvent) -> None:
    """A scheduler tick or deploy_model's nudge → every model rollout observed and
    finished, or rolled back."""
    from shared.handler import handle_pubsub
    from shared.serving.reconcile import on_message

    handle_pubsub(cloud_event, on_message, "reconcile_models")


@functions_framework.cloud_event
def pool_schedule(cloud_event: CloudEvent) -> None:
    """A scheduler tick → scheduled node pools removed off-hours (scaled to zero, or
    deleted with their spec saved) and restored before on-hours."""
    from shared.handler import handle_pubsub
    from shared.offhours.trigger import on_message

    handle_pubsub(cloud_event, on_message, "pool_schedule")


@functions_framework.cloud_event
def team_usage(cloud_event: CloudEvent) -> None:
    """A scheduler tick → each budgeted team's chip-hours today and this week, read from
    BigQuery and cached in a ConfigMap for submit_job's budget check."""
    from shared.handler import handle_pubsub
    from shared.jobs.budget.usage import on_message

    handle_pubsub(cloud_event, on_message, "team_usage")
