"""Following the model servers of a Saxml version that serves (``reconcile_models``).

Each tick, for every model whose current version is a Saxml one: read its
model-server JobSet and their pods (two list calls), let
:func:`shared.serving.servers.follow` decide, put the result in the ledger — and
only once the ledger is saved, act: log each new crash at WARNING and a loss at
ERROR, and create lost servers again (deleting their finished JobSet first, guarded
by its resourceVersion so that a JobSet created meanwhile is never deleted). A run
whose ledger write loses to another's does nothing, so overlapping or repeated runs
record a crash or a loss once and create one JobSet; what to create is read from the
cluster every time, so a run that stopped before acting is made good by the next.
The JobSet's name is the version's, so a second creation finds it taken.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from shared.config import AccelopsConfig
from shared.errors import AlreadyExistsError, ConfigError, ConflictError, PermanentError
from shared.jobspec.labels import JOBSET_NAME_LABEL
from shared.kube import JOBSETS, PODS, KubeClient
from shared.log import get_logger
from shared.serving.ledger import Ledger, Rollout
from shared.serving.saxml_rollout import (
    model_server_jobset,
    model_server_name,
    model_servers,
    sax_root,
    saxml_namespace,
)
from shared.serving.servers import (
    Follow,
    describe_crash,
    follow,
    read_jobset,
    read_pods,
)

__all__ = ["Followed", "follow_servers"]

log = get_logger("accelops.serving")


@dataclass
class Followed:
    """One model's servers after a look: whether the ledger changed, what to do once it
    is saved, and a line for the run's report."""

    changed: bool = False
    act: Callable[[], None] | None = None
    summary: str | None = None
    lost: bool = False


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "at an unknown time"
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def follow_servers(kube: KubeClient, ledger: Ledger, config: AccelopsConfig,
                   now: float) -> Followed:
    """Look at the model servers of ``ledger``'s current version, if it is a Saxml one
    that serves; ``now`` is the cluster's time. Updates the ledger in place."""
    rollout = ledger.find(ledger.current)
    if ledger.server != "saxml" or rollout is None or rollout.state != "ready":
        return Followed()
    try:
        namespace = saxml_namespace(config)
    except ConfigError as exc:
        # The other models are still followed; this one waits for the config to be fixed.
        log.error(f"{ledger.model}: cannot follow the model servers of Saxml version "
                  f"{rollout.version}: {exc.message}", model=ledger.model, **exc.as_fields())
        return Followed()
    name = model_server_name(rollout)
    found = [j for j in model_servers(kube, config, rollout)
             if (j.get("metadata") or {}).get("name") == name]
    jobset = read_jobset(found[0]) if found else None
    pods = read_pods(kube.list(PODS, namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}"),
                     jobset) if jobset is not None else []
    seen = follow(rollout.servers, name, jobset, pods, now)
    changed = seen.servers != rollout.servers
    if changed:
        ledger.update(rollout.id, servers=seen.servers)
    record = seen.servers
    summary = (f"{ledger.model} {rollout.version}: {record.running}/{record.expected} running"
               f", {record.crashes} crash(es), {record.losses} loss(es)")
    return Followed(changed, _actions(kube, config, ledger.model, rollout, seen), summary,
                    seen.lost)


def _actions(kube: KubeClient, config: AccelopsConfig, model: str, rollout: Rollout,
             seen: Follow) -> Callable[[], None] | None:
    if not seen.crashes and seen.loss is None and not seen.create:
        return None

    def act() -> None:
        record = seen.servers
        for crash in seen.crashes:
            log.warning(f"{model}: a model server of Saxml version {rollout.version} crashed "
                        f"{_when(crash.at)}: {describe_crash(crash)} ({record.crashes} "
                        f"crash(es) in all; it restarts in place)", model=model,
                        version=rollout.version, pod=crash.pod, exit_code=crash.exit_code,
                        reason=crash.reason)
        if seen.loss is not None:
            log.error(f"{model}: Saxml version {rollout.version} lost its model servers: "
                      f"{seen.loss.reason}; creating them again", model=model,
                      version=rollout.version, jobset=seen.loss.jobset)
        if seen.create:
            _recreate(kube, config, model, rollout, seen)

    return act


def _recreate(kube: KubeClient, config: AccelopsConfig, model: str, rollout: Rollout,
              seen: Follow) -> None:
    namespace = saxml_namespace(config)
    if seen.delete is not None:
        try:
            kube.delete(JOBSETS, seen.delete.name, namespace,
                        resource_version=seen.delete.resource_version)
        except ConflictError:
            return  # it changed since it was read: the next tick looks again
    try:
        kube.create(JOBSETS, model_server_jobset(config, rollout, sax_root(kube, config)))
    except AlreadyExistsError:
        # The finished one is still going (its deletion has not ended), or another run
        # created it first: the next tick sees which.
        return
    except (PermanentError, ConfigError) as exc:
        # The configuration refuses what it once accepted (a policy or an image
        # changed), or the Saxml settings are missing: an operator must act, the other
        # models go on meanwhile, and every tick tries again.
        log.error(f"{model}: cannot create the model servers of Saxml version "
                  f"{rollout.version} again: {exc.message}", model=model,
                  version=rollout.version, **exc.as_fields())
        return
    log.info(f"{model}: created the model servers of Saxml version {rollout.version} "
             f"again (JobSet {namespace}/{seen.servers.jobset})", model=model,
             version=rollout.version)
