"""What the sandbox wires together, taken from the deployment definition
(``shared/deployment/system.py``): the functions and services, the topics the
functions are subscribed to, their subscriptions' settings, the scheduler jobs, and
the bucket notifications that feed ``deploy_model``.

The one deliberate difference from production is time: retry backoff is scaled by
the sandbox's usual speed-up (60x), so a failure test or demo sees the same number
of attempts in seconds instead of minutes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sandbox.cloud_scheduler.service import ScheduledJob
from shared.config import Topics
from shared.deployment import system
from shared.deployment.model import Function, Retry, Service

__all__ = [
    "ALL_PARTS",
    "FUNCTIONS",
    "FUNCTION_PARTS",
    "GPU_POOL",
    "LOADGEN_POOL",
    "MODELS_BUCKET",
    "PARTS",
    "PROJECT",
    "PULL_SUBSCRIPTIONS",
    "SCHEDULES",
    "SERVICES",
    "SERVICE_PARTS",
    "STORAGE_NOTIFICATIONS",
    "FunctionSpec",
    "RetrySettings",
    "ServiceSpec",
    "tick_seconds",
]

PROJECT = "accelops-local"
LOCATION = "us-central2-b"
CLUSTER = "sandbox"
# Production seconds per sandbox second for retry backoff (the simulated clock's default).
TIME_SCALE = 60.0


@dataclass(frozen=True, slots=True)
class RetrySettings:
    """A subscription's retry policy in (possibly fractional) seconds."""

    minimum_backoff: float
    maximum_backoff: float
    max_delivery_attempts: int
    ack_deadline_seconds: int

    @classmethod
    def scaled(cls, retry: Retry, scale: float = TIME_SCALE) -> RetrySettings:
        # The ack deadline stays: it is also the push request's timeout, and Pub/Sub
        # refuses one under 10 s.
        return cls(retry.minimum_backoff_seconds / scale, retry.maximum_backoff_seconds / scale,
                   retry.max_delivery_attempts, retry.ack_deadline_seconds)


# The sandbox part that runs each function and service of the deployment definition
# as a process of its own (None: the sandbox does not run that service). Production
# has no parts; tests/unit/test_sandbox_topology.py keeps these maps and the
# definition in step.
FUNCTION_PARTS: dict[str, str] = {
    "submit_job": "jobs",
    "reconcile_slices": "jobs",
    "pool_schedule": "jobs",
    "ingest_metrics": "metrics",
    "deploy_model": "serving",
    "reconcile_models": "serving",
    "team_usage": "metrics",
}
SERVICE_PARTS: dict[str, str | None] = {
    "dashboard": None,
    "jobs_api": "jobs",
    "loadgen": None,
}


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """A function served by functions-framework, push-subscribed to one topic."""

    target: str
    topic: str
    subscription: str
    dead_letter_topic: str
    part: str
    retry: RetrySettings

    @classmethod
    def of(cls, function: Function) -> FunctionSpec:
        part = FUNCTION_PARTS.get(function.name)
        if part is None:
            raise ValueError(f"function {function.name!r} of shared/deployment/system.py has "
                             "no sandbox part: add it to FUNCTION_PARTS in sandbox/topology.py")
        return cls(function.name, function.trigger_topic, function.subscription,
                   function.dead_letter_topic, part, RetrySettings.scaled(function.retry))


FUNCTIONS: tuple[FunctionSpec, ...] = tuple(FunctionSpec.of(f) for f in system.FUNCTIONS)


@dataclass(frozen=True, slots=True)
class ServiceSpec:
    """A Cloud Run service the sandbox serves with gunicorn, as its image does."""

    name: str
    wsgi_app: str
    part: str

    @classmethod
    def of(cls, service: Service, part: str) -> ServiceSpec:
        if service.wsgi_app is None:
            raise ValueError(f"{service.name}: the sandbox serves a service by its wsgi_app")
        return cls(service.name, service.wsgi_app, part)


SERVICES: tuple[ServiceSpec, ...] = tuple(
    ServiceSpec.of(s, part) for s in system.SERVICES
    if (part := SERVICE_PARTS[s.name]) is not None)

# The sandbox in parts, so a command starts only what it needs: Pub/Sub always, then
# per part its backing processes (and the functions whose ``part`` it is).
PARTS: dict[str, tuple[str, ...]] = {
    # Kubernetes API, GKE API, simulation, scheduler; the ID token issuer the jobs
    # API checks callers' tokens against.
    "jobs": ("cluster", "idtokens"),
    "metrics": ("bigquery", "inference"),  # BigQuery, Triton + Saxml stand-in
    "reports": ("bigquery",),  # just BigQuery, to read the views
    # Model uploads and rollouts (deploy_model, reconcile_models): the cluster, and
    # fake-gcs-server publishing OBJECT_FINALIZE notifications for the upload prefix
    # to deploy_model's topic (production's "pubsub" route).
    # The Saxml HTTP proxy stand-in ("saxml") publishes Saxml versions. Prometheus
    # ("monitoring") scrapes the Triton pods the way managed collection does, for the
    # canary's SLO gate.
    "serving": ("cluster", "storage", "saxml", "monitoring"),
}
ALL_PARTS: frozenset[str] = frozenset({"jobs", "metrics", "serving"})

# What the "storage" component notifies, and where: taken from the definition like
# everything else here.
STORAGE_NOTIFICATIONS: tuple[tuple[str, str, str], ...] = tuple(
    (f.trigger_topic, t.object_prefix, t.notification_event)
    for f in system.FUNCTIONS if (t := f.storage_trigger) is not None)

# The bucket users upload models to, and the GPU node pool Triton Deployments run on
# (the sandbox's stand-in for a team's static inference pool).
MODELS_BUCKET = "accelops-models"
GPU_POOL = ("gpu-l4", "g2-standard-8", "nvidia-l4", 1, 2)  # name, machine, GPU, per node, nodes
# The load generator's CPU pool (name, machine, nodes): a master and up to 6 workers,
# one core each, fit on one node.
LOADGEN_POOL = ("loadgen", "e2-standard-8", 1)

# Cloud Scheduler jobs: the definition's cron, time zone, attributes and body, run
# on the simulated clock (passed to the cluster process as --schedule flags).
SCHEDULES: tuple[ScheduledJob, ...] = tuple(
    ScheduledJob(job.topic, job.schedule, job.time_zone, dict(job.attributes), job.data)
    for job in system.SCHEDULER_JOBS)


def tick_seconds(topic: str) -> float:
    """Seconds between two firings of the scheduler job publishing to ``topic`` (its
    cron fires every N minutes, on the marks)."""
    [job] = [j for j in SCHEDULES if j.topic == topic]
    first, second = job.cron.times(datetime(2026, 1, 5, tzinfo=UTC), 2)
    return (second - first).total_seconds()


# Where the cluster's FailedScheduling events go (the log sink's topic).
UNSCHEDULABLE_TOPIC = system.LOG_SINKS[0].topic

# Pull subscriptions for people and tests to read what functions publish:
# subscription id -> topic id.
PULL_SUBSCRIPTIONS: dict[str, str] = {
    f"{topic}-sandbox": topic
    for topic in (Topics().rejections, *system.dead_letter_topics())
}
