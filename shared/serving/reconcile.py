"""reconcile_models' core: every tick, move every active rollout on and follow the
model servers of every serving Saxml version.

Each message (a Cloud Scheduler tick, or deploy_model's nudge after it started a
rollout) only triggers a pass over every model's ledger, so duplicates and lost
messages are harmless: the next tick sees the same state. A ledger another writer
changed during the pass is left for the next tick rather than failing the rest.

A Saxml version that serves needs its model servers for as long as it serves:
:mod:`shared.serving.saxml_servers` records their crashes and a loss of the whole set
in the ledger, and creates lost servers again once the ledger holds it. (A Triton
version's servers are a Deployment's pods, which Kubernetes keeps.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from shared.config import AccelopsConfig, Settings, load_config_or_retry
from shared.events import PubSubMessage
from shared.kube import KubeClient, get_client
from shared.log import get_logger
from shared.serving.ledger import Ledger, LedgerChangedError, list_ledgers, save_ledger
from shared.serving.release_metrics import prometheus_metrics
from shared.serving.saxml_rollout import advance_saxml
from shared.serving.saxml_servers import follow_servers
from shared.serving.triton_rollout import advance, retire_due

__all__ = ["ReconcileModelsReport", "on_message", "reconcile_models"]

log = get_logger("accelops.serving")

# Longer than Pub/Sub's redelivery of a failed deploy_model event takes (backoff up to
# 600 s): a "starting" rollout younger than this is still expected to resume.
STARTING_GRACE_SECONDS = 1800.0


@dataclass
class ReconcileModelsReport:
    watched: list[str] = field(default_factory=list)  # model: state of its active rollout
    changed: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)
    serving: list[str] = field(default_factory=list)  # a Saxml version's servers, in words
    lost: list[str] = field(default_factory=list)  # models whose servers are lost now

    def summary(self) -> str:
        return (f"{len(self.watched)} active rollout(s), {len(self.changed)} moved on, "
                f"{len(self.deferred)} deferred; {len(self.serving)} serving Saxml "
                f"version(s) followed, {len(self.lost)} with their servers lost")


def _advance(kube: KubeClient, ledger: Ledger, config: AccelopsConfig, now: float) -> bool:
    rollout = ledger.active()
    if rollout is None:
        return False
    if rollout.state == "starting":
        # deploy_model stopped between recording the rollout and applying it; its event
        # is redelivered and resumes it. Only one never redelivered is given up on.
        if now - rollout.started < STARTING_GRACE_SECONDS:
            return False
        ledger.update(rollout.id, state="failed", finished=now,
                      reason="the rollout was recorded but never started, and its event "
                             "was not delivered again (see the dead-letter topic)")
        log.error(f"{ledger.model}: version {rollout.version} never started",
                  model=ledger.model, version=rollout.version)
        return True
    if ledger.server == "saxml":
        return advance_saxml(kube, ledger, rollout, config, now)

    metrics = prometheus_metrics(ledger.model, config.serving.namespace) \
        if rollout.state == "canary" else None
    return advance(kube, ledger, rollout, config.serving, metrics, now)


def reconcile_models(settings: Settings | None = None,
                     now: float | None = None) -> ReconcileModelsReport:
    settings = settings or Settings.from_env()
    config = load_config_or_retry(settings)
    kube = get_client(settings)
    namespace = config.serving.namespace
    report = ReconcileModelsReport()
    for ledger in list_ledgers(kube, namespace):
        moment = time.time() if now is None else now
        changed = False
        active = ledger.active()
        if active is not None:
            report.watched.append(f"{ledger.model}: {active.state}")
            changed = _advance(kube, ledger, config, moment)
        if ledger.server == "triton" and ledger.retiring:
            changed = retire_due(kube, ledger, config.serving, moment) or changed
        # After the rollout moved on: a version promoted now is followed from now on.
        # Server times are the cluster's, as the kubelet's timestamps are.
        followed = follow_servers(kube, ledger, config, kube.server_time() or moment)
        if followed.summary:
            report.serving.append(followed.summary)
        if followed.lost:
            report.lost.append(ledger.model)
        if changed or followed.changed:
            try:
                save_ledger(kube, namespace, ledger)
            except LedgerChangedError as exc:
                # Nothing is done for servers whose record did not make it: the run
                # that wrote first acts, or the next tick does.
                report.deferred.append(ledger.model)
                log.warning(f"{ledger.model}: {exc.message}; next tick")
                continue
            report.changed.append(ledger.model)
        if followed.act is not None:
            followed.act()
    return report


def on_message(message: PubSubMessage) -> ReconcileModelsReport:
    report = reconcile_models()
    log.info(f"reconcile_models: {report.summary()}", watched=report.watched,
             serving=report.serving, lost=report.lost,
             trigger=message.attributes.get("trigger"))
    return report
