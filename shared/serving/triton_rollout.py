"""Carrying out Triton rollouts: start one, observe it, finish it or roll it back.

Nothing here waits for pods. :func:`start` records the rollout, points the
Deployment at the release and returns; :func:`advance` (run by
``reconcile_models`` on every tick) reads the Deployment and the release's pods,
asks :func:`judge_deployment` for a verdict and moves the ledger on: ready →
current; failed → the previous release is applied again (``rolling-back``, then
``rolled-back`` once it serves), reported with an ERROR log naming the reason.
"""

from __future__ import annotations

import time
from typing import Any

from shared.config import ServingConfig
from shared.kube import DEPLOYMENTS, PODS, KubeClient
from shared.log import get_logger
from shared.serving.ledger import Ledger, Rollout
from shared.serving.observe import Verdict, judge_deployment
from shared.serving.triton import LABEL_INSTANCE, LABEL_RELEASE, LABEL_SERVER, render_triton

__all__ = ["FIELD_MANAGER", "advance", "apply_release"]

log = get_logger("accelops.serving")

FIELD_MANAGER = "accelops-serving"


def apply_release(kube: KubeClient, rollout: Rollout, config: ServingConfig) -> None:
    """Apply the objects that serve ``rollout``'s release (idempotent)."""
    assert rollout.release is not None
    spec = rollout.spec
    existing = kube.find(DEPLOYMENTS, spec["deployment"], config.namespace)
    replicas = None if existing is not None else int(spec["replicas"]["min"])
    for resource, body in render_triton(spec, rollout.release, rollout.id, config,
                                        replicas=replicas):
        kube.apply(resource, body, field_manager=FIELD_MANAGER, force=True)


def _pods(kube: KubeClient, config: ServingConfig, deployment: str,
          release: str) -> list[dict[str, Any]]:
    selector = f"{LABEL_SERVER}=triton,{LABEL_INSTANCE}={deployment},{LABEL_RELEASE}={release}"
    return kube.list(PODS, config.namespace, label_selector=selector)


def observe(kube: KubeClient, config: ServingConfig, rollout: Rollout, release: str,
            now: float) -> Verdict:
    deployment = kube.find(DEPLOYMENTS, rollout.spec["deployment"], config.namespace)
    pods = _pods(kube, config, rollout.spec["deployment"], release)
    return judge_deployment(deployment, pods, release, age_seconds=now - rollout.started,
                            timeout_seconds=config.rollout_timeout_seconds,
                            max_restarts=config.max_restarts)


def advance(kube: KubeClient, ledger: Ledger, rollout: Rollout, config: ServingConfig,
            now: float | None = None) -> bool:
    """Observe one active rollout and move the ledger on; True when it changed."""
    now = time.time() if now is None else now
    if rollout.state == "rolling-back":
        target = ledger.find(ledger.current)
        if target is None:
            ledger.update(rollout.id, state="failed", finished=now)
            return True
        verdict = observe(kube, config, target.model_copy(update={"started": rollout.started}),
                          target.id, now)
        if verdict.outcome == "ready":
            ledger.update(rollout.id, state="rolled-back", finished=now,
                          progress=f"version {target.version} serves again")
            log.info(f"{ledger.model}: rolled back to version {target.version}",
                     model=ledger.model, version=rollout.version)
            return True
        if verdict.outcome == "failed":
            ledger.update(rollout.id, state="failed", finished=now,
                          progress=f"the rollback to {target.version} failed too: "
                                   f"{verdict.detail}")
            log.error(f"{ledger.model}: rolling back to version {target.version} failed: "
                      f"{verdict.detail}", model=ledger.model)
            return True
        return _note(ledger, rollout, verdict)
    verdict = observe(kube, config, rollout, rollout.id, now)
    if verdict.outcome == "waiting":
        return _note(ledger, rollout, verdict)
    if verdict.outcome == "ready":
        ledger.update(rollout.id, state="ready", finished=now, progress=verdict.detail)
        ledger.promote(rollout.id)
        log.info(f"{ledger.model}: version {rollout.version} serves", model=ledger.model,
                 version=rollout.version, release=rollout.id)
        return True
    log.error(f"{ledger.model}: version {rollout.version} failed: {verdict.detail}",
              model=ledger.model, version=rollout.version, release=rollout.id)
    previous = ledger.find(ledger.current)
    if previous is None or previous.id == rollout.id:
        ledger.update(rollout.id, state="failed", finished=now, reason=verdict.detail)
        return True
    ledger.update(rollout.id, state="rolling-back", reason=verdict.detail,
                  progress=f"rolling back to version {previous.version}")
    apply_release(kube, previous, config)
    return True


def _note(ledger: Ledger, rollout: Rollout, verdict: Verdict) -> bool:
    if rollout.progress == verdict.detail:
        return False
    ledger.update(rollout.id, progress=verdict.detail)
    return True
