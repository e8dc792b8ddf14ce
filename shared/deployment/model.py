"""The vocabulary of the deployment definition: what a function, a service, a
scheduler job or a grant is. Plain frozen data; ``system.py`` holds the values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from shared.deployment.cron import check_schedule, check_time_zone

__all__ = [
    "CustomRole",
    "Function",
    "Grant",
    "Ingress",
    "KubeRule",
    "LogSink",
    "Retry",
    "SchedulerJob",
    "Service",
    "StorageTrigger",
    "WorkloadIdentity",
    "service_account_id",
]

# Where a Google Cloud grant applies. Everything is as narrow as the API allows:
# a topic, a table (``target``), the dataset, a bucket; "project" only for
# permissions that exist at project level alone (BigQuery jobs). GKE permissions
# exist on the project only, so the custom roles that carry them are bound on the
# project with an IAM condition on the cluster's resource name: "cluster" is the
# cluster accelops acts on (ACCELOPS_CLUSTER), "scheduled_clusters" those
# pool_schedule acts on (pool_schedule.clusters of this project, else that one).
# The releases bucket is the models bucket unless the config names another
# (serving.releases_bucket); the Sax bucket holds the Saxml admin server's state.
GrantScope = Literal["project", "cluster", "scheduled_clusters", "topic", "table", "dataset",
                     "config_bucket", "models_bucket", "releases_bucket", "sax_bucket",
                     "node_service_account"]
# Where a Kubernetes rule applies: the whole cluster (a ClusterRoleBinding), the
# namespace of accelops' own state, every team namespace (a RoleBinding in each),
# the serving namespace (serving.namespace), or the namespace of the team Saxml
# model servers are queued through (serving.saxml_team; none when unset).
KubeScope = Literal["cluster", "state_namespace", "team_namespaces", "serving_namespace",
                    "saxml_namespace"]
# Where a workload identity's Kubernetes service account lives.
IdentityScope = Literal["serving_namespace", "saxml_namespace"]

_SERVICE_ACCOUNT_ID = re.compile(r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$")


def service_account_id(name: str) -> str:
    """``accelops-<name>`` with dashes: a valid service account id (6 to 30 characters)."""
    account = f"accelops-{name.replace('_', '-')}"
    if not _SERVICE_ACCOUNT_ID.match(account):
        raise ValueError(f"{account!r} is not a valid service account id")
    return account


@dataclass(frozen=True, slots=True)
class Retry:
    """A push subscription's delivery policy. The ack deadline is also the HTTP
    timeout of each push, so it is at least the function's timeout."""

    ack_deadline_seconds: int
    minimum_backoff_seconds: int
    maximum_backoff_seconds: int
    max_delivery_attempts: int

    def __post_init__(self) -> None:
        # Pub/Sub's own limits: refuse a definition the API would refuse.
        if not 10 <= self.ack_deadline_seconds <= 600:
            raise ValueError("ack_deadline_seconds must be 10..600")
        if not 0 <= self.minimum_backoff_seconds <= self.maximum_backoff_seconds <= 600:
            raise ValueError("backoff must satisfy 0 <= minimum <= maximum <= 600")
        if not 5 <= self.max_delivery_attempts <= 100:
            raise ValueError("max_delivery_attempts must be 5..100")


@dataclass(frozen=True, slots=True)
class Grant:
    """One IAM role on one resource, and why the code needs it."""

    role: str
    scope: GrantScope
    why: str
    target: str = ""  # the topic id for scope "topic", the table id for scope "table"

    def __post_init__(self) -> None:
        if (self.scope in ("topic", "table")) != bool(self.target):
            raise ValueError(f"{self.role} on {self.scope}: a topic or table grant names its "
                             "target, and no other grant does")

    @property
    def custom(self) -> bool:
        return not self.role.startswith("roles/")


@dataclass(frozen=True, slots=True)
class KubeRule:
    """One RBAC rule, and why the code needs it."""

    api_group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    scope: KubeScope
    why: str
    resource_names: tuple[str, ...] = ()  # when set, only these objects


@dataclass(frozen=True, slots=True)
class StorageTrigger:
    """Object-finalize events of a bucket, delivered to a function.

    Production offers two routes (Terraform's ``model_upload_route``): an Eventarc
    trigger on the bucket (``event_type``; Eventarc cannot filter by object name, so
    every object of the bucket arrives and the function ignores names outside
    ``object_prefix``), or the bucket's Cloud Storage Pub/Sub notifications for
    ``object_prefix`` (``notification_event``) to the function's trigger topic,
    delivered by its push subscription. The sandbox always takes the second route.
    """

    bucket: Literal["models_bucket"]
    object_prefix: str
    event_type: str = "google.cloud.storage.object.v1.finalized"
    notification_event: str = "OBJECT_FINALIZE"

    def __post_init__(self) -> None:
        if not self.object_prefix.endswith("/"):
            raise ValueError("object_prefix names a folder: it ends with '/'")


@dataclass(frozen=True, slots=True)
class Function:
    """A Cloud Run function (gen2) push-subscribed to one topic (and, with a
    ``storage_trigger``, optionally fed by an Eventarc trigger instead)."""

    name: str  # the entry point in functions/main.py
    description: str
    trigger_topic: str
    dead_letter_topic: str
    retry: Retry
    memory: str
    timeout_seconds: int
    concurrency: int
    max_instances: int
    env: tuple[str, ...]  # deployment settings the code reads (names only)
    grants: tuple[Grant, ...] = ()
    kube_rules: tuple[KubeRule, ...] = ()
    publishes_to: tuple[str, ...] = ()  # topic ids; each has a publisher grant
    cpu: str = "1"
    storage_trigger: StorageTrigger | None = None
    # Calls an address inside the cluster's VPC (not only Google APIs), so in
    # production it needs a route there (Terraform's ``vpc_connector``).
    vpc_egress: bool = False

    def __post_init__(self) -> None:
        if self.timeout_seconds > self.retry.ack_deadline_seconds:
            raise ValueError(f"{self.name}: a push waits at most the ack deadline, "
                             "so the timeout cannot be longer")

    @property
    def subscription(self) -> str:
        return f"{self.trigger_topic}-{self.name.replace('_', '-')}"

    @property
    def service_account(self) -> str:
        return service_account_id(self.name)


# Who can reach a service over the network. "internal": the project's networks only
# (or an internal load balancer, Terraform's ``ingress``). "all": any network, which
# for an IAM-authenticated service still means only its invokers, holding an ID
# token Cloud Run checks: for APIs people call from their own machines.
Ingress = Literal["internal", "all"]


@dataclass(frozen=True, slots=True)
class Service:
    """A Cloud Run service (a container image built from ``services/<name>``), always
    IAM-authenticated: Terraform's ``invokers`` name who may call it."""

    name: str
    description: str
    port: int
    memory: str
    cpu: str
    concurrency: int
    max_instances: int
    env: tuple[str, ...]
    # The distributions its image installs (from PyPI names): what its code imports
    # and what runs it (gunicorn). Its Dockerfile installs exactly these and what they
    # need, as uv.lock pins them for the image's Python (system.SERVICE_PYTHONS, Linux
    # x86_64, the only platform Cloud Run runs): ``deploy generate`` writes that file.
    requirements: tuple[str, ...]
    grants: tuple[Grant, ...] = ()
    # What its identity may do in the cluster (RBAC, as a function's).
    kube_rules: tuple[KubeRule, ...] = ()
    publishes_to: tuple[str, ...] = ()
    ingress: Ingress = "internal"
    # The WSGI application the sandbox serves (``module:attribute``).
    wsgi_app: str | None = None

    @property
    def service_account(self) -> str:
        return service_account_id(self.name)


@dataclass(frozen=True, slots=True)
class WorkloadIdentity:
    """A Google service account that Pods run as through Workload Identity: a
    Kubernetes service account (in each namespace of ``scopes``) annotated with
    the Google account's email, which may impersonate it."""

    name: str  # accelops-<name>
    description: str
    kubernetes_service_account: str
    scopes: tuple[IdentityScope, ...]
    grants: tuple[Grant, ...] = ()

    @property
    def service_account(self) -> str:
        return service_account_id(self.name)


@dataclass(frozen=True, slots=True)
class SchedulerJob:
    """A Cloud Scheduler job publishing to a topic at the times of ``schedule``, a
    unix-cron string read in ``time_zone`` (an IANA name; Cloud Scheduler's default,
    Etc/UTC, when not given). A fixed time in a zone with daylight saving time is
    missing or doubled once a year: Cloud Scheduler only warns that such jobs may run
    unexpectedly (and recommends UTC); the sandbox runs them as cron does
    (``sandbox/cloud_scheduler/cron.py``).

    Both are checked here (``cron.py``): a schedule or zone Cloud Scheduler would
    refuse raises ValueError naming it and the job.
    """

    name: str
    schedule: str
    topic: str
    description: str
    attributes: dict[str, str] = field(default_factory=dict)
    data: str = "{}"
    time_zone: str = "Etc/UTC"

    def __post_init__(self) -> None:
        try:
            check_schedule(self.schedule)
            check_time_zone(self.time_zone)
        except ValueError as exc:
            raise ValueError(f"scheduler job {self.name}: {exc}") from None


@dataclass(frozen=True, slots=True)
class LogSink:
    """A Cloud Logging sink publishing matching entries to a topic. ``filter`` may
    use ``${project_id}`` and ``${cluster_name}``, filled in by Terraform."""

    name: str
    topic: str
    filter: str
    description: str


@dataclass(frozen=True, slots=True)
class CustomRole:
    """A project-level custom role (for permissions no narrower resource holds)."""

    role_id: str
    title: str
    description: str
    permissions: tuple[str, ...]

    def __post_init__(self) -> None:
        # IAM's own limits (projects.roles.create): refuse what the API would refuse.
        if len(self.title) > 100 or len(self.description.encode()) > 256:
            raise ValueError(f"custom role {self.role_id}: a title holds at most 100 "
                             "characters and a description at most 256 bytes")
