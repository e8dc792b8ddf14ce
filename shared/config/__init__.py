"""Configuration: the environment (where to act) and the YAML file (team policy).

The environment variables are a public contract (docs/operations/configuration.md):
they say which cluster to act on and which local endpoints stand in for Google services. The YAML
file, named by ``ACCELOPS_CONFIG`` as a local path or a ``gs://`` URI, carries team
policy. Both are parsed at the boundary into typed models whose errors name the bad
key, and the file is cached per process (re-read when it changes, or after a minute
for ``gs://``) so warm invocations pay nothing for it.

Every section of the file is modelled here; the off-hours schedules, with their own
window grammar, in :mod:`shared.config.offhours`. Configuration is the base of the
library: features read it, it imports none of them.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from shared import storage
from shared.config.offhours import PoolScheduleConfig, Schedule, check_schedule_names
from shared.errors import ConfigError, PermanentError

__all__ = [
    "MAX_TEAM_NAME",
    "AccelopsConfig",
    "CanaryPolicy",
    "CanarySteps",
    "JobsApiConfig",
    "MetricsConfig",
    "ServingConfig",
    "Settings",
    "SliceConfig",
    "TeamBudget",
    "TeamPolicy",
    "Topics",
    "format_validation_error",
    "load_config",
    "load_config_from",
    "load_config_or_retry",
    "parse_config",
]

_RFC1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# A team's key names Kubernetes objects: its ClusterQueue "<team>-cluster-queue"
# (shared/deployment/manifests.py), which LocalQueues refer to by that name, and the
# label accelops.dev/team on its namespace, queues and JobSets. 49 characters keep the
# ClusterQueue name a 63-character label as well.
MAX_TEAM_NAME = 49
_GS_CACHE_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class Settings:
    """Where to act, read from the environment on every call (cheap)."""

    config_source: str | None
    project: str | None
    location: str | None
    cluster: str | None
    kubeconfig: str | None
    gke_endpoint: str | None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ

        def get(key: str) -> str | None:
            value = env.get(key, "").strip()
            return value or None

        return cls(
            config_source=get("ACCELOPS_CONFIG"),
            project=get("ACCELOPS_PROJECT"),
            location=get("ACCELOPS_LOCATION"),
            cluster=get("ACCELOPS_CLUSTER"),
            kubeconfig=get("KUBECONFIG"),
            gke_endpoint=get("ACCELOPS_GKE_ENDPOINT"),
        )

    def require(self, *names: str) -> None:
        """Raise ConfigError naming every listed setting that is unset."""
        env_names = {
            "config_source": "ACCELOPS_CONFIG",
            "project": "ACCELOPS_PROJECT",
            "location": "ACCELOPS_LOCATION",
            "cluster": "ACCELOPS_CLUSTER",
        }
        missing = [env_names.get(n, n) for n in names if getattr(self, n) is None]
        if missing:
            hint = (" (or KUBECONFIG, to reach a cluster without GKE)"
                    if {"location", "cluster"} & set(names) else "")
            raise ConfigError(
                f"deployment setting missing: environment variable "
                f"{', '.join(missing)} must be set{hint}", field=missing[0]
            )


class TeamBudget(BaseModel):
    """Chip-hours a team may use (UTC days; weeks start on Monday 00:00 UTC). A request
    submitted while the team's usage has reached either limit is refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chip_hours_per_day: Annotated[float, Field(gt=0)] | None = None
    chip_hours_per_week: Annotated[float, Field(gt=0)] | None = None


class TeamPolicy(BaseModel):
    """What one team may submit, and where its JobSets go."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    namespace: str
    queue: str
    tpu_types: tuple[str, ...] | None = None
    max_slices: Annotated[int, Field(ge=1)] | None = None
    image_prefixes: tuple[str, ...] | None = None
    # Kueue quota: chips of each allowed TPU accelerator the team may hold at once
    # (its ClusterQueue's nominalQuota per flavor, rendered by `accelops manifests`).
    tpu_chips: Annotated[int, Field(ge=1)] = 64
    budget: TeamBudget = Field(default_factory=TeamBudget)
    # Identities (Google account or service account e-mails) the jobs API lets act
    # for this team: submit, list, read and cancel its jobs.
    members: tuple[str, ...] = ()

    @field_validator("namespace", "queue")
    @classmethod
    def _rfc1123(cls, value: str) -> str:
        if not _RFC1123_LABEL.match(value):
            raise ValueError(
                f"{value!r} is not a valid Kubernetes name "
                "(lowercase letters, digits and '-', at most 63 characters)"
            )
        return value

    @field_validator("tpu_types")
    @classmethod
    def _normalise_types(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None if value is None else tuple(t.strip().lower() for t in value)


def _team_name(value: str) -> str:
    if len(value) > MAX_TEAM_NAME or not _RFC1123_LABEL.match(value):
        raise ValueError(
            f"team name {value!r} is not usable: it names the team's Kubernetes objects "
            f"(ClusterQueue '<team>-cluster-queue', label accelops.dev/team), so it must be "
            f"lowercase letters, digits and '-', start and end with a letter or digit, and "
            f"be at most {MAX_TEAM_NAME} characters"
        )
    return value


TeamName = Annotated[str, AfterValidator(_team_name)]


class Topics(BaseModel):
    """Pub/Sub topic ids (in ``ACCELOPS_PROJECT``) accelops publishes to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job_requests: str = "job-requests"
    rejections: str = "job-rejections"
    slices_reconcile: str = "slices-reconcile"
    loadtest_metrics: str = "loadtest-metrics"
    # Cloud Storage Pub/Sub notifications of the models bucket (the sandbox's route;
    # production may use it instead of the Eventarc trigger).
    model_uploads: str = "model-uploads"
    # Ticks (and nudges from deploy_model) that make reconcile_models observe rollouts.
    model_rollouts: str = "model-rollouts"
    # Cloud Scheduler ticks that make pool_schedule apply the off-hours schedules.
    pool_schedule: str = "pool-schedule"
    # Cloud Scheduler ticks that make team_usage cache each team's chip-hours for budgets.
    team_usage: str = "team-usage"


class SliceConfig(BaseModel):
    """How reconcile_slices provisions and reaps TPU node pools."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # When on, JobSets are rendered to run only on the node pools provisioned for
    # them (a nodeSelector on the pools' accelops labels).
    enabled: bool = True
    grace_period_seconds: Annotated[int, Field(ge=0, le=86400)] = 120
    cleanup_only: bool = False
    state_namespace: str = "accelops-system"
    node_service_account: str | None = None
    network_tags: tuple[str, ...] = ()
    zone: str | None = None
    spot: bool = False
    reservation: str | None = None
    # Exponential backoff, doubled per attempt and capped: after GKE answered busy
    # (429, FAILED_PRECONDITION, ABORTED) for the whole cluster, and per JobSet after
    # one of its pool creates failed (stockout, quota, reservation).
    backoff_initial_seconds: Annotated[int, Field(ge=1)] = 30
    backoff_max_seconds: Annotated[int, Field(ge=1)] = 600
    # Node-pool operations in flight at once (at most one per pool); GKE's own
    # per-cluster limit has been seen at 5.
    max_concurrent_operations: Annotated[int, Field(ge=1, le=20)] = 4
    # Capacity tried by successive create attempts after a failed one: a JobSet whose
    # capacity is in the list moves to the next entry (staying on the last); one whose
    # capacity is not in it keeps its own. Entries: "reservation" (slices.reservation),
    # "reservation/<name>", "on-demand", "spot". Empty: never fall back.
    capacity_fallback: tuple[str, ...] = ()

    @field_validator("state_namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        return TeamPolicy._rfc1123(value)

    @field_validator("capacity_fallback")
    @classmethod
    def _capacities(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            if entry not in ("reservation", "on-demand", "spot") and not (
                    entry.startswith("reservation/") and len(entry) > len("reservation/")):
                raise ValueError(f"capacity_fallback entry {entry!r}: must be reservation, "
                                 "reservation/<name>, on-demand or spot")
        return value

    @model_validator(mode="after")
    def _reservation_named(self) -> SliceConfig:
        if "reservation" in self.capacity_fallback and not self.reservation:
            raise ValueError("capacity_fallback names 'reservation' but slices.reservation "
                             "is not set")
        return self

    def capacities(self) -> tuple[str, ...]:
        """capacity_fallback with "reservation" resolved to the configured one."""
        return tuple(f"reservation/{self.reservation}" if c == "reservation" else c
                     for c in self.capacity_fallback)


_BQ_ID = r"^[A-Za-z0-9_]{1,1024}$"


class MetricsConfig(BaseModel):
    """Where load-test metrics live in BigQuery (project: ``ACCELOPS_PROJECT``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: Annotated[str, Field(pattern=_BQ_ID)] = "loadtest"
    table: Annotated[str, Field(pattern=_BQ_ID)] = "requests"
    rejections_table: Annotated[str, Field(pattern=_BQ_ID)] = "rejections"
    # One row per test and phase: what the load generator was asked to do.
    runs_table: Annotated[str, Field(pattern=_BQ_ID)] = "test_runs"
    # One row per action pool_schedule took (or declined) on a node pool.
    pool_actions_table: Annotated[str, Field(pattern=_BQ_ID)] = "pool_actions"
    # One row per transition in a job's life (shared/metrics/job_event.py).
    job_events_table: Annotated[str, Field(pattern=_BQ_ID)] = "job_events"
    location: str = "US"
    # Partitions older than this are dropped by BigQuery; None keeps them forever.
    partition_expiration_days: Annotated[int, Field(ge=1)] | None = None


def _canary_steps(steps: tuple[int, ...]) -> tuple[int, ...]:
    if not steps or steps[-1] != 100:
        raise ValueError("steps must end at 100 (the last step is the promotion)")
    if any(b <= a for a, b in itertools.pairwise(steps)):
        raise ValueError(f"steps must rise: {list(steps)}")
    return steps


CanarySteps = Annotated[tuple[Annotated[int, Field(ge=1, le=100)], ...],
                        Field(min_length=1, max_length=10), AfterValidator(_canary_steps)]


class CanaryPolicy(BaseModel):
    """How a new Triton release earns its traffic (shared/serving/canary.py).

    The release takes ``steps`` percent of the model's requests in turn; each step is
    held at least ``min_seconds`` and until the release has answered ``min_requests``,
    then its error rate and p99 latency, read from the servers' own metrics, are
    compared with the release that serves: within the SLO it moves on (the last step,
    100, is the promotion); outside it, it is rolled back. ``steps: [100]`` switches at
    once, as soon as the release is ready. A deploy.yaml's ``canary`` section
    overrides any of these for its model.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    steps: CanarySteps = (5, 25, 50, 100)
    # Managed Prometheus scrapes every 15 s: a step needs several scrapes to count.
    min_seconds: Annotated[float, Field(ge=0, le=86400)] = 120.0
    min_requests: Annotated[int, Field(ge=1, le=10_000_000)] = 100
    # Error rate may exceed the serving release's by at most this (0.01: one point).
    max_error_rate_increase: Annotated[float, Field(ge=0, le=1)] = 0.01
    # p99 may be at most this times the serving release's p99, plus the slack below
    # (latency histograms have buckets: two fast releases can differ by a bucket).
    max_p99_ratio: Annotated[float, Field(ge=1, le=100)] = 1.5
    p99_slack_ms: Annotated[float, Field(ge=0, le=600_000)] = 10.0
    # An absolute bound on p99 too, whatever the serving release does.
    max_p99_ms: Annotated[float, Field(gt=0, le=600_000)] | None = None


class ServingConfig(BaseModel):
    """Where and how deploy_model serves uploaded models (shared/serving)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Triton and Saxml Deployments, their Services and the rollout ledgers live here.
    namespace: str = "serving"
    # Immutable release snapshots are copied here; None: the bucket of the upload.
    releases_bucket: str | None = None
    triton_image: str = "nvcr.io/nvidia/tritonserver:24.08-py3"
    # Kubernetes service accounts the servers run as (Workload Identity: bound to a
    # Google service account that may read the releases bucket; see terraform/).
    triton_service_account: str = "triton"
    saxml_service_account: str = "saxml"
    # The load generator on GKE (a Locust master and its workers in this namespace, so
    # they reach the model servers' Services): the Kubernetes service account they run
    # as (Workload Identity: may only publish to the metrics topic), and how many
    # worker replicas the rendered worker Deployment asks for.
    locust_service_account: str = "locust"
    locust_workers: Annotated[int, Field(ge=0, le=100)] = 1
    saxml_cell: str = "/sax/accelops"
    saxml_model_server_image: str = \
        "us-docker.pkg.dev/cloud-tpu-images/inference/sax-model-server:v1.2.0"
    # Kueue team whose queue Saxml model-server slices go through.
    saxml_team: str | None = None
    # A rollout not serving after this long is rolled back.
    rollout_timeout_seconds: Annotated[int, Field(ge=30, le=86400)] = 900
    # A new pod restarting this often is a failed version: rolled back at once.
    max_restarts: Annotated[int, Field(ge=1, le=100)] = 2
    # Rollouts kept per model in its ledger (oldest dropped first).
    history: Annotated[int, Field(ge=2, le=200)] = 20
    # How a new release is given traffic and judged before it serves alone.
    canary: CanaryPolicy = Field(default_factory=CanaryPolicy)
    # A release taken out of the route keeps its pods this long before they are
    # deleted: the Gateway's load balancers learn of a weight change asynchronously.
    retire_after_seconds: Annotated[float, Field(ge=0, le=3600)] = 60.0
    # The Gateway every model's HTTPRoute attaches to, in the serving namespace (the
    # deployment definition creates it; shared/deployment/serving.py). Its routes split
    # a model's requests between releases by weight (shared/serving/gateway.py).
    gateway: str = "models"
    # GKE's class of that Gateway. The default is the regional internal Application
    # Load Balancer: reconcile_models and the load generator reach it through the VPC,
    # and nothing outside the VPC should. gke-l7-regional-external-managed or
    # gke-l7-global-external-managed expose it publicly instead.
    gateway_class: Literal["gke-l7-rilb", "gke-l7-regional-external-managed",
                           "gke-l7-global-external-managed", "gke-l7-gxlb"] = "gke-l7-rilb"
    # How often managed Prometheus scrapes each Triton pod (the PodMonitoring's
    # interval). Counts over a window are only as fresh as the last scrape.
    metrics_interval_seconds: Annotated[int, Field(ge=1, le=300)] = 15

    @field_validator("namespace", "triton_service_account", "saxml_service_account",
                     "gateway", "locust_service_account")
    @classmethod
    def _name(cls, value: str) -> str:
        return TeamPolicy._rfc1123(value)


class JobsApiConfig(BaseModel):
    """Who the jobs API (services/jobs_api) lets act, beyond each team's members."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Identities that may act for every team (operators).
    admins: tuple[str, ...] = ()


class AccelopsConfig(BaseModel):
    """The YAML configuration file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    teams: dict[TeamName, TeamPolicy] = Field(default_factory=dict)
    topics: Topics = Field(default_factory=Topics)
    slices: SliceConfig = Field(default_factory=SliceConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    serving: ServingConfig = Field(default_factory=ServingConfig)
    pool_schedule: PoolScheduleConfig = Field(default_factory=PoolScheduleConfig)
    # Off-hours schedules by name (shared/config/offhours.py); pools opt in by label.
    schedules: dict[str, Schedule] = Field(default_factory=dict)
    jobs_api: JobsApiConfig = Field(default_factory=JobsApiConfig)

    @field_validator("schedules")
    @classmethod
    def _schedule_names(cls, value: dict[str, Schedule]) -> dict[str, Schedule]:
        return check_schedule_names(value)


# Errors listed in one message; the rest are counted (a request with hundreds of
# unknown fields would otherwise make a message of hundreds of lines).
MAX_LISTED_ERRORS = 10


def format_validation_error(exc: ValidationError, prefix: str = "") -> tuple[str, str, str]:
    """(message, field, rule) for a pydantic error, naming the bad keys by their dotted
    paths (the first MAX_LISTED_ERRORS of them, then how many more there are)."""
    parts: list[str] = []
    first_field, first_rule = "", ""
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    for error in errors[:MAX_LISTED_ERRORS]:
        # A refused mapping key is located at (..., key, "[key]"): name the key itself.
        loc = [p for p in error["loc"] if p != "[key]"]
        field = ".".join(str(p) for p in (prefix, *loc) if p != "")
        rule = error["msg"]
        if error["type"] == "value_error":
            rule = rule.removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            rule = "unknown field (not allowed)"
        parts.append(f"{field or '<root>'}: {rule}")
        if not first_field:
            first_field, first_rule = field or "<root>", rule
    if len(errors) > MAX_LISTED_ERRORS:
        parts.append(f"and {len(errors) - MAX_LISTED_ERRORS} more")
    return "; ".join(parts), first_field, first_rule


def parse_config(text: str, source: str = "<config>") -> AccelopsConfig:
    """Parse YAML text into the configuration, or raise ConfigError naming the key."""
    try:
        raw: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}", field="<root>") from exc
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping", field="<root>")
    try:
        return AccelopsConfig.model_validate(raw)
    except ValidationError as exc:
        message, field, rule = format_validation_error(exc)
        raise ConfigError(f"{source}: {message}", field=field, rule=rule) from exc


@dataclass(slots=True)
class _Cached:
    config: AccelopsConfig
    stamp: float
    loaded_at: float


_cache: dict[str, _Cached] = {}
_cache_lock = threading.Lock()


def load_config(source: str) -> AccelopsConfig:
    """Load (and cache) the configuration from a local path or a ``gs://`` URI.

    Raises ConfigError when the file is missing or invalid; TransientError (from the
    storage adapter) when Cloud Storage cannot be reached.
    """
    now = time.monotonic()
    if source.startswith("gs://"):
        with _cache_lock:
            hit = _cache.get(source)
        if hit is not None and now - hit.loaded_at < _GS_CACHE_SECONDS:
            return hit.config

        try:
            text = storage.read_text(source)
        except PermanentError as exc:
            # A missing or unreadable object is a configuration problem, which callers
            # treat as such (retry until fixed), not a problem of the event at hand.
            raise ConfigError(f"config {source} cannot be read: {exc.message}",
                              field="ACCELOPS_CONFIG") from exc
        config = parse_config(text, source)
        stamp = now
    else:
        path = Path(source)
        try:
            stamp = path.stat().st_mtime
        except OSError as exc:
            raise ConfigError(f"config file {source} cannot be read: {exc.strerror}",
                              field="ACCELOPS_CONFIG") from exc
        with _cache_lock:
            hit = _cache.get(source)
        if hit is not None and hit.stamp == stamp:
            return hit.config
        config = parse_config(path.read_text(encoding="utf-8"), source)
    with _cache_lock:
        _cache[source] = _Cached(config, stamp, now)
    return config


def load_config_from(source: str | None) -> AccelopsConfig:
    """The configuration a command names (``--config``), else ``ACCELOPS_CONFIG``'s;
    ConfigError when there is neither."""
    source = source or Settings.from_env().config_source
    if not source:
        raise ConfigError("no configuration: pass --config FILE or set ACCELOPS_CONFIG")
    return load_config(source)


def load_config_or_retry(settings: Settings) -> AccelopsConfig:
    """The configuration a handler runs with.

    A missing or broken configuration is not the event's fault: ConfigError is a
    DeploymentError, so the event is retried (and dead-lettered eventually) until an
    operator fixes it, never refused.
    """
    settings.require("config_source")
    assert settings.config_source is not None
    return load_config(settings.config_source)
