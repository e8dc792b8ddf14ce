"""What ``accelops models`` reads and does: ledgers in words, and rollbacks.

A rollback by hand is a rollout like any other — to a release that served before,
from its existing snapshot — so ``reconcile_models`` watches it the same way and a
rollback that does not become ready is itself rolled back to what served.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from shared.config import AccelopsConfig
from shared.errors import NotFoundError, PermanentError
from shared.kube import GATEWAYS, KubeClient
from shared.serving import endpoints
from shared.serving.endpoints import ServiceUrl
from shared.serving.gateway import LISTENER
from shared.serving.ledger import Ledger, Rollout, list_ledgers, load_ledger, save_ledger
from shared.serving.rollout_start import supersede_active
from shared.serving.servers import Servers
from shared.serving.triton_rollout import apply_release

__all__ = ["LoadTarget", "ModelSummary", "canary_in_words", "load_target", "rollback",
           "servers_in_words", "summarise"]

_SERVED = frozenset({"ready"})


@dataclass(frozen=True, slots=True)
class ModelSummary:
    model: str
    server: str
    deployment: str
    current: str
    previous: str
    rollout: str  # the newest rollout's version and state
    last_failure: str
    servers: str = "-"  # a serving Saxml version's model servers, in a few words


def _version(ledger: Ledger, rollout_id: str | None) -> str:
    rollout = ledger.find(rollout_id)
    return rollout.version if rollout is not None else "-"


def servers_in_words(servers: Servers | None) -> str:
    """``1/1 running, 5 crashes, 1 loss`` (what ``models list`` shows)."""
    if servers is None:
        return "-"
    if servers.suspended:
        state = f"0/{servers.expected} running (suspended)"
    elif servers.lost:
        state = "lost"
    else:
        state = f"{servers.running}/{servers.expected} running"
    parts = [state]
    if servers.crashes:
        parts.append(f"{servers.crashes} crash{'es' if servers.crashes != 1 else ''}")
    if servers.losses:
        parts.append(f"{servers.losses} loss{'es' if servers.losses != 1 else ''}")
    return ", ".join(parts)


def summarise(ledger: Ledger) -> ModelSummary:
    newest = ledger.rollouts[-1] if ledger.rollouts else None
    failed = next((r for r in reversed(ledger.rollouts)
                   if r.state in ("rolled-back", "rolling-back", "failed", "rejected")), None)
    failure = f"{failed.version} {failed.state}: {failed.reason}" if failed else "-"
    current = ledger.find(ledger.current)
    return ModelSummary(
        model=ledger.model, server=ledger.server or "-", deployment=ledger.deployment or "-",
        current=_version(ledger, ledger.current), previous=_version(ledger, ledger.previous),
        rollout=f"{newest.version} {newest.state}" if newest else "-", last_failure=failure,
        servers=servers_in_words(current.servers) if current is not None else "-")


def _clock(epoch: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(epoch))


def canary_in_words(ledger: Ledger) -> list[str]:
    """The newest canary of a model: its step, SLO, the figures it was judged on and
    every decision that moved it (what ``models status`` prints). Empty when the
    model has had none."""
    rollout = next((r for r in reversed(ledger.rollouts) if r.canary is not None), None)
    if rollout is None or rollout.canary is None:
        return []
    canary, policy = rollout.canary, rollout.canary.policy
    against = ledger.find(canary.against)
    steps = " → ".join(f"{s}%" for s in policy.steps)
    where = (f"at {canary.weight}% (step {canary.step + 1} of {len(policy.steps) - 1}) "
             f"since {_clock(canary.step_started)}" if rollout.state == "canary"
             else rollout.state)
    slo = (f"error rate ≤ serving + {policy.max_error_rate_increase:.2%}; p99 and compute "
           f"p99 ≤ {policy.max_p99_ratio:g}x serving + {policy.p99_slack_ms:g} ms"
           + (f" and ≤ {policy.max_p99_ms:g} ms" if policy.max_p99_ms else "")
           + f"; each step ≥ {policy.min_seconds:g} s and ≥ {policy.min_requests} requests")
    lines = [f"canary      {rollout.version} against "
             f"{against.version if against else canary.against}: {where} ({steps})",
             f"slo         {slo}"]
    if canary.last is not None:
        last = canary.last
        lines.append(f"last look   {_clock(last.at)} over {last.window_seconds:.0f} s: "
                     f"{last.figures()}")
    for record in canary.decisions:
        lines.append(f"  {_clock(record.at)}  {record.action:<9} {record.reason} "
                     f"({record.figures()})")
    return lines


def _target(ledger: Ledger, to_version: str | None) -> Rollout:
    if to_version is None:
        target = ledger.find(ledger.previous)
        if target is None:
            raise PermanentError(f"{ledger.model} has no previous version to roll back to",
                                 field="model")
        return target
    wanted = to_version.lstrip("v")
    for rollout in reversed(ledger.rollouts):
        if rollout.version.lstrip("v") == wanted and rollout.release and (
                rollout.state in _SERVED or rollout.id in (ledger.current, ledger.previous)):
            return rollout
    raise PermanentError(f"{ledger.model} has no version {to_version} that served",
                         field="--to", rule="a version listed as ready by models status")


def rollback(kube: KubeClient, config: AccelopsConfig, model: str,
             to_version: str | None = None) -> Rollout:
    """Start a rollout back to ``to_version`` (default: the previous version)."""
    namespace = config.serving.namespace
    ledger = load_ledger(kube, namespace, model)
    if not ledger.rollouts:
        raise NotFoundError(f"no model {model!r} in namespace {namespace}", field="model")
    if ledger.server != "triton":
        raise PermanentError(f"{model} is served by {ledger.server}: roll back by uploading "
                             f"the version's manifest again", field="model")
    target = _target(ledger, to_version)
    if target.id == ledger.current and ledger.active() is None:
        raise PermanentError(f"{model} {target.version} already serves", field="--to")
    now = time.time()
    count = sum(1 for r in ledger.rollouts if r.kind == "rollback") + 1
    rollout = target.model_copy(update={
        "id": f"{target.id}-b{count}", "key": f"rollback:{target.id}:{now:.3f}",
        "kind": "rollback", "state": "rolling-out", "started": now, "finished": None,
        "reason": None, "field": None, "rule": None, "progress": "Deployment updated"})
    supersede_active(ledger, rollout.id, now, config.serving.retire_after_seconds)
    ledger.record(rollout, config.serving.history)
    save_ledger(kube, namespace, ledger)
    apply_release(kube, rollout, config.serving)
    return rollout


@dataclass(frozen=True, slots=True)
class LoadTarget:
    """Where a load test reaches a deployment's current version."""

    host: str
    server: str
    model: str  # the Triton model name, or the Sax model path
    version: str


def load_target(kube: KubeClient, config: AccelopsConfig, deployment: str,
                saxml_proxy: str | None = None, *,
                url_of: ServiceUrl = endpoints.gateway_url) -> LoadTarget:
    """The address, server and model name that serve ``deployment`` now.

    A Triton model is reached through the serving Gateway, so a load test sees what
    users see, canary included. ``url_of`` finds where a client outside the cluster
    reaches the Gateway's ``http`` listener: by default the address it reports
    (:func:`shared.serving.endpoints.gateway_url`); a caller that reaches it another
    way — a port-forward, a local cluster's loopback proxies — passes its own.

    NotFoundError when no model is deployed there or it has no outside address.
    """
    namespace = config.serving.namespace
    for ledger in list_ledgers(kube, namespace):
        if ledger.deployment != deployment:
            continue
        current = ledger.find(ledger.current)
        if current is None:
            raise NotFoundError(f"{deployment} serves no version yet (see `accelops models "
                                f"status {ledger.model}`)", field="deployment")
        if ledger.server == "saxml":
            if not saxml_proxy or not current.serving:
                raise NotFoundError("no Saxml proxy address: set ACCELOPS_SAXML_PROXY",
                                    field="deployment")
            return LoadTarget(saxml_proxy, "saxml", current.serving, current.version)
        gateway = kube.get(GATEWAYS, config.serving.gateway, namespace)
        return LoadTarget(url_of(gateway, LISTENER), "triton", ledger.model,
                          current.version)
    raise NotFoundError(f"no model is deployed as {deployment!r} in namespace {namespace}",
                        field="deployment")
