"""reconcile_models' core: every tick, move every active rollout on.

Each message (a Cloud Scheduler tick, or deploy_model's nudge after it started a
rollout) only triggers a pass over every model's ledger, so duplicates and lost
messages are harmless: the next tick sees the same state. A ledger another writer
changed during the pass is left for the next tick rather than failing the rest.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from shared.config import AccelopsConfig, Settings, load_config_or_retry
from shared.events import PubSubMessage
from shared.kube import KubeClient, get_client
from shared.log import get_logger
from shared.serving.ledger import Ledger, LedgerChangedError, list_ledgers, save_ledger

__all__ = ["ReconcileModelsReport", "reconcile_models", "reconcile_on_message"]

log = get_logger("accelops.serving")

# Longer than Pub/Sub's redelivery of a failed deploy_model event takes (backoff up to
# 600 s): a "starting" rollout younger than this is still expected to resume.
STARTING_GRACE_SECONDS = 1800.0


@dataclass
class ReconcileModelsReport:
    watched: list[str] = field(default_factory=list)  # model: state of its active rollout
    changed: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"{len(self.watched)} active rollout(s), {len(self.changed)} moved on, "
                f"{len(self.deferred)} deferred")


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
        from shared.serving.saxml_rollout import advance_saxml

        return advance_saxml(kube, ledger, rollout, config, now)
    from shared.serving.rollout import advance

    return advance(kube, ledger, rollout, config.serving, now)


def reconcile_models(settings: Settings | None = None,
                     now: float | None = None) -> ReconcileModelsReport:
    settings = settings or Settings.from_env()
    config = load_config_or_retry(settings)
    kube = get_client(settings)
    namespace = config.serving.namespace
    report = ReconcileModelsReport()
    for ledger in list_ledgers(kube, namespace):
        active = ledger.active()
        if active is None:
            continue
        report.watched.append(f"{ledger.model}: {active.state}")
        if _advance(kube, ledger, config, time.time() if now is None else now):
            try:
                save_ledger(kube, namespace, ledger)
            except LedgerChangedError as exc:
                report.deferred.append(ledger.model)
                log.warning(f"{ledger.model}: {exc.message}; next tick")
                continue
            report.changed.append(ledger.model)
    return report


def reconcile_on_message(message: PubSubMessage) -> ReconcileModelsReport:
    report = reconcile_models()
    log.info(f"reconcile_models: {report.summary()}", watched=report.watched,
             trigger=message.attributes.get("trigger"))
    return report
