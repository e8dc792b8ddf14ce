"""deploy_model's core: one finalized object → nothing, a refusal, or a rollout.

Decide, then act:

1. Only ``models/<server>/<model>/<version>/deploy.yaml`` deploys; other objects
   are acknowledged without effect (artifacts, releases, anything else).
2. The model's ledger decides duplicates and order: a manifest generation already
   recorded is a duplicate (unless its rollout was interrupted before it started,
   which is resumed); a manifest older than the newest one handled for the model
   (any version: generations are timestamps) is stale — the later upload wins, so
   a late redelivery never rolls an old version back in. A new generation of the
   same manifest is a new deployment request.
3. The manifest, its files and (Triton) its config.pbtxt are checked; a refusal is
   recorded in the ledger with the field and the rule, so ``accelops models status``
   shows it by model and version, and acknowledged. Nothing is deployed.
4. The release snapshot is written, the rollout recorded, the Deployment pointed
   at it — then the function returns. ``reconcile_models`` watches it from there.

Nothing is acknowledged before the ledger holds what happened; failures of Cloud
Storage, the cluster or a concurrent writer raise and the event is redelivered.
"""

from __future__ import annotations

import os
import time

from shared import pubsub, storage
from shared.config import AccelopsConfig, Settings, load_config_or_retry
from shared.errors import AccelopsError, NotFoundError, PermanentError
from shared.kube import KubeClient, get_client
from shared.log import get_logger
from shared.serving import release as releases
from shared.serving.convention import parse_object_name
from shared.serving.events import ObjectEvent
from shared.serving.ledger import Ledger, Rollout, load_ledger
from shared.serving.manifest import MAX_MANIFEST_BYTES, DeployManifest, read_manifest
from shared.serving.rollout_start import DeployOutcome, reject, start_rollout
from shared.serving.saxml_rollout import start_saxml
from shared.serving.triton import release_id, release_prefix
from shared.serving.triton_rollout import apply_release
from shared.storage import ObjectInfo

__all__ = ["on_object"]

log = get_logger("accelops.serving")

def _spec(manifest: DeployManifest) -> dict[str, object]:
    spec = manifest.model_dump(mode="json", exclude={"files"})
    spec["deployment"] = manifest.target
    spec["files"] = len(manifest.files)
    return spec


def on_object(event: ObjectEvent | None, settings: Settings | None = None) -> DeployOutcome:
    """Handle one storage event; see the module docstring. Raises PermanentError for
    an object name under ``models/`` that breaks the convention (acknowledged, logged:
    it cannot be recorded against a model it does not validly name)."""
    if event is None:
        return DeployOutcome("ignored", "not an object-finalize event")
    upload = parse_object_name(event.name)
    if upload is None or not upload.is_manifest:
        return DeployOutcome("ignored", f"{event.name[:200]} is not a manifest")

    settings = settings or Settings.from_env()
    config = load_config_or_retry(settings)
    kube = get_client(settings)
    namespace = config.serving.namespace
    ledger = load_ledger(kube, namespace, upload.model)
    existing = ledger.by_key(event.key)
    if existing is not None and existing.state != "starting":
        return DeployOutcome("duplicate", f"{event.key} was handled: {existing.state}",
                             upload.model, existing.id)
    manifest_uri = f"gs://{event.bucket}/{event.name}"
    newest = ledger.latest_generation()
    if newest > event.generation:
        return DeployOutcome("stale", f"a newer upload of {upload.model} (generation "
                                      f"{newest}) was handled first", upload.model)
    rid = release_id(event.key)
    now = time.time()
    base = Rollout(id=rid, key=event.key, version=upload.version, state="starting",
                   generation=event.generation, manifest=manifest_uri, started=now)
    try:
        data = _read_manifest(event)
    except NotFoundError:
        return DeployOutcome("stale", f"{event.key} no longer exists (overwritten or "
                                      f"deleted)", upload.model)
    try:
        manifest = read_manifest(data, upload)
        sources = releases.verify_files(manifest, event.bucket, upload)
        pinned = releases.pinned_config(manifest, sources["config.pbtxt"]) \
            if manifest.server == "triton" else None
    except PermanentError as exc:
        return reject(kube, namespace, config, ledger, base, exc)
    releases_bucket = config.serving.releases_bucket or event.bucket
    prefix = release_prefix(manifest.target, rid)
    rollout = base.model_copy(update={
        "spec": _spec(manifest), "release": f"gs://{releases_bucket}/{prefix}"})
    ledger.server, ledger.deployment = manifest.server, manifest.target
    if manifest.server == "saxml":
        return start_saxml(kube, config, ledger, rollout, manifest, sources,
                           releases_bucket, prefix)
    return _start_triton(kube, config, ledger, rollout, manifest, sources,
                         releases_bucket, prefix, pinned)


def _read_manifest(event: ObjectEvent) -> bytes:
    return storage.read_bytes(event.bucket, event.name, generation=event.generation,
                              max_bytes=MAX_MANIFEST_BYTES + 1)


def _start_triton(kube: KubeClient, config: AccelopsConfig, ledger: Ledger, rollout: Rollout,
                  manifest: DeployManifest, sources: dict[str, ObjectInfo], bucket: str,
                  prefix: str, pinned: bytes | None) -> DeployOutcome:
    def act() -> None:
        releases.copy_snapshot(manifest, sources, bucket, prefix, pinned)
        apply_release(kube, rollout, config.serving)

    refused = start_rollout(kube, config, ledger, rollout, act, "Deployment updated")
    if refused is not None:
        return refused
    log.info(f"{manifest.model}: rolling out version {manifest.version} to "
             f"{manifest.target} from {rollout.release}", model=manifest.model,
             version=manifest.version, release=rollout.id)
    _nudge(config)
    return DeployOutcome("started", f"rolling out {manifest.version} as {rollout.id}",
                         manifest.model, rollout.id)


def _nudge(config: AccelopsConfig) -> None:
    """Ask reconcile_models to look now rather than at the next tick (best effort:
    the tick comes within a minute anyway)."""
    project = os.environ.get("ACCELOPS_PROJECT")
    if not project:
        return
    try:
        pubsub.publish(project, config.topics.model_rollouts, b"{}",
                       {"trigger": "deploy_model"}, timeout=5.0)
    except AccelopsError as exc:
        log.warning(f"could not nudge reconcile_models: {exc.message}")
