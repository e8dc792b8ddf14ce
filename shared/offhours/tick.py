"""One pool_schedule tick: observe every cluster in scope, plan, act, audit.

API calls per tick are O(clusters + changes): per cluster one node-pool list, three
Kubernetes lists (nodes, live pods, Kueue workloads) and one of saved pools; then
one call per step. Clusters are observed, and pools acted on, in parallel (GKE runs
operations on different pools at once), so a sweep over many pools costs a few
round trips, not one per pool.

Never waits for an operation: the next tick sees its outcome. GKE's "busy" answers
(another operation on the pool, an upgrade, the 429 limit) leave the pool for the
next tick. Audit rows are published (one message per tick) after the operations
they report have started and before the saved state records them as reported, so
a tick that fails in between is reported again, under the same row keys. A
transient failure anywhere raises at the end, after everything else was done, so
Pub/Sub redelivers the tick.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from shared import gke, pubsub
from shared.config import AccelopsConfig, Settings
from shared.errors import (
    ConflictError,
    NotFoundError,
    OperationInProgressError,
    PermanentError,
    RateLimitedError,
    TransientError,
)
from shared.jobspec.labels import NODEPOOL_LABEL
from shared.kube import NODES, PODS, WORKLOADS, KubeClient, get_client
from shared.log import get_logger
from shared.metrics.pool_action import PoolActionRecord, pool_action_message
from shared.offhours import store
from shared.offhours.model import ClusterRef, PoolPlan, PoolView, SavedPool, Step
from shared.offhours.observe import build_pools
from shared.offhours.plan import plan_cluster

__all__ = ["ClusterPlan", "TickReport", "cluster_refs", "plan_tick", "run_tick"]

log = get_logger("accelops.schedule")

# Parallel API calls: clusters observed at once, and pool operations started at once.
WORKERS = 8
_LIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"


def cluster_refs(settings: Settings, config: AccelopsConfig) -> list[ClusterRef]:
    """The clusters in scope: pool_schedule.clusters, else the environment's."""
    if config.pool_schedule.clusters:
        return [ClusterRef.parse(path) for path in config.pool_schedule.clusters]
    settings.require("project", "location", "cluster")
    return [ClusterRef(str(settings.project), str(settings.location), str(settings.cluster))]


def _settings_for(settings: Settings, ref: ClusterRef) -> Settings:
    home = (settings.project, settings.location, settings.cluster) == (
        ref.project, ref.location, ref.name)
    # KUBECONFIG names the home cluster; any other is reached through GKE discovery.
    return replace(settings, project=ref.project, location=ref.location, cluster=ref.name,
                   kubeconfig=settings.kubeconfig if home else None)


@dataclass
class ClusterPlan:
    """One cluster observed and planned."""

    ref: ClusterRef
    settings: Settings
    kube: KubeClient | None
    pools: list[PoolView] = field(default_factory=list)
    saved: dict[str, SavedPool] = field(default_factory=dict)
    plans: list[PoolPlan] = field(default_factory=list)
    error: str | None = None
    transient: bool = False


def _observe(settings: Settings, config: AccelopsConfig, ref: ClusterRef) -> ClusterPlan:
    local = _settings_for(settings, ref)
    try:
        kube = get_client(local)
        specs = gke.list_node_pool_specs(local)
        nodes = kube.list(NODES, label_selector=NODEPOOL_LABEL)
        pods = kube.list(PODS, field_selector=_LIVE_PODS)
        workloads = kube.list(WORKLOADS)
        saved = store.load_saved(kube, config.slices.state_namespace)
    except (TransientError, PermanentError) as exc:
        return ClusterPlan(ref, local, None, error=str(exc),
                           transient=isinstance(exc, TransientError))
    return ClusterPlan(ref, local, kube, build_pools(ref.path, specs, nodes, pods, workloads),
                       saved)


def _now(clusters: list[ClusterPlan]) -> dt.datetime:
    # The cluster's clock (the sandbox's simulated one), like reconcile_slices.
    for plan in clusters:
        if plan.kube is not None and plan.kube.server_time() is not None:
            return dt.datetime.fromtimestamp(plan.kube.server_time() or 0.0, dt.UTC)
    return dt.datetime.now(dt.UTC)


def plan_tick(settings: Settings, config: AccelopsConfig, at: dt.datetime | None = None, *,
              force: bool = False) -> tuple[dt.datetime, list[ClusterPlan]]:
    """Observe every cluster in scope (in parallel) and plan at ``at`` (default: now)."""
    refs = cluster_refs(settings, config)
    with ThreadPoolExecutor(max_workers=min(WORKERS, len(refs))) as pool:
        clusters = list(pool.map(lambda ref: _observe(settings, config, ref), refs))
    when = at or _now(clusters)
    for cluster in clusters:
        if cluster.kube is not None:
            cluster.plans = plan_cluster(
                cluster.pools, cluster.saved, config.schedules,
                config.pool_schedule.lead_time_minutes, when, force=force,
                max_operations=config.pool_schedule.max_concurrent_operations)
    return when, clusters


def _operate(settings: Settings, step: Step) -> str:
    if step.kind == "delete":
        return gke.delete_node_pool(settings, step.pool)
    if step.kind == "set_size":
        return gke.set_node_pool_size(settings, step.pool, int(step.size or 0))
    if step.kind == "set_autoscaling":
        return gke.set_node_pool_autoscaling(settings, step.pool, step.autoscaling or {})
    if step.kind == "create":
        try:
            return gke.create_node_pool_from_spec(settings, step.spec or {})
        except ConflictError:
            return "(already exists)"
    raise ValueError(f"not an operation: {step.kind}")


@dataclass(frozen=True, slots=True)
class Outcome:
    plan: PoolPlan
    done: bool  # every step carried out
    result: str  # what happened, for people
    transient: bool = False


def _carry_out(cluster: ClusterPlan, namespace: str, plan: PoolPlan) -> Outcome:
    assert cluster.kube is not None
    results = []
    try:
        for step in plan.steps:
            if step.kind == "save":
                assert step.saved is not None
                store.save_new(cluster.kube, namespace, step.saved)
            elif step.kind == "forget":
                store.forget(cluster.kube, namespace, step.pool)
            else:
                try:
                    results.append(f"operation {_operate(cluster.settings, step)}")
                except NotFoundError:
                    results.append("the pool is gone")
    except (OperationInProgressError, RateLimitedError) as exc:
        return Outcome(plan, False, f"GKE busy, left for the next tick: {exc}")
    except TransientError as exc:
        return Outcome(plan, False, f"failed, retried: {exc}", transient=True)
    except PermanentError as exc:
        log.error(f"pool {plan.pool}: {exc}", cluster=plan.cluster, pool=plan.pool)
        return Outcome(plan, False, f"refused: {exc}")
    return Outcome(plan, True, "; ".join(results) or "done")


@dataclass
class TickReport:
    at: dt.datetime
    clusters: list[ClusterPlan]
    outcomes: list[Outcome]
    audits: int = 0

    def lines(self) -> list[str]:
        out = [f"{c.ref.path}: {'unreachable' if c.transient else 'refused'}: {c.error}"
               for c in self.clusters if c.error]
        for outcome in self.outcomes:
            plan = outcome.plan
            tail = f" -> {outcome.result}" if plan.steps else ""
            out.append(f"{plan.cluster.rsplit('/', 1)[-1]}/{plan.pool}: {plan.note}{tail}")
        return out

    def summary(self) -> str:
        started = sum(1 for o in self.outcomes if o.done and any(s.operation
                                                                  for s in o.plan.steps))
        skipped = sum(1 for o in self.outcomes if o.plan.skipped)
        scheduled = sum(1 for c in self.clusters for p in c.pools
                        if p.schedule and not p.managed)
        return (f"{len(self.clusters)} cluster(s), {scheduled} pool(s) on a schedule, "
                f"{sum(len(c.saved) for c in self.clusters)} saved while removed: "
                f"{started} operation(s) started, {skipped} skipped as busy, "
                f"{self.audits} audit row(s)")


Publish = Callable[[list[PoolActionRecord]], None]


def _publisher(settings: Settings, config: AccelopsConfig) -> Publish:
    def publish(records: list[PoolActionRecord]) -> None:
        settings.require("project")
        data, attributes = pool_action_message(records)
        pubsub.publish(str(settings.project), config.topics.loadtest_metrics, data,
                       attributes)

    return publish


def run_tick(settings: Settings, config: AccelopsConfig, *, force: bool = False,
             publish: Publish | None = None, at: dt.datetime | None = None) -> TickReport:
    """Plan and carry out one tick (as if at ``at``; default: the cluster's now).
    Raises TransientError after the tick when a cluster could not be read or a call
    failed transiently (Pub/Sub retries)."""
    started = time.monotonic()
    when, clusters = plan_tick(settings, config, at, force=force)
    namespace = config.slices.state_namespace
    work = [(cluster, plan) for cluster in clusters for plan in cluster.plans]
    with ThreadPoolExecutor(max_workers=max(1, min(WORKERS, len(work)))) as pool:
        outcomes = list(pool.map(lambda item: _carry_out(item[0], namespace, item[1]), work))
    audited = [(cluster, o) for (cluster, _), o in zip(work, outcomes, strict=True)
               if o.plan.audit is not None and (o.done or o.plan.skipped)]
    records = [o.plan.audit.record(when) for _, o in audited if o.plan.audit is not None]
    if records:
        (publish or _publisher(settings, config))(records)
    for cluster, outcome in audited:
        if outcome.plan.after_audit is not None and cluster.kube is not None:
            store.update(cluster.kube, namespace, outcome.plan.after_audit)
    report = TickReport(when, clusters, outcomes, len(records))
    for line in report.lines():
        log.info(line)
    # ``at``: the instant the tick planned for, which is not the log's time when
    # the cluster's clock is not the local one (the sandbox's simulated clock).
    log.info(f"pool schedule: {report.summary()}", at=when.isoformat(),
             seconds=round(time.monotonic() - started, 3))
    failures = [c.error for c in clusters if c.transient] + [
        o.result for o in outcomes if o.transient]
    if failures:
        raise TransientError(f"pool schedule incomplete, retried: {failures[0]}")
    return report
