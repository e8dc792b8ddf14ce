"""``team_usage``: every team's chip-hours, read from BigQuery and cached in a ConfigMap.

A Cloud Scheduler tick every five minutes runs :func:`refresh_usage`: one read of the
ConfigMap (which also gives the cluster's clock), one query of ``job_usage_daily`` for
every team with a budget (``shared.jobs.budget.usage_sql``), one write of the ConfigMap
:data:`~shared.jobs.budget.USAGE_CONFIGMAP` in ``slices.state_namespace``. ``submit_job``
reads that ConfigMap and never waits on BigQuery (``shared.jobs.budget.gate``).

Every tick recomputes the whole snapshot, so the content of the message never matters,
a duplicate is harmless and a missed tick is caught up by the next. The write is
conditional on the version read: should two runs overlap, the later write fails with
409 and leaves the other's snapshot, which is as fresh. With no team having a budget
a tick makes no call at all.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from shared import bigquery, configmaps
from shared.config import AccelopsConfig, Settings, load_config_or_retry
from shared.configmaps import StoredConfigMap
from shared.errors import AlreadyExistsError, ConflictError, DeploymentError, NotFoundError
from shared.events import PubSubMessage
from shared.jobs.budget.model import USAGE_CONFIGMAP, USAGE_KEY, UsageSnapshot, has_budget
from shared.jobs.budget.usage_sql import usage_params, usage_query, usage_snapshot
from shared.jobspec.labels import LABEL_MANAGED_BY
from shared.kube import KubeClient, get_client
from shared.log import get_logger
from shared.metrics.names import Names

__all__ = ["UsageReport", "budget_teams", "on_message", "refresh_usage"]

log = get_logger("accelops.usage")


@dataclass(frozen=True, slots=True)
class UsageReport:
    """What one run did: the snapshot it computed (None: no team has a budget) and
    whether it was written (False: a concurrent run wrote first)."""

    snapshot: UsageSnapshot | None
    written: bool


def budget_teams(config: AccelopsConfig) -> list[str]:
    """The teams with a daily or weekly budget, sorted."""
    return sorted(name for name, team in config.teams.items() if has_budget(team.budget))


def on_message(message: PubSubMessage) -> UsageReport:
    """The Pub/Sub handler: any message is a tick."""
    settings = Settings.from_env()
    return refresh_usage(settings, load_config_or_retry(settings))


def refresh_usage(settings: Settings, config: AccelopsConfig) -> UsageReport:
    """Query the usage of every team with a budget and write the ConfigMap.

    Raises DeploymentError when ``ACCELOPS_PROJECT`` is unset or the view is missing,
    TransientError when BigQuery or the Kubernetes API cannot be reached.
    """
    teams = budget_teams(config)
    if not teams:
        log.info("no team has a budget: nothing to refresh")
        return UsageReport(None, written=False)
    settings.require("project")
    names = Names.of(str(settings.project), config.metrics)
    namespace = config.slices.state_namespace
    kube = get_client(settings)
    current = configmaps.find(kube, USAGE_CONFIGMAP, namespace)
    # The cluster's clock, which submit_job compares the snapshot's age with.
    now = datetime.fromtimestamp(kube.server_time() or time.time(), UTC)
    try:
        rows = bigquery.query(names.project, usage_query(names), usage_params(teams, now))
    except NotFoundError as exc:
        raise DeploymentError(f"team usage cannot be read: {exc.message} (create the views "
                              "with `accelops bq init`)") from exc
    snapshot = usage_snapshot(rows, teams, now)
    written = _write(kube, namespace, snapshot, current)
    log.info("team usage refreshed" if written else
             "team usage computed; a concurrent run wrote it first",
             as_of=snapshot.as_of.isoformat(),
             usage={team: usage.model_dump() for team, usage in snapshot.teams.items()})
    return UsageReport(snapshot, written)


def _write(kube: KubeClient, namespace: str, snapshot: UsageSnapshot,
           current: StoredConfigMap | None) -> bool:
    try:
        configmaps.write(kube, USAGE_CONFIGMAP, namespace,
                         {USAGE_KEY: snapshot.model_dump_json()},
                         version=current.version if current is not None else None,
                         labels={LABEL_MANAGED_BY: "accelops"})
    except (AlreadyExistsError, ConflictError):
        return False
    return True
