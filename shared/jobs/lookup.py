"""Reading jobs off the cluster (and rejections off BigQuery) for ``accelops jobs`` and the
jobs API: list, status, cancel, logs.

Every call is a small constant number of API requests, however many JobSets exist:

* a job is found by its request id through the request-key label (one list call with a
  label selector), by ``namespace/name`` (one get) or by a bare name (one list with the
  field selector ``metadata.name``) — never by reading every JobSet;
* ``list_jobs`` is one JobSet list and one Workload list (in the team's namespace, or
  cluster-wide);
* ``job_status`` adds, by state: its Workload (label ``kueue.x-k8s.io/job-uid``), for a
  queued job the LocalQueues, its ClusterQueue and the Workloads (to name those ahead),
  otherwise its pods (by the JobSet-name label), and while its slices are made the slice
  record ConfigMap and GKE's node pools (one list each);
* a request id no JobSet holds is looked up among the ``rejected`` rows of BigQuery's
  ``job_events`` (one parameterised query).

"Now" is the cluster's clock (the API server's Date header), like every decision that
compares it with timestamps the cluster wrote. Parts a caller may not be allowed to
read (the slice record, GKE's node pools) are skipped with a note in the explanation.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

from shared import bigquery, gke
from shared.config import AccelopsConfig, Settings
from shared.errors import (
    ConfigError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PermanentError,
    PermissionDeniedError,
    TransientError,
)
from shared.jobs.status.explain import (
    Observation,
    explain,
    explain_rejection,
    job_state,
    jobset_ref,
    leader_or_failed_pod,
    summarize,
)
from shared.jobs.status.model import JobStatus, JobSummary
from shared.jobspec.labels import (
    ANNOTATION_REQUEST_ID,
    JOBSET_NAME_LABEL,
    KUEUE_JOB_UID_LABEL,
    LABEL_QUEUE,
    LABEL_REQUEST_KEY,
)
from shared.kube import JOBSETS, PODS, WORKLOADS, KubeClient, Resource, get_client
from shared.metrics.names import Names
from shared.names import request_key
from shared.slices.record import load_record

__all__ = ["CLUSTER_QUEUES", "LOCAL_QUEUES", "cancel_job", "find_jobset", "job_logs",
           "job_status", "list_jobs", "team_namespaces"]

LOCAL_QUEUES = Resource("kueue.x-k8s.io", "v1beta1", "localqueues")
CLUSTER_QUEUES = Resource("kueue.x-k8s.io", "v1beta1", "clusterqueues", namespaced=False)
# A Kubernetes object name (DNS subdomain): only such an id can be a JobSet name.
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
# `at` is a reserved word in BigQuery's SQL: quoted.
_REJECTED_SQL = (
    "SELECT request_id, team, tpu_type, slices, reason, field, rule, `at` FROM {table} "
    "WHERE event = 'rejected' AND request_id = @request_id ORDER BY `at` DESC LIMIT 1")


def team_namespaces(config: AccelopsConfig) -> dict[str, str]:
    """namespace -> team, from the configuration."""
    return {team.namespace: name for name, team in config.teams.items()}


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    return dict(obj.get("metadata") or {})


# ------------------------------------------------------------------------ finding
def find_jobset(kube: KubeClient, job_id: str) -> dict[str, Any] | None:
    """The JobSet a job id names: a request id, ``namespace/name`` or a bare name.

    A request id reused for several JobSets names the earliest created (the one
    submit_job treats as its owner). PermanentError when a bare name is taken in
    several namespaces (the message lists them); None when nothing matches.
    """
    if job_id.count("/") == 1:
        namespace, name = job_id.split("/")
        if _NAME.match(namespace) and _NAME.match(name):
            found = kube.find(JOBSETS, name, namespace)
            if found is not None:
                return found
    holders = [j for j in kube.list(JOBSETS,
                                    label_selector=f"{LABEL_REQUEST_KEY}={request_key(job_id)}")
               if (_meta(j).get("annotations") or {}).get(ANNOTATION_REQUEST_ID) == job_id]
    if holders:
        return min(holders, key=lambda j: (str(_meta(j).get("creationTimestamp", "")),
                                           jobset_ref(j)))
    if not _NAME.match(job_id):
        return None
    named = kube.list(JOBSETS, field_selector=f"metadata.name={job_id}")
    if len(named) > 1:
        raise PermanentError(
            f"{job_id!r} names JobSets in several namespaces: "
            f"{', '.join(sorted(jobset_ref(j) for j in named))}; say which as NAMESPACE/NAME",
            field="id", rule="must name one job")
    return named[0] if named else None


def _rejection(settings: Settings, config: AccelopsConfig, job_id: str) -> dict[str, Any] | None:
    """The latest ``rejected`` row of the request id; None when there is none. Raises
    NotFoundError saying why it could not look when BigQuery cannot be read."""
    if not settings.project:
        raise NotFoundError(f"no job {job_id!r} on the cluster, and rejected requests "
                            "cannot be looked up without ACCELOPS_PROJECT (BigQuery)")
    try:
        names = Names.of(settings.project, config.metrics)
        rows = bigquery.query(settings.project,
                              _REJECTED_SQL.format(table=names.sql(names.job_events_table)),
                              {"request_id": job_id})
    except (NotFoundError, TransientError) as exc:
        raise NotFoundError(f"no job {job_id!r} on the cluster, and rejected requests could "
                            f"not be read from BigQuery: {exc.message}") from exc
    return rows[0] if rows else None


def _unknown(job_id: str) -> NotFoundError:
    return NotFoundError(
        f"no job {job_id!r}: no JobSet has that request id or name, and no rejection of "
        "that request id is recorded. A request published moments ago may not have been "
        "processed yet; try again in a few seconds.", field="id", rule="must name a job")


def _require(kube: KubeClient, settings: Settings, config: AccelopsConfig,
             job_id: str) -> dict[str, Any]:
    """The job's JobSet; ConflictError when the request was rejected (there is none),
    NotFoundError when nothing is known of it."""
    jobset = find_jobset(kube, job_id)
    if jobset is not None:
        return jobset
    if _rejection(settings, config, job_id) is not None:
        raise ConflictError(f"request {job_id!r} was rejected, so no job was created "
                            f"(see `accelops jobs status {job_id}`)")
    raise _unknown(job_id)


# ------------------------------------------------------------------------- reading
def list_jobs(settings: Settings, config: AccelopsConfig, *,
              team: str | None = None) -> list[JobSummary]:
    """Every job on the cluster (of ``team`` only, when given), oldest first.

    Two list calls: the JobSets and the Workloads (in the team's namespace, or in all).
    NotFoundError for a team the configuration does not know.
    """
    namespace = None
    if team is not None:
        policy = config.teams.get(team)
        if policy is None:
            raise NotFoundError(f"no team {team!r} in the configuration "
                                f"(teams: {', '.join(sorted(config.teams)) or 'none'})",
                                field="team")
        namespace = policy.namespace
    kube = get_client(settings)
    jobsets = kube.list(JOBSETS, namespace)
    workloads = {str((_meta(w).get("labels") or {}).get(KUEUE_JOB_UID_LABEL, "")): w
                 for w in kube.list(WORKLOADS, namespace, label_selector=KUEUE_JOB_UID_LABEL)}
    teams = team_namespaces(config)
    jobs = [summarize(j, workloads.get(str(_meta(j).get("uid", ""))), teams) for j in jobsets]
    return sorted(jobs, key=lambda j: (j.created_at.timestamp() if j.created_at else 0.0,
                                       j.jobset or ""))


def _now(kube: KubeClient) -> float:
    return kube.server_time() or time.time()


def _slice_parts(kube: KubeClient, settings: Settings, config: AccelopsConfig,
                 key: str) -> dict[str, Any]:
    """The slice record's operations and failure for the JobSet ``key``, and GKE's
    node pools; what cannot be read becomes a note."""
    parts: dict[str, Any] = {}
    notes: list[str] = []
    try:
        record = load_record(kube, config.slices.state_namespace)
        parts["operations"] = [op for op in record.operations if op.get("jobset") == key]
        parts["failure"] = record.failure_views().get(key)
    except PermissionDeniedError as exc:
        notes.append(f"(reconcile_slices' record could not be read: {exc.message})")
    if settings.project and settings.location and settings.cluster:
        try:
            parts["pools"] = {p.name: p.status for p in gke.list_node_pools(settings)}
        except (PermissionDeniedError, ConfigError) as exc:
            notes.append(f"(GKE's node pools could not be read: {exc.message})")
    else:
        notes.append("(GKE's node pools are not read: ACCELOPS_PROJECT, ACCELOPS_LOCATION "
                     "and ACCELOPS_CLUSTER are not all set)")
    parts["notes"] = tuple(notes)
    return parts


def _observe(kube: KubeClient, settings: Settings, config: AccelopsConfig,
             jobset: dict[str, Any]) -> Observation:
    meta = _meta(jobset)
    namespace, uid = str(meta.get("namespace", "")), str(meta.get("uid", ""))
    teams = team_namespaces(config)
    queued = bool((jobset.get("spec") or {}).get("suspend")) and not meta.get(
        "deletionTimestamp")
    parts: dict[str, Any] = {}
    if queued:
        # The Workloads of every namespace: its own, and those sharing its ClusterQueue.
        workloads = kube.list(WORKLOADS, label_selector=KUEUE_JOB_UID_LABEL)
        mine = [w for w in workloads
                if (_meta(w).get("labels") or {}).get(KUEUE_JOB_UID_LABEL) == uid]
    else:
        workloads = []
        mine = kube.list(WORKLOADS, namespace, label_selector=f"{KUEUE_JOB_UID_LABEL}={uid}")
    workload = mine[0] if mine else None
    state = job_state(jobset, workload)
    if state == "queued":
        queue = str((meta.get("labels") or {}).get(LABEL_QUEUE, ""))
        local_queues = kube.list(LOCAL_QUEUES)
        local = next((q for q in local_queues if _meta(q).get("namespace") == namespace
                      and _meta(q).get("name") == queue), None)
        cq_name = str(((local or {}).get("spec") or {}).get("clusterQueue") or "")
        parts.update(local_queue=local, local_queues=local_queues,
                     cluster_queue=kube.find(CLUSTER_QUEUES, cq_name) if cq_name else None,
                     workloads=workloads)
    else:
        parts["pods"] = kube.list(PODS, namespace,
                                  label_selector=f"{JOBSET_NAME_LABEL}={meta.get('name')}")
        if state in ("provisioning", "running") and config.slices.enabled:
            parts.update(_slice_parts(kube, settings, config, jobset_ref(jobset)))
    return Observation(jobset=jobset, now=_now(kube), workload=workload, teams=teams,
                       slices_enabled=config.slices.enabled, **parts)


def job_status(settings: Settings, config: AccelopsConfig, job_id: str) -> JobStatus:
    """The job's status, explained. NotFoundError when nothing is known of ``job_id``."""
    kube = get_client(settings)
    jobset = find_jobset(kube, job_id)
    if jobset is not None:
        return explain(_observe(kube, settings, config, jobset))
    row = _rejection(settings, config, job_id)
    if row is None:
        raise _unknown(job_id)
    return explain_rejection(row)


# ------------------------------------------------------------------------- acting
def cancel_job(settings: Settings, config: AccelopsConfig, job_id: str, *,
               teams: frozenset[str] | None) -> JobStatus:
    """Delete the job's JobSet (background propagation: Kubernetes removes its Jobs and
    pods; reconcile_slices then deletes its node pools as for any finished job).

    ``teams``: the teams the caller may act for (None: every team). ForbiddenError for
    another team's job, naming whose it is; ConflictError for a rejected request;
    NotFoundError for an unknown id.
    """
    kube = get_client(settings)
    jobset = _require(kube, settings, config, job_id)
    meta = _meta(jobset)
    owners = team_namespaces(config)
    team = owners.get(str(meta.get("namespace", "")))
    if teams is not None and (team is None or team not in teams):
        whose = f"team {team}'s" if team else f"namespace {meta.get('namespace')}'s"
        allowed = ", ".join(sorted(teams)) or "no team"
        raise ForbiddenError(f"{jobset_ref(jobset)} is {whose} job; you may cancel jobs of "
                             f"{allowed} only", field="id", rule="must be a job of your team")
    kube.delete(JOBSETS, str(meta["name"]), str(meta["namespace"]))
    after = kube.find(JOBSETS, str(meta["name"]), str(meta["namespace"]))
    if after is None or after.get("metadata", {}).get("uid") != meta.get("uid"):
        # Deleted at once (no finalizer held it): its status as of the deletion.
        after = {**jobset, "metadata": {**meta, "deletionTimestamp": time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(_now(kube)))}}
    return explain(Observation(jobset=after, now=_now(kube), teams=owners,
                               slices_enabled=config.slices.enabled))


def job_logs(settings: Settings, config: AccelopsConfig, job_id: str, *,
             pod: str | None = None, tail_lines: int | None = None) -> str:
    """The log of one of the job's pods: ``pod``, else the first failed one, else the
    leader (slice 0, worker 0). NotFoundError when the job or the pod does not exist
    (the message lists its pods), PermanentError when the pod has not started."""
    kube = get_client(settings)
    jobset = _require(kube, settings, config, job_id)
    meta = _meta(jobset)
    namespace = str(meta["namespace"])
    pods = kube.list(PODS, namespace, label_selector=f"{JOBSET_NAME_LABEL}={meta['name']}")
    names = sorted(str(_meta(p).get("name")) for p in pods)
    if pod is not None:
        if pod not in names:
            raise NotFoundError(f"{jobset_ref(jobset)} has no pod {pod!r}; its pods: "
                                f"{', '.join(names) or 'none'}", field="pod")
        chosen = pod
    else:
        leader = leader_or_failed_pod(pods)
        if leader is None:
            raise NotFoundError(f"{jobset_ref(jobset)} has no pods yet (state "
                                f"{job_state(jobset, None)}): see `accelops jobs status "
                                f"{job_id}`", field="id")
        chosen = str(_meta(leader).get("name"))
    return kube.read_log(chosen, namespace, tail_lines=tail_lines)
