"""Starting a rollout, for either server: record it, act, mark it rolling out.

``deploy_model`` starts Triton rollouts (:mod:`shared.serving.triton_rollout`) and
Saxml ones (:mod:`shared.serving.saxml_rollout`) the same way, and a rollback by
hand replaces what is in flight the same way too; what differs is only what
``act`` does. A manifest or release refused on the way is recorded as a rejected
rollout, so the ledger says why nothing was deployed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from shared.config import AccelopsConfig
from shared.errors import PermanentError
from shared.kube import KubeClient
from shared.log import get_logger
from shared.serving.ledger import Ledger, Rollout, save_ledger

__all__ = ["DeployOutcome", "Outcome", "reject", "start_rollout", "supersede_active"]

log = get_logger("accelops.serving")

Outcome = Literal["ignored", "duplicate", "stale", "rejected", "started"]


@dataclass(frozen=True, slots=True)
class DeployOutcome:
    outcome: Outcome
    detail: str
    model: str | None = None
    rollout: str | None = None


def supersede_active(ledger: Ledger, keep: str, now: float, retire_after: float) -> None:
    """A newer rollout replaces any that is still in flight; a Triton release's objects
    are retired (kept while the model's route still sends it requests)."""
    for other in ledger.rollouts:
        if other.active and other.id != keep:
            ledger.update(other.id, state="superseded", finished=now,
                          progress=f"replaced by {keep}")
            if ledger.server == "triton":
                ledger.retire(other.id, now + retire_after)


def start_rollout(kube: KubeClient, config: AccelopsConfig, ledger: Ledger, rollout: Rollout,
                  act: Callable[[], None], progress: str) -> DeployOutcome | None:
    """Record the rollout, ``act`` (write its snapshot, apply what serves it), then mark
    it rolling out. Recorded before anything is written: a crash from there on leaves
    a "starting" rollout that the redelivered event resumes. Returns the rejection
    when ``act`` is refused — a source generation gone since it was checked, or
    objects the API server refuses: nothing serves from such a release, so it is
    refused, not left pending — else None."""
    namespace = config.serving.namespace
    supersede_active(ledger, rollout.id, rollout.started, config.serving.retire_after_seconds)
    ledger.record(rollout, config.serving.history)
    save_ledger(kube, namespace, ledger)
    try:
        act()
    except PermanentError as exc:
        return reject(kube, namespace, config, ledger, rollout, exc)
    ledger.update(rollout.id, state="rolling-out", progress=progress)
    save_ledger(kube, namespace, ledger)
    return None


def reject(kube: KubeClient, namespace: str, config: AccelopsConfig, ledger: Ledger,
            rollout: Rollout, exc: PermanentError) -> DeployOutcome:
    rejected = rollout.model_copy(update={
        "state": "rejected", "finished": rollout.started, "reason": exc.message,
        "field": exc.field, "rule": exc.rule})
    ledger.record(rejected, config.serving.history)
    save_ledger(kube, namespace, ledger)
    log.error(f"{ledger.model} {rollout.version}: manifest refused: {exc.message}",
              model=ledger.model, version=rollout.version, **exc.as_fields())
    return DeployOutcome("rejected", exc.message, ledger.model, rollout.id)
