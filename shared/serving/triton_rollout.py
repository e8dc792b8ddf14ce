"""Carrying out Triton rollouts: start one, watch it come up, run its canary, promote
it or roll it back.

Nothing here waits for pods. :func:`apply_release` creates the release's own
Deployment and Service (the serving release is not touched); :func:`advance` (run
by ``reconcile_models`` on every tick) moves the rollout on:

- **rolling-out**: the release's pods come up with no traffic. The verdict of
  :func:`judge_deployment` decides: failed → rolled back (the serving release never
  stopped serving; the new one is retired), reported with an ERROR log naming the
  reason; ready → the canary's first step, or straight to serving when nothing
  served before it, for a rollback by hand, or with ``steps: [100]``.
- **canary**: the model's route gives the release its step's weight; the gate
  (:mod:`shared.serving.canary`) reads both releases' figures for the step from
  Prometheus and holds, advances, promotes or rolls back. A release whose pods fail
  meanwhile is rolled back as in rolling-out.

A release out of the route is retired: its objects are deleted
``serving.retire_after_seconds`` later (:func:`retire_due`), once load balancers
stopped sending it requests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from shared.config import CanaryPolicy, ServingConfig
from shared.errors import TransientError
from shared.kube import (
    DEPLOYMENTS,
    HEALTH_CHECK_POLICIES,
    HORIZONTAL_POD_AUTOSCALERS,
    HTTPROUTES,
    PODS,
    SERVICES,
    KubeClient,
)
from shared.log import get_logger
from shared.serving.canary import CanaryState, GateRecord, ReleaseFigures, judge_step
from shared.serving.gateway import Backend, render_health_check, render_route, route_weights
from shared.serving.ledger import Ledger, Rollout
from shared.serving.manifest import CanaryOverride
from shared.serving.observe import Verdict, judge_deployment
from shared.serving.triton import release_name, release_selector, render_triton

__all__ = ["FIELD_MANAGER", "ReleaseMetrics", "advance", "apply_release", "policy_of",
           "retire_due", "set_route"]

log = get_logger("accelops.serving")

FIELD_MANAGER = "accelops-serving"
# A release's objects, in the order they are deleted.
RELEASE_RESOURCES = (HORIZONTAL_POD_AUTOSCALERS, DEPLOYMENTS, HEALTH_CHECK_POLICIES, SERVICES)
# Prometheus needs a window of a few scrapes to count anything.
MIN_WINDOW_SECONDS = 1.0

# (release id, window in seconds) → that release's figures over the window.
ReleaseMetrics = Callable[[str, float], ReleaseFigures]


def apply_release(kube: KubeClient, rollout: Rollout, config: ServingConfig) -> None:
    """Apply the objects that serve ``rollout``'s release (idempotent)."""
    assert rollout.release is not None
    spec = rollout.spec
    name = release_name(spec["deployment"], rollout.id)
    existing = kube.find(DEPLOYMENTS, name, config.namespace)
    replicas = None if existing is not None else int(spec["replicas"]["min"])
    for resource, body in render_triton(spec, rollout.release, rollout.id, config,
                                        replicas=replicas):
        kube.apply(resource, body, field_manager=FIELD_MANAGER, force=True)
    kube.apply(HEALTH_CHECK_POLICIES, render_health_check(name, config),
               field_manager=FIELD_MANAGER, force=True)


def policy_of(rollout: Rollout, config: ServingConfig) -> CanaryPolicy:
    """The canary policy of an upload: the config's, with its manifest's section."""
    section = rollout.spec.get("canary")
    if not section:
        return config.canary
    return CanaryOverride.model_validate(section).over(config.canary)


def set_route(kube: KubeClient, ledger: Ledger, config: ServingConfig,
              shares: Sequence[tuple[str, int]]) -> None:
    """Point the model's route at releases: (release id, weight) each."""
    backends = [Backend(release_name(ledger.deployment, rid), weight)
                for rid, weight in shares]
    kube.apply(HTTPROUTES, render_route(ledger.model, ledger.deployment, backends, config),
               field_manager=FIELD_MANAGER, force=True)


def retire_due(kube: KubeClient, ledger: Ledger, config: ServingConfig, now: float) -> bool:
    """Delete the objects of retired releases whose time has come; True when the
    ledger changed. A release that serves, is being rolled out, or still has weight
    in the model's route (a superseded canary, until its successor is ready) waits."""
    due = [r for r in ledger.retiring if r.after <= now]
    if not due:
        return False
    keep = {ledger.current} | {r.id for r in ledger.rollouts if r.active}
    route = kube.find(HTTPROUTES, ledger.deployment, config.namespace)
    routed = {name for name, weight in route_weights(route or {}).items() if weight}
    done = []
    for retiring in due:
        name = release_name(ledger.deployment, retiring.release) if retiring.release \
            else ledger.deployment
        if retiring.release in keep or name in routed:
            continue
        for resource in RELEASE_RESOURCES:
            kube.delete(resource, name, config.namespace)
        done.append(retiring)
    ledger.retiring = [r for r in ledger.retiring if r not in done]
    return bool(done)


def observe(kube: KubeClient, config: ServingConfig, rollout: Rollout, release: str,
            now: float) -> Verdict:
    deployment = rollout.spec["deployment"]
    found = kube.find(DEPLOYMENTS, release_name(deployment, release), config.namespace)
    selector = ",".join(f"{k}={v}" for k, v in release_selector(deployment, release).items())
    pods = kube.list(PODS, config.namespace, label_selector=selector)
    return judge_deployment(found, pods, release, age_seconds=now - rollout.started,
                            timeout_seconds=config.rollout_timeout_seconds,
                            max_restarts=config.max_restarts)


def advance(kube: KubeClient, ledger: Ledger, rollout: Rollout, config: ServingConfig,
            metrics: ReleaseMetrics | None = None, now: float | None = None) -> bool:
    """Observe one active rollout and move the ledger on; True when it changed.

    ``metrics`` reads a release's figures (needed only for a canary)."""
    now = time.time() if now is None else now
    if rollout.state == "rolling-back":
        return _legacy_rollback(kube, ledger, rollout, config, now)
    verdict = observe(kube, config, rollout, rollout.id, now)
    if verdict.outcome == "failed":
        return _fail(kube, ledger, rollout, config, now, verdict.detail)
    if rollout.state == "canary":
        return _gate(kube, ledger, rollout, config, metrics, now)
    if verdict.outcome == "waiting":
        return _note(ledger, rollout, verdict.detail)
    current = ledger.find(ledger.current)
    policy = policy_of(rollout, config)
    if current is None or current.id == rollout.id or rollout.kind == "rollback" \
            or len(policy.steps) == 1 or not _serves(kube, config, ledger, current):
        _switch(kube, ledger, rollout, config, now, verdict.detail)
        return True
    canary = CanaryState(policy=policy, against=current.id, step_started=now)
    set_route(kube, ledger, config, _shares(current.id, rollout.id, canary.weight))
    ledger.update(rollout.id, state="canary", canary=canary,
                  progress=f"ready ({verdict.detail}); {canary.weight}% of requests")
    log.info(f"{ledger.model}: version {rollout.version} takes {canary.weight}% of requests",
             model=ledger.model, version=rollout.version, release=rollout.id)
    return True


def _serves(kube: KubeClient, config: ServingConfig, ledger: Ledger, current: Rollout) -> bool:
    """Whether the serving release has a Deployment of its own to share traffic with
    (a model deployed before releases had one switches without a canary once)."""
    name = release_name(ledger.deployment, current.id)
    return kube.find(DEPLOYMENTS, name, config.namespace) is not None


def _shares(current: str, new: str, percent: int) -> list[tuple[str, int]]:
    """The route's (release, weight) at a step: the new release has its percent."""
    return [(current, 100 - percent), (new, percent)]


def _switch(kube: KubeClient, ledger: Ledger, rollout: Rollout, config: ServingConfig,
            now: float, detail: str) -> None:
    """The release alone takes every request; the ones before it retire."""
    set_route(kube, ledger, config, [(rollout.id, 100)])
    after = now + config.retire_after_seconds
    if ledger.current is not None and ledger.current != rollout.id:
        ledger.retire(ledger.current, after)
    if kube.find(DEPLOYMENTS, ledger.deployment, config.namespace) is not None:
        # The one Deployment and Service a model had before releases had their own.
        ledger.retire("", after)
    ledger.unretire(rollout.id)
    ledger.update(rollout.id, state="ready", finished=now, progress=detail)
    ledger.promote(rollout.id)
    log.info(f"{ledger.model}: version {rollout.version} serves", model=ledger.model,
             version=rollout.version, release=rollout.id)


def _fail(kube: KubeClient, ledger: Ledger, rollout: Rollout, config: ServingConfig,
          now: float, reason: str) -> bool:
    log.error(f"{ledger.model}: version {rollout.version} failed: {reason}",
              model=ledger.model, version=rollout.version, release=rollout.id)
    previous = ledger.find(ledger.current)
    if previous is None or previous.id == rollout.id:
        ledger.update(rollout.id, state="failed", finished=now, reason=reason)
        return True
    if rollout.state == "canary":
        set_route(kube, ledger, config, [(previous.id, 100)])
    ledger.retire(rollout.id, now + config.retire_after_seconds)
    ledger.update(rollout.id, state="rolled-back", finished=now, reason=reason,
                  progress=f"version {previous.version} serves; this one never took "
                           f"all requests")
    return True


def _gate(kube: KubeClient, ledger: Ledger, rollout: Rollout, config: ServingConfig,
          metrics: ReleaseMetrics | None, now: float) -> bool:
    canary = rollout.canary
    if canary is None or metrics is None:
        return _note(ledger, rollout, "waiting for the servers' metrics")
    age = now - canary.step_started
    window = max(age, MIN_WINDOW_SECONDS)
    try:
        new = metrics(rollout.id, window)
        against = metrics(canary.against, window)
    except TransientError as exc:
        return _note(ledger, rollout, f"at {canary.weight}%: the servers' metrics could not "
                                      f"be read ({exc.message}); next tick")
    gate = judge_step(canary.policy, canary.step, age, new, against,
                      timeout_seconds=config.rollout_timeout_seconds)
    record = GateRecord(at=now, step=canary.step, weight=canary.weight, action=gate.action,
                        reason=gate.reason, window_seconds=round(window, 3), new=new,
                        current=against)
    canary = canary.model_copy(deep=True)
    canary.note(record)
    figures = record.figures()
    if gate.action == "hold":
        ledger.update(rollout.id, canary=canary, progress=f"{gate.reason} ({figures})")
        return True
    if gate.action == "advance":
        canary.step += 1
        canary.step_started = now
        set_route(kube, ledger, config, _shares(canary.against, rollout.id, canary.weight))
        ledger.update(rollout.id, canary=canary, progress=f"{gate.reason} ({figures})")
        log.info(f"{ledger.model}: version {rollout.version} takes {canary.weight}% of "
                 f"requests: {gate.reason}", model=ledger.model, version=rollout.version)
        return True
    if gate.action == "promote":
        ledger.update(rollout.id, canary=canary)
        _switch(kube, ledger, ledger.find(rollout.id) or rollout, config, now,
                f"{gate.reason} ({figures})")
        return True
    ledger.update(rollout.id, canary=canary)
    return _fail(kube, ledger, ledger.find(rollout.id) or rollout, config, now,
                 f"missed its SLO {gate.reason} ({figures})")


def _legacy_rollback(kube: KubeClient, ledger: Ledger, rollout: Rollout,
                     config: ServingConfig, now: float) -> bool:
    """A rollback begun before releases had objects of their own: serve the current
    release from its own Deployment, then route to it alone."""
    target = ledger.find(ledger.current)
    if target is None:
        ledger.update(rollout.id, state="failed", finished=now)
        return True
    apply_release(kube, target, config)
    verdict = observe(kube, config, target.model_copy(update={"started": rollout.started}),
                      target.id, now)
    if verdict.outcome == "ready":
        set_route(kube, ledger, config, [(target.id, 100)])
        ledger.update(rollout.id, state="rolled-back", finished=now,
                      progress=f"version {target.version} serves again")
        return True
    if verdict.outcome == "failed":
        ledger.update(rollout.id, state="failed", finished=now,
                      progress=f"the rollback to {target.version} failed too: "
                               f"{verdict.detail}")
        return True
    return _note(ledger, rollout, verdict.detail)


def _note(ledger: Ledger, rollout: Rollout, detail: str) -> bool:
    if rollout.progress == detail:
        return False
    ledger.update(rollout.id, progress=detail)
    return True
