"""What the sandbox wires together: functions, the topics they are subscribed to,
and the Pub/Sub settings of those subscriptions.

Production creates the same topics and push subscriptions with Terraform; the
sandbox shortens the retry backoff so a failure test or demo does not wait
minutes.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ALL_PARTS",
    "FUNCTIONS",
    "PARTS",
    "PROJECT",
    "PULL_SUBSCRIPTIONS",
    "FunctionSpec",
    "RetrySettings",
]

PROJECT = "accelops-local"
LOCATION = "us-central2-b"
CLUSTER = "sandbox"


@dataclass(frozen=True, slots=True)
class RetrySettings:
    minimum_backoff: float = 0.5
    maximum_backoff: float = 10.0
    # About a minute of retries before dead-lettering: long enough to ride out a
    # restarted backend in a test, short enough to see a dead letter in a demo.
    max_delivery_attempts: int = 10
    ack_deadline_seconds: int = 60


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """A function served by functions-framework, push-subscribed to one topic."""

    target: str
    topic_key: str  # a field of the config's ``topics``
    subscription: str
    dead_letter_topic: str
    part: str = "jobs"  # which sandbox part runs it (see PARTS)
    retry: RetrySettings = RetrySettings()


FUNCTIONS: tuple[FunctionSpec, ...] = (
    FunctionSpec(
        target="submit_job",
        topic_key="job_requests",
        subscription="job-requests-submit-job",
        dead_letter_topic="job-requests-dead-letter",
    ),
    FunctionSpec(
        target="reconcile_slices",
        topic_key="slices_reconcile",
        subscription="slices-reconcile-reconcile-slices",
        dead_letter_topic="slices-reconcile-dead-letter",
    ),
    FunctionSpec(
        target="ingest_metrics",
        topic_key="loadtest_metrics",
        subscription="loadtest-metrics-ingest-metrics",
        dead_letter_topic="loadtest-metrics-dead-letter",
        part="metrics",
    ),
)

# The sandbox in parts, so a command starts only what it needs: Pub/Sub always, then
# per part its backing processes (and the functions whose ``part`` it is).
PARTS: dict[str, tuple[str, ...]] = {
    "jobs": ("cluster",),  # Kubernetes API, GKE API, simulation, scheduler
    "metrics": ("bigquery", "inference"),  # BigQuery, Triton + Saxml stand-in
    "reports": ("bigquery",),  # just BigQuery, to read the views
}
ALL_PARTS: frozenset[str] = frozenset({"jobs", "metrics"})

# Cloud Scheduler jobs (simulated seconds between runs; production: cron in Terraform).
SCHEDULES: tuple[tuple[str, float, str], ...] = (
    ("reconcile-slices-every-minute", 60.0, "slices_reconcile"),
)

# Kueue ClusterQueue quota per team, in TPU chips (the sandbox's stand-in for what an
# operator configures in manifests/).
TEAM_TPU_QUOTA: dict[str, int] = {"research": 256, "inference": 32}
DEFAULT_TPU_QUOTA = 64

# Pull subscriptions for people and tests to read what functions publish:
# subscription id -> config topics key, or a literal topic id.
PULL_SUBSCRIPTIONS: dict[str, str] = {
    "job-rejections-sandbox": "rejections",
    "job-requests-dead-letter-sandbox": "job-requests-dead-letter",
    "loadtest-metrics-dead-letter-sandbox": "loadtest-metrics-dead-letter",
}
