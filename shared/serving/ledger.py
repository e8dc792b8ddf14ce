"""The per-model rollout ledger: what was uploaded, what serves, what failed.

One ConfigMap per model (``accelops-model-<model>`` in the serving namespace,
labelled ``accelops.dev/ledger=model``) holds the model's rollouts, newest last:
every manifest generation that arrived, accepted or refused, with its state and
reason. It is the idempotency record of ``deploy_model`` (a rollout's key is the
manifest's bucket, name and generation), the work list of ``reconcile_models``,
and what ``accelops models`` prints. Writes are guarded by the ConfigMap's
resourceVersion: two functions racing on one model cannot lose each other's
update — the loser retries.

States::

    starting → rolling-out → canary → ready
                           ↘ ready                         (nothing served before it)
                           ↘ rolled-back  (it failed or missed its SLO; the previous serves)
                           ↘ failed                        (nothing to go back to)
    rejected                (a bad manifest or missing/mismatched files; nothing deployed)
    superseded              (a newer upload or a rollback replaced it mid-rollout)

(``rolling-back`` is what a ledger written before releases had Deployments of their own
may still hold: that release is applied again and watched until it serves.)

Releases taken out of a model's route are listed in ``retiring`` until their objects
are deleted, a while later (``serving.retire_after_seconds``).

A Saxml version that serves also carries ``servers`` (:mod:`shared.serving.servers`):
its model servers running and ready, their crashes and any loss of the whole set,
with bounded history, so the ConfigMap stays far below its 1 MiB limit.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared import configmaps
from shared.configmaps import StoredConfigMap
from shared.errors import ConflictError, TransientError
from shared.kube import KubeClient
from shared.serving.canary import CanaryState
from shared.serving.servers import Servers

__all__ = [
    "ACTIVE_STATES",
    "LABEL_LEDGER",
    "LABEL_MODEL",
    "Ledger",
    "LedgerChangedError",
    "Retiring",
    "Rollout",
    "State",
    "ledger_name",
    "list_ledgers",
    "load_ledger",
    "save_ledger",
]

LABEL_LEDGER = "accelops.dev/ledger"
LABEL_MODEL = "accelops.dev/model"
_DATA_KEY = "ledger.json"

State = Literal["starting", "rolling-out", "canary", "ready", "rolling-back", "rolled-back",
                "failed", "rejected", "superseded"]
# A rollout in one of these states is being watched by reconcile_models.
ACTIVE_STATES: frozenset[str] = frozenset({"starting", "rolling-out", "canary", "rolling-back"})


class LedgerChangedError(TransientError):
    """Someone else updated the model's ledger first: run again on the new state."""


class Rollout(BaseModel):
    """One manifest generation (or one operator rollback) and what became of it."""

    model_config = ConfigDict(extra="ignore")

    id: str  # the release id; names the snapshot
    key: str  # gs://bucket/name#generation of the manifest, or rollback:<id>
    version: str
    kind: Literal["upload", "rollback"] = "upload"
    state: State
    generation: int = 0
    manifest: str = ""  # gs://bucket/name of the manifest
    release: str | None = None  # gs:// prefix of the snapshot it serves from
    spec: dict[str, Any] = Field(default_factory=dict)  # the manifest without its files
    started: float = 0.0
    finished: float | None = None
    reason: str | None = None
    field: str | None = None
    rule: str | None = None
    progress: str | None = None  # the last observation, in words
    serving: str | None = None  # Saxml: the published Sax model name
    # Saxml: what reconcile_models saw of the model servers while this version served.
    servers: Servers | None = None
    # Triton: the canary's policy, step and decisions, once the release was ready.
    canary: CanaryState | None = None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES


class Retiring(BaseModel):
    """A release out of the route whose objects are deleted once ``after`` has passed."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    release: str
    after: float


class Ledger(BaseModel):
    """A model's rollouts, newest last, and which one serves."""

    model_config = ConfigDict(extra="ignore")

    model: str
    server: str = ""
    deployment: str = ""
    current: str | None = None  # id of the rollout that serves
    previous: str | None = None  # id of the one that served before it
    rollouts: list[Rollout] = Field(default_factory=list)
    # The newest manifest generation ever handled for this model (kept when old rollouts
    # are trimmed): a later upload wins, so an older one arriving after it is stale.
    newest_upload: int = 0
    retiring: list[Retiring] = Field(default_factory=list)
    resource_version: str | None = Field(default=None, exclude=True)

    def find(self, rollout_id: str | None) -> Rollout | None:
        return next((r for r in self.rollouts if r.id == rollout_id), None) \
            if rollout_id else None

    def by_key(self, key: str) -> Rollout | None:
        return next((r for r in self.rollouts if r.key == key), None)

    def active(self) -> Rollout | None:
        return next((r for r in reversed(self.rollouts) if r.active), None)

    def latest_generation(self) -> int:
        """The newest manifest generation handled for this model (Cloud Storage
        generations are microsecond timestamps, so this orders uploads of any version);
        ``record`` keeps it."""
        return self.newest_upload

    def record(self, rollout: Rollout, history: int) -> None:
        """Add or replace a rollout (by id), keeping at most ``history`` — never
        dropping the current, previous or an active one."""
        self.rollouts = [r for r in self.rollouts if r.id != rollout.id] + [rollout]
        if rollout.kind == "upload":
            self.newest_upload = max(self.newest_upload, rollout.generation)
        keep = {self.current, self.previous}
        while len(self.rollouts) > history:
            victim = next((r for r in self.rollouts if r.id not in keep and not r.active), None)
            if victim is None:
                break
            self.rollouts.remove(victim)

    def update(self, rollout_id: str, **changes: Any) -> Rollout:
        """Change fields of a recorded rollout (KeyError when it is not there)."""
        for index, rollout in enumerate(self.rollouts):
            if rollout.id == rollout_id:
                self.rollouts[index] = rollout.model_copy(update=changes)
                return self.rollouts[index]
        raise KeyError(rollout_id)

    def retire(self, release: str, after: float) -> None:
        """Delete ``release``'s objects once ``after`` has passed (kept once)."""
        if all(r.release != release for r in self.retiring):
            self.retiring = [*self.retiring, Retiring(release=release, after=after)]

    def unretire(self, release: str) -> None:
        """``release`` serves again: keep its objects."""
        self.retiring = [r for r in self.retiring if r.release != release]

    def promote(self, rollout_id: str) -> None:
        """Make a rollout the one that serves; the one before becomes previous."""
        if self.current != rollout_id:
            self.previous, self.current = self.current, rollout_id


def ledger_name(model: str) -> str:
    return f"accelops-model-{model}"


def _from_config_map(stored: StoredConfigMap, model: str) -> Ledger:
    raw = stored.data.get(_DATA_KEY) or "{}"
    try:
        ledger = Ledger.model_validate({"model": model, **json.loads(raw)})
    except (ValueError, ValidationError):
        # A ledger edited by hand into nonsense: start over rather than wedge the model.
        ledger = Ledger(model=model)
    ledger.resource_version = stored.version
    return ledger


def load_ledger(kube: KubeClient, namespace: str, model: str) -> Ledger:
    """The model's ledger, empty when it has none yet."""
    stored = configmaps.find(kube, ledger_name(model), namespace)
    if stored is None:
        return Ledger(model=model)
    return _from_config_map(stored, model)


def list_ledgers(kube: KubeClient, namespace: str) -> list[Ledger]:
    """Every model's ledger in the namespace, by model name."""
    stored = configmaps.select(kube, namespace, f"{LABEL_LEDGER}=model")
    ledgers = [_from_config_map(s, s.labels.get(LABEL_MODEL, "")) for s in stored]
    return sorted((ledger for ledger in ledgers if ledger.model), key=lambda x: x.model)


def save_ledger(kube: KubeClient, namespace: str, ledger: Ledger) -> Ledger:
    """Write the ledger if nobody changed it since it was read.

    Raises LedgerChangedError (retry) when someone did.
    """
    try:
        saved = configmaps.write(
            kube, ledger_name(ledger.model), namespace,
            {_DATA_KEY: ledger.model_dump_json(indent=1)}, version=ledger.resource_version,
            labels={LABEL_LEDGER: "model", LABEL_MODEL: ledger.model},
            annotations={"accelops.dev/updated": f"{time.time():.3f}"})
    except ConflictError as exc:
        raise LedgerChangedError(f"the ledger of {ledger.model} changed while it was being "
                                 f"updated: {exc.message}") from exc
    ledger.resource_version = saved.version
    return ledger
