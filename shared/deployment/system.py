"""The deployable system, defined once.

Every function with its trigger, push subscription, retry and dead-letter policy,
size, service account and the exact permissions its code uses; the Cloud Run
services; the scheduler jobs; the log sink; the custom roles; the identities the
model servers run as (Workload Identity). Terraform reads the
JSON that ``accelops deploy generate`` writes from this module (committed under
``terraform/generated/``, checked for staleness by a test), the Kubernetes RBAC in
``manifests/`` is rendered from it, and the sandbox provisions Pub/Sub from it.

Topic ids come from :class:`shared.config.Topics` (the names the code publishes
to), so a topic is spelled once.
"""

from __future__ import annotations

from shared.config import MetricsConfig, ServingConfig, SliceConfig, Topics
from shared.deployment.model import (
    CustomRole,
    Function,
    Grant,
    KubeRule,
    LogSink,
    Retry,
    SchedulerJob,
    Service,
    StorageTrigger,
    WorkloadIdentity,
)
from shared.jobs.budget.model import USAGE_CONFIGMAP
from shared.serving.convention import MODELS_PREFIX
from shared.slices.record import RECORD_NAME

__all__ = [
    "CUSTOM_ROLES",
    "EVENTARC_INVOKER",
    "FUNCTIONS",
    "FUNCTION_BUILDER",
    "FUNCTION_REQUIREMENTS",
    "LOG_SINKS",
    "PUSH_INVOKER",
    "SCHEDULER_JOBS",
    "SERVICES",
    "SERVICE_PYTHONS",
    "SERVING_NAMESPACE",
    "TOPICS",
    "WORKLOAD_IDENTITIES",
    "dead_letter_topics",
    "function",
    "topics",
]

_T = Topics()
_SERVING = ServingConfig()
_METRICS = MetricsConfig()
STATE_NAMESPACE = SliceConfig().state_namespace
# The manifests and Terraform's Workload Identity bindings name these; a config
# that changes them is refused by `accelops manifests render` (manifests.py).
SERVING_NAMESPACE = _SERVING.namespace

# Retry for a minute or so at first, then every ten minutes, for about an hour in
# all, before a message goes to its dead-letter topic: long enough to ride out a
# cluster upgrade or a fixed deployment mistake, short enough that a dead letter
# is looked at the same day.
_PRODUCTION_RETRY = dict(minimum_backoff_seconds=10, maximum_backoff_seconds=600,
                         max_delivery_attempts=10)

# Settings every function reads (docs/operations/configuration.md).
_CONFIG_ENV = ("ACCELOPS_CONFIG", "ACCELOPS_PROJECT")
_CLUSTER_ENV = (*_CONFIG_ENV, "ACCELOPS_LOCATION", "ACCELOPS_CLUSTER")

_READ_CONFIG = Grant("roles/storage.objectViewer", "config_bucket",
                     "read ACCELOPS_CONFIG from gs:// (shared/config, shared/storage.py)")
_CLUSTER_ACCESS = Grant("accelopsClusterAccess", "cluster",
                        "get_cluster for the endpoint and CA (shared/gke.py), then the "
                        "Kubernetes API (shared/kube.py)")
# Server-side apply (PATCH with application/apply-patch+yaml) creates or updates;
# the API server asks for "patch", and "create" when the object does not exist yet.
_APPLY = ("get", "create", "patch")
# Server-side apply of objects the code never reads back: patch, and create when absent.
_APPLY_NEW = ("create", "patch")

# ingest_metrics streams rows (insertAll) into each table of the dataset and reads
# nothing: BigQuery checks bigquery.tables.updateData and tables.get on the table
# and datasets.get on the dataset (REST reference, tabledata.insertAll). Write
# access is per table, so the views (job_usage_daily, which budgets read) stay out of
# its reach; metadataViewer is the narrowest predefined role with datasets.get and
# reads no rows.
_INSERT_ROWS = (
    *(Grant("roles/bigquery.dataEditor", "table",
            f"insert rows into {table} (shared/metrics/ingest.py, shared/bigquery.py)", table)
      for table in (_METRICS.table, _METRICS.rejections_table, _METRICS.runs_table,
                    _METRICS.pool_actions_table, _METRICS.job_events_table)),
    Grant("roles/bigquery.metadataViewer", "dataset",
          "bigquery.datasets.get, which an insert into a table also checks; no rows"),
)

# GKE permissions exist on the project only, and container.clusters.update is what
# GKE checks for every node-pool change and for every other change to a cluster
# (its networks, versions, add-ons, access). The roles cannot narrow that; their
# bindings carry an IAM condition on the cluster's resource name (grant scopes
# "cluster" and "scheduled_clusters"), so they hold on those clusters only.
CUSTOM_ROLES: tuple[CustomRole, ...] = (
    CustomRole(
        "accelopsClusterAccess", "accelops cluster access",
        "Read the cluster: its endpoint and CA (to call its Kubernetes API, where RBAC "
        "decides what the identity may do) and its node pools. Bound with a condition "
        "on the cluster's name.",
        ("container.clusters.get",),
    ),
    CustomRole(
        "accelopsNodePoolOperator", "accelops node-pool operator",
        "Read the cluster, create and delete its node pools and follow those operations. "
        "container.clusters.update also allows every other change to the cluster's "
        "settings: the binding's condition limits it to the accelops cluster, not to "
        "node pools.",
        ("container.clusters.get", "container.clusters.update", "container.operations.get"),
    ),
    CustomRole(
        "accelopsPoolScheduler", "accelops pool scheduler",
        "Read clusters, resize, delete and recreate their node pools. "
        "container.clusters.update also allows every other change to a cluster's "
        "settings: the binding's condition limits it to the scheduled clusters, not to "
        "node pools.",
        ("container.clusters.get", "container.clusters.update"),
    ),
)

FUNCTIONS: tuple[Function, ...] = (
    Function(
        name="submit_job",
        description="A job request published to Pub/Sub becomes a Kueue-queued JobSet.",
        trigger_topic=_T.job_requests,
        dead_letter_topic=f"{_T.job_requests}-dead-letter",
        # The request lease (shared/jobs/submit.py) outlives any run: 120 s > 60 s.
        retry=Retry(ack_deadline_seconds=60, **_PRODUCTION_RETRY),
        memory="512Mi", timeout_seconds=60, concurrency=1, max_instances=20,
        env=_CLUSTER_ENV,
        # Refusals, the reconcile trigger, and the submitted / rejected lifecycle
        # records (shared/telemetry/emit.py).
        publishes_to=(_T.rejections, _T.slices_reconcile, _T.loadtest_metrics),
        grants=(_CLUSTER_ACCESS, _READ_CONFIG),
        kube_rules=(
            KubeRule("jobset.x-k8s.io", ("jobsets",), ("list",), "cluster",
                     "find every JobSet of a request id, in any team namespace "
                     "(shared/jobs/submit.py judge)"),
            KubeRule("jobset.x-k8s.io", ("jobsets",), ("create",), "team_namespaces",
                     "create the JobSet in the team's namespace (shared/jobs/submit.py)"),
            KubeRule("coordination.k8s.io", ("leases",), ("get", "create", "update", "delete"),
                     "state_namespace",
                     "the per-request lease that keeps racing deliveries from both "
                     "creating (shared/lease.py)"),
            KubeRule("", ("configmaps",), ("get",), "state_namespace",
                     "read the teams' cached usage for their budgets, and only that "
                     "ConfigMap (shared/jobs/budget/gate.py)",
                     resource_names=(USAGE_CONFIGMAP,)),
        ),
    ),
    Function(
        name="reconcile_slices",
        description="A tick, a submitted JobSet or a FailedScheduling event: create TPU "
                    "node pools for admitted JobSets, delete them when they end.",
        trigger_topic=_T.slices_reconcile,
        dead_letter_topic=f"{_T.slices_reconcile}-dead-letter",
        # Ticks come every minute: a failed one is superseded by the next, so few
        # attempts and a short backoff.
        retry=Retry(ack_deadline_seconds=60, minimum_backoff_seconds=10,
                    maximum_backoff_seconds=60, max_delivery_attempts=5),
        memory="512Mi", timeout_seconds=60, concurrency=1, max_instances=1,
        env=_CLUSTER_ENV,
        # The lifecycle records it observes (shared/slices/events.py).
        publishes_to=(_T.loadtest_metrics,),
        grants=(
            Grant("accelopsNodePoolOperator", "cluster",
                  "list, create and delete node pools, poll their operations "
                  "(shared/gke.py, shared/slices/reconcile.py)"),
            Grant("roles/iam.serviceAccountUser", "node_service_account",
                  "create node pools that run as slices.node_service_account (which "
                  "Terraform requires the team config to name)"),
            _READ_CONFIG,
        ),
        kube_rules=(
            KubeRule("jobset.x-k8s.io", ("jobsets",), ("list",), "cluster",
                     "which JobSets are admitted, running or finished "
                     "(shared/slices/reconcile.py)"),
            KubeRule("", ("pods",), ("list",), "cluster",
                     "which slices' pods are pending or running (shared/slices/observe.py)"),
            KubeRule("kueue.x-k8s.io", ("workloads",), ("list",), "cluster",
                     "when Kueue admitted each JobSet, its Workload's Admitted condition "
                     "(shared/slices/events.py)"),
            KubeRule("", ("nodes",), ("list",), "cluster",
                     "which node pools are ready (shared/slices/observe.py)"),
            KubeRule("", ("configmaps",), ("create",), "state_namespace",
                     "create its record the first time (shared/slices/record.py)"),
            KubeRule("", ("configmaps",), ("get", "update"), "state_namespace",
                     "read and update its record, and only that ConfigMap "
                     "(shared/slices/record.py)", resource_names=(RECORD_NAME,)),
            KubeRule("jobset.x-k8s.io", ("jobsets",), ("patch",), "team_namespaces",
                     "annotate a JobSet with why its pool create failed "
                     "(shared/slices/surface.py)"),
            KubeRule("", ("events",), ("create",), "team_namespaces",
                     "a Warning Event on a JobSet whose pool create failed "
                     "(shared/slices/surface.py)"),
        ),
    ),
    Function(
        name="pool_schedule",
        description="A scheduler tick: scheduled node pools are scaled to zero or deleted "
                    "(spec saved) off-hours, and restored before on-hours.",
        trigger_topic=_T.pool_schedule,
        dead_letter_topic=f"{_T.pool_schedule}-dead-letter",
        # Ticks come every five minutes and each is level-triggered: a failed one is
        # caught up by the next, so few attempts and a short backoff.
        retry=Retry(ack_deadline_seconds=120, minimum_backoff_seconds=10,
                    maximum_backoff_seconds=60, max_delivery_attempts=5),
        memory="512Mi", timeout_seconds=120, concurrency=1, max_instances=1,
        env=_CLUSTER_ENV,
        publishes_to=(_T.loadtest_metrics,),
        grants=(
            Grant("accelopsPoolScheduler", "scheduled_clusters",
                  "list node pools, resize them, set their autoscaling, delete and "
                  "recreate them (shared/gke.py, shared/offhours/tick.py); discover "
                  "the endpoints of pool_schedule.clusters"),
            Grant("roles/iam.serviceAccountUser", "node_service_account",
                  "recreate a deleted pool that runs as slices.node_service_account"),
            _READ_CONFIG,
        ),
        kube_rules=(
            KubeRule("", ("nodes",), ("list",), "cluster",
                     "how many nodes each pool has (shared/offhours/observe.py)"),
            KubeRule("", ("pods",), ("list",), "cluster",
                     "whether pods run on a pool (shared/offhours/observe.py)"),
            KubeRule("kueue.x-k8s.io", ("workloads",), ("list",), "cluster",
                     "whether an admitted workload waits for a pool "
                     "(shared/offhours/observe.py)"),
            KubeRule("", ("configmaps",), ("list", "get", "create", "patch", "delete"),
                     "state_namespace",
                     "the saved spec and size of each removed pool "
                     "(shared/offhours/store.py)"),
        ),
    ),
    Function(
        name="ingest_metrics",
        description="Load-test records published by the load generator become BigQuery "
                    "rows; refused records go to the rejections table.",
        trigger_topic=_T.loadtest_metrics,
        dead_letter_topic=f"{_T.loadtest_metrics}-dead-letter",
        # A 10 MB batch takes ~1 s to check and a few seconds to insert.
        retry=Retry(ack_deadline_seconds=120, **_PRODUCTION_RETRY),
        memory="1Gi", timeout_seconds=120, concurrency=1, max_instances=20,
        env=_CONFIG_ENV,
        grants=(
            *_INSERT_ROWS,
            _READ_CONFIG,
        ),
    ),
    Function(
        name="deploy_model",
        description="A model version's deploy.yaml finalized in the models bucket: copy "
                    "the version to an immutable release and start its rollout.",
        trigger_topic=_T.model_uploads,
        dead_letter_topic=f"{_T.model_uploads}-dead-letter",
        # It copies, writes the ledger and applies objects, then returns: it never
        # waits for pods (reconcile_models does), so 60 s is ample.
        retry=Retry(ack_deadline_seconds=60, **_PRODUCTION_RETRY),
        memory="512Mi", timeout_seconds=60, concurrency=1, max_instances=5,
        env=_CLUSTER_ENV,
        storage_trigger=StorageTrigger("models_bucket", MODELS_PREFIX),
        publishes_to=(_T.model_rollouts,),
        grants=(
            _CLUSTER_ACCESS,
            _READ_CONFIG,
            Grant("roles/storage.objectViewer", "models_bucket",
                  "read deploy.yaml and each listed file's metadata (size, checksums) "
                  "in the upload (shared/serving, shared/storage.py)"),
            Grant("roles/storage.objectViewer", "releases_bucket",
                  "see which files of a release were already copied (shared/storage.py "
                  "object_info)"),
            Grant("roles/storage.objectCreator", "releases_bucket",
                  "copy the version into releases/ server-side, never overwriting "
                  "(if_generation_match=0, so no delete is needed; shared/storage.py "
                  "copy_once)"),
        ),
        kube_rules=(
            KubeRule("", ("configmaps",), ("get", "create", "update"), "serving_namespace",
                     "the model's rollout ledger accelops-model-<model> "
                     "(shared/serving/ledger.py)"),
            KubeRule("apps", ("deployments",), _APPLY, "serving_namespace",
                     "apply the Triton Deployment of a release, server-side "
                     "(shared/serving/triton_rollout.py apply_release)"),
            KubeRule("", ("services",), _APPLY_NEW, "serving_namespace",
                     "apply the model's Service"),
            KubeRule("autoscaling", ("horizontalpodautoscalers",), _APPLY_NEW,
                     "serving_namespace", "apply the model's HorizontalPodAutoscaler"),
            KubeRule("monitoring.googleapis.com", ("podmonitorings",), _APPLY_NEW,
                     "serving_namespace",
                     "apply the PodMonitoring that scrapes the servers' metrics"),
            KubeRule("networking.gke.io", ("healthcheckpolicies",), _APPLY_NEW,
                     "serving_namespace",
                     "apply the HealthCheckPolicy that has the Gateway's load balancer probe "
                     "a release's Triton readiness (shared/serving/gateway.py "
                     "render_health_check)"),
            KubeRule("jobset.x-k8s.io", ("jobsets",), ("create",), "saxml_namespace",
                     "create the Saxml model-server JobSet in the queue of "
                     "serving.saxml_team (shared/serving/saxml_rollout.py)"),
        ),
    ),
    Function(
        name="reconcile_models",
        description="A tick or a started rollout: observe rollouts in progress, finish "
                    "the healthy ones and roll back the failed or stuck ones; follow the "
                    "model servers of serving Saxml versions and create lost ones again.",
        trigger_topic=_T.model_rollouts,
        dead_letter_topic=f"{_T.model_rollouts}-dead-letter",
        # Ticks come every minute: a failed one is superseded by the next.
        retry=Retry(ack_deadline_seconds=60, minimum_backoff_seconds=10,
                    maximum_backoff_seconds=60, max_delivery_attempts=5),
        memory="512Mi", timeout_seconds=60, concurrency=1, max_instances=1,
        # ACCELOPS_SAXML_PROXY: where the Saxml HTTP proxy answers. It publishes,
        # checks and unpublishes Saxml versions there: the proxy is an internal load
        # balancer in the cluster's VPC (shared/deployment/serving.py).
        env=(*_CLUSTER_ENV, "ACCELOPS_SAXML_PROXY"),
        vpc_egress=True,
        grants=(
            _CLUSTER_ACCESS, _READ_CONFIG,
            # Read-only: the query API of Managed Service for Prometheus needs
            # monitoring.timeSeries.list, which monitoring.viewer is the narrowest
            # predefined role to hold; it writes nothing.
            Grant("roles/monitoring.viewer", "project",
                  "query the servers' request counts and latency in Managed Service "
                  "for Prometheus for the canary's SLO gate "
                  "(shared/serving/release_metrics.py through shared/prometheus.py)"),
        ),
        kube_rules=(
            KubeRule("", ("configmaps",), ("list", "get", "update"), "serving_namespace",
                     "find the rollouts in progress and record their outcome in each "
                     "model's ledger (shared/serving/ledger.py)"),
            KubeRule("apps", ("deployments",), ("get", "create", "patch", "delete"),
                     "serving_namespace",
                     "read a release's progress (shared/serving/triton_rollout.py observe); "
                     "delete a retired release's Deployment (retire_due); apply the serving "
                     "release's own Deployment when finishing a rollback begun before "
                     "releases had one"),
            KubeRule("", ("services",), ("get", "create", "patch", "delete"),
                     "serving_namespace",
                     "delete a retired release's Service; apply the serving release's "
                     "(as for Deployments)"),
            KubeRule("autoscaling", ("horizontalpodautoscalers",),
                     ("get", "create", "patch", "delete"), "serving_namespace",
                     "delete a retired release's HorizontalPodAutoscaler; apply the serving "
                     "release's (as for Deployments)"),
            KubeRule("monitoring.googleapis.com", ("podmonitorings",), _APPLY_NEW,
                     "serving_namespace",
                     "apply the model's PodMonitoring with the serving release's objects"),
            KubeRule("gateway.networking.k8s.io", ("httproutes",), _APPLY, "serving_namespace",
                     "point each model's HTTPRoute at its releases by weight: the canary's "
                     "steps, promotion and rollback (shared/serving/triton_rollout.py "
                     "set_route); read it before retiring a release"),
            KubeRule("networking.gke.io", ("healthcheckpolicies",), ("create", "patch",
                                                                     "delete"),
                     "serving_namespace",
                     "apply the serving release's HealthCheckPolicy with its objects; "
                     "delete a retired release's"),
            KubeRule("", ("pods",), ("list",), "serving_namespace",
                     "restarts and readiness of a new release's Triton pods "
                     "(shared/serving/triton_rollout.py)"),
            KubeRule("jobset.x-k8s.io", ("jobsets",), ("list", "delete"),
                     "saxml_namespace",
                     "follow Saxml model-server JobSets; delete those of a retired or "
                     "rolled-back version, and a serving version's that failed "
                     "(shared/serving/saxml_rollout.py, saxml_servers.py)"),
            KubeRule("jobset.x-k8s.io", ("jobsets",), ("create",), "saxml_namespace",
                     "create a serving Saxml version's model servers again when they are "
                     "lost (shared/serving/saxml_servers.py)"),
            KubeRule("", ("pods",), ("list",), "saxml_namespace",
                     "whether a Saxml version's model servers run, their restarts and "
                     "exits (shared/serving/saxml_rollout.py, saxml_servers.py)"),
        ),
    ),
    Function(
        name="team_usage",
        description="A scheduler tick: each team's chip-hours today and this week, read "
                    "from BigQuery and cached in a ConfigMap for budget checks.",
        trigger_topic=_T.team_usage,
        dead_letter_topic=f"{_T.team_usage}-dead-letter",
        # Ticks come every five minutes and each recomputes everything: a failed one
        # is caught up by the next, so few attempts and a short backoff.
        retry=Retry(ack_deadline_seconds=60, minimum_backoff_seconds=10,
                    maximum_backoff_seconds=60, max_delivery_attempts=5),
        memory="512Mi", timeout_seconds=60, concurrency=1, max_instances=1,
        env=_CLUSTER_ENV,
        grants=(
            Grant("roles/bigquery.dataViewer", "dataset",
                  "read job_usage_daily (shared/jobs/budget/usage_sql.py, shared/bigquery.py)"),
            Grant("roles/bigquery.jobUser", "project",
                  "run the query: BigQuery has no narrower scope for jobs"),
            _CLUSTER_ACCESS,
            _READ_CONFIG,
        ),
        kube_rules=(
            # A create names no object RBAC could match: it cannot be narrowed to one name.
            KubeRule("", ("configmaps",), ("create",), "state_namespace",
                     "create the usage ConfigMap the first time (shared/jobs/budget/usage.py)"),
            KubeRule("", ("configmaps",), ("get", "update"), "state_namespace",
                     "read and rewrite the usage ConfigMap, and only that one "
                     "(shared/jobs/budget/usage.py)", resource_names=(USAGE_CONFIGMAP,)),
        ),
        # It needs BigQuery as well as the cluster: the sandbox's metrics part has one,
        # and its ticks come from the cluster's scheduler.
    ),
)

# The Python of the services' images (their Dockerfiles' python:3.11-slim; Linux
# x86_64, the only platform Cloud Run runs): their requirements install on it alone.
SERVICE_PYTHONS: tuple[str, ...] = ("3.11",)

# Each service's ``requirements``: the distributions its code imports (its entry
# module and what that reaches in shared/), tzdata (zoneinfo on a slim image without
# a time zone database) and, for the two behind gunicorn, gunicorn, which the image
# runs them with. Its image installs these and what they need, pinned as uv.lock pins
# them (terraform/generated/services/<name>_requirements.txt); the library itself is
# not installed, only copied. tests/unit/test_service_images.py holds each list to
# the service's imports.
SERVICES: tuple[Service, ...] = (
    Service(
        name="dashboard",
        description="Load-test reports and charts read from the BigQuery views.",
        port=8080, memory="1Gi", cpu="1", concurrency=20, max_instances=5,
        env=_CONFIG_ENV,
        requirements=("flask", "gunicorn", "matplotlib", "pydantic", "pyyaml", "requests",
                      "google-api-core", "google-auth", "google-cloud-bigquery",
                      "google-cloud-storage", "tzdata"),
        grants=(
            Grant("roles/bigquery.dataViewer", "dataset",
                  "read the views (shared/metrics/loadtest/views.py)"),
            Grant("roles/bigquery.jobUser", "project",
                  "run the queries: BigQuery has no narrower scope for jobs"),
            _READ_CONFIG,
        ),
    ),
    Service(
        name="jobs_api",
        description="The jobs API: submit job requests, list jobs, explain a job's status, "
                    "read its logs, cancel it; callers map to teams by the e-mail of their "
                    "ID token.",
        port=8080, memory="512Mi", cpu="1", concurrency=40, max_instances=5,
        # ACCELOPS_JOBS_API_AUDIENCE: the audiences an ID token must name (the
        # service's URL; services/jobs_api/auth.py).
        env=(*_CLUSTER_ENV, "ACCELOPS_JOBS_API_AUDIENCE"),
        requirements=("flask", "gunicorn", "pydantic", "pyyaml", "requests", "kubernetes",
                      "google-api-core", "google-auth", "google-cloud-bigquery",
                      "google-cloud-container", "google-cloud-pubsub",
                      "google-cloud-storage", "tzdata"),
        # People and CI call it from outside the project's networks; Cloud Run lets
        # only its invokers through, and the service checks their tokens again.
        ingress="all",
        publishes_to=(_T.job_requests,),
        grants=(
            Grant("accelopsClusterAccess", "cluster",
                  "get_cluster for the endpoint and CA (shared/gke.py), then the "
                  "Kubernetes API (shared/kube.py); list node pools: a provisioning "
                  "job's slice status (shared/jobs/lookup.py)"),
            _READ_CONFIG,
            Grant("roles/bigquery.dataViewer", "dataset",
                  "read job_events: why a request was rejected (shared/jobs/lookup.py)"),
            Grant("roles/bigquery.jobUser", "project",
                  "run that query: BigQuery has no narrower scope for jobs"),
        ),
        kube_rules=(
            KubeRule("jobset.x-k8s.io", ("jobsets",), ("get", "list"), "cluster",
                     "list jobs; find one by request id, name or namespace/name "
                     "(shared/jobs/lookup.py)"),
            KubeRule("jobset.x-k8s.io", ("jobsets",), ("delete",), "team_namespaces",
                     "cancel a job: delete its JobSet (shared/jobs/lookup.py cancel_job)"),
            KubeRule("kueue.x-k8s.io", ("workloads",), ("list",), "cluster",
                     "a job's Workload, and for a queued one the Workloads ahead of it"),
            KubeRule("kueue.x-k8s.io", ("localqueues",), ("list",), "cluster",
                     "which ClusterQueue a queued job's LocalQueue feeds"),
            KubeRule("kueue.x-k8s.io", ("clusterqueues",), ("get",), "cluster",
                     "a queued job's ClusterQueue: its quota and queueing strategy"),
            KubeRule("", ("pods",), ("list",), "cluster",
                     "a job's pods: running per slice, restarts, the failed pod's "
                     "termination message"),
            KubeRule("", ("pods/log",), ("get",), "team_namespaces",
                     "a job's logs (GET /v1/jobs/{id}/logs)"),
            KubeRule("", ("configmaps",), ("get",), "state_namespace",
                     "reconcile_slices' record: a provisioning job's pool operations and "
                     "failed creates (shared/slices/record.py)", resource_names=(RECORD_NAME,)),
        ),
        wsgi_app="services.jobs_api.main:app",
    ),
    Service(
        name="loadgen",
        description="Locust against a Triton or Saxml server; publishes each request "
                    "as a metric record.",
        port=8089, memory="2Gi", cpu="2", concurrency=1, max_instances=1,
        env=("ACCELOPS_PROJECT",),
        # Locust serves its own web UI (no gunicorn); flask: the plugin answers a test
        # without a model on it; grpcio: the plugin prepares it for gevent before the
        # Pub/Sub client loads it.
        requirements=("locust", "flask", "grpcio", "pydantic", "pyyaml", "google-api-core",
                      "google-auth", "google-cloud-pubsub", "google-cloud-storage", "tzdata"),
        publishes_to=(_T.loadtest_metrics,),
    ),
)

SCHEDULER_JOBS: tuple[SchedulerJob, ...] = (
    SchedulerJob(
        name="reconcile-slices-every-minute", schedule="* * * * *", topic=_T.slices_reconcile,
        description="The level-triggered reconcile of TPU node pools: catches every "
                    "change a missed trigger would have announced.",
        attributes={"trigger": "schedule"},
    ),
    SchedulerJob(
        name="pool-schedule-every-5-minutes", schedule="*/5 * * * *", topic=_T.pool_schedule,
        description="Applies the off-hours schedules: each tick computes what every "
                    "scheduled pool should be now, so a missed tick is caught up.",
        attributes={"trigger": "schedule"},
    ),
    SchedulerJob(
        name="team-usage-every-5-minutes", schedule="*/5 * * * *", topic=_T.team_usage,
        description="Caches each budgeted team's chip-hours (today, this week) for "
                    "submit_job's budget check; a missed tick is caught up by the next.",
        attributes={"trigger": "schedule"},
    ),
    SchedulerJob(
        name="reconcile-models-every-minute", schedule="* * * * *", topic=_T.model_rollouts,
        description="The level-triggered check of model rollouts: finishes or rolls back "
                    "each one even when no event announces its change.",
        attributes={"trigger": "schedule"},
    ),
)

LOG_SINKS: tuple[LogSink, ...] = (
    LogSink(
        name="accelops-failed-scheduling", topic=_T.slices_reconcile,
        description="Pods that cannot be scheduled (a slice is missing): reconcile now.",
        filter=('resource.type="k8s_pod" AND '
                'logName="projects/${project_id}/logs/events" AND '
                'resource.labels.cluster_name="${cluster_name}" AND '
                'jsonPayload.reason="FailedScheduling"'),
    ),
)

# The identities the model servers and the load generator on GKE run as (Workload
# Identity). Servers only read releases: a release is immutable once copied, and
# nothing a server does can change what another rollout deploys. The load generator
# only publishes its records.
WORKLOAD_IDENTITIES: tuple[WorkloadIdentity, ...] = (
    WorkloadIdentity(
        name="triton",
        description="Triton inference servers: load model repositories of releases.",
        kubernetes_service_account=_SERVING.triton_service_account,
        scopes=("serving_namespace",),
        grants=(Grant("roles/storage.objectViewer", "releases_bucket",
                      "load the model repository of a release (--model-repository "
                      "gs://.../releases/...)"),),
    ),
    WorkloadIdentity(
        name="saxml",
        description="The Saxml admin server, HTTP proxy and model servers.",
        kubernetes_service_account=_SERVING.saxml_service_account,
        # The admin server and proxy run in the serving namespace; model servers are
        # JobSets queued in the Saxml team's namespace.
        scopes=("serving_namespace", "saxml_namespace"),
        grants=(
            Grant("roles/storage.objectViewer", "releases_bucket",
                  "model servers load a release's checkpoint"),
            Grant("roles/storage.objectAdmin", "sax_bucket",
                  "the admin server rewrites its state and address under sax-root/; "
                  "the proxy and model servers read them to find it"),
        ),
    ),
    WorkloadIdentity(
        name="locust",
        description="The load generator on GKE: a Locust master and its workers, which "
                    "publish one metric record per request.",
        kubernetes_service_account=_SERVING.locust_service_account,
        # Beside the model servers, whose Services are cluster-internal.
        scopes=("serving_namespace",),
        grants=(Grant("roles/pubsub.publisher", "topic",
                      "each worker publishes its request and run records "
                      "(services/loadgen/metrics_plugin.py)", _T.loadtest_metrics),),
    ),
)

# The identity Pub/Sub signs its push requests as (OIDC), allowed to invoke each
# function and nothing else.
PUSH_INVOKER = "accelops-pubsub-push"
# The identity Eventarc triggers deliver as: may receive events (project-level
# role, the only level it exists at) and invoke the functions it feeds.
EVENTARC_INVOKER = "accelops-eventarc"
# The identity Cloud Build builds the functions as (build_config.service_account):
# without one, a build runs as the project's default build account, which projects
# created since mid-2024 (or organizations that disable default grants) leave
# without the roles a build needs. Terraform grants it exactly those.
FUNCTION_BUILDER = "accelops-function-build"

# The distributions the functions' code imports (functions/main.py and what it
# reaches in shared/), for the source archive's requirements.txt: these and what they
# need, pinned as uv.lock pins them (bounds come from pyproject.toml, through the
# lock). tzdata backs zoneinfo on images without a time zone database.
# tests/unit/test_terraform_source.py holds this to the imports.
FUNCTION_REQUIREMENTS: tuple[str, ...] = (
    "functions-framework",
    "cloudevents",
    "pydantic",
    "pyyaml",
    "kubernetes",
    "google-auth",
    "google-api-core",
    "google-cloud-container",
    "google-cloud-pubsub",
    "google-cloud-storage",
    "google-cloud-bigquery",
    "requests",
    "tzdata",
)
# The Python versions the functions may run on (terraform/modules/functions: the
# runtime variable's python311 and python312): the requirements install on each.
FUNCTION_PYTHONS: tuple[str, ...] = ("3.11", "3.12")


def function(name: str) -> Function:
    """The function of that entry point (KeyError naming the known ones)."""
    for spec in FUNCTIONS:
        if spec.name == name:
            return spec
    raise KeyError(f"no function {name!r}; known: {[f.name for f in FUNCTIONS]}")


def dead_letter_topics() -> tuple[str, ...]:
    return tuple(f.dead_letter_topic for f in FUNCTIONS)


def topics() -> tuple[str, ...]:
    """Every topic of the system, sorted: triggers, publish targets, dead letters."""
    named = {f.trigger_topic for f in FUNCTIONS} | set(dead_letter_topics())
    named |= {t for f in FUNCTIONS for t in f.publishes_to}
    named |= {t for s in SERVICES for t in s.publishes_to}
    named |= {j.topic for j in SCHEDULER_JOBS} | {s.topic for s in LOG_SINKS}
    return tuple(sorted(named))


TOPICS = topics()
