"""``accelops models list | status MODEL | rollback MODEL [--to VERSION] |
upload DIR gs://BUCKET``."""

from __future__ import annotations

import argparse
import datetime
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shared.config import AccelopsConfig
    from shared.serving.ledger import Rollout

__all__ = ["add_commands"]


def _context(args: argparse.Namespace) -> tuple[Any, Any]:
    from shared.config import Settings, load_config_from
    from shared.kube import get_client

    return load_config_from(args.config), get_client(Settings.from_env())


def _when(epoch: float | None) -> str:
    if not epoch:
        return "-"
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _table(rows: Sequence[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def cmd_list(args: argparse.Namespace) -> int:
    from shared.serving.ledger import list_ledgers
    from shared.serving.operator import summarise

    config, kube = _context(args)
    ledgers = list_ledgers(kube, config.serving.namespace)
    if not ledgers:
        print(f"no models deployed in namespace {config.serving.namespace}")
        return 0
    rows = [("MODEL", "SERVER", "DEPLOYMENT", "CURRENT", "PREVIOUS", "LATEST ROLLOUT",
             "SERVERS", "LAST FAILURE")]
    for ledger in ledgers:
        s = summarise(ledger)
        rows.append((s.model, s.server, s.deployment, s.current, s.previous, s.rollout,
                     s.servers, s.last_failure[:80]))
    _table(rows)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from shared.errors import NotFoundError
    from shared.serving.ledger import load_ledger
    from shared.serving.operator import canary_in_words, summarise

    config, kube = _context(args)
    ledger = load_ledger(kube, config.serving.namespace, args.model)
    if not ledger.rollouts:
        raise NotFoundError(f"no model {args.model!r} in namespace "
                            f"{config.serving.namespace}", field="model")
    s = summarise(ledger)
    print(f"model       {s.model} ({s.server}, deployment {s.deployment})")
    print(f"current     {s.current}")
    print(f"previous    {s.previous}")
    print(f"failure     {s.last_failure}")
    current = ledger.find(ledger.current)
    if ledger.server == "saxml" and current is not None:
        _print_servers(config, current)
    for line in canary_in_words(ledger):
        print(line)
    print()
    rows = [("VERSION", "KIND", "STATE", "STARTED", "FINISHED", "RELEASE", "DETAIL")]
    for r in reversed(ledger.rollouts):
        detail = r.reason or r.progress or ""
        if r.field:
            detail = f"[{r.field}] {detail}"
        rows.append((r.version, r.kind, r.state, _when(r.started), _when(r.finished), r.id,
                     detail[:100]))
    _table(rows)
    return 0


def _print_servers(config: AccelopsConfig, rollout: Rollout) -> None:
    """The serving Saxml version's model servers: running, crashes, losses, each crash."""
    from shared.serving.servers import describe_crash

    servers = rollout.servers
    if servers is None:
        print("servers     not observed yet (reconcile_models looks every minute)")
        return
    team = config.teams.get(config.serving.saxml_team or "")
    where = f"{team.namespace}/{servers.jobset}" if team is not None else servers.jobset
    if servers.lost:
        state = f"lost, not running again yet ({servers.running}/{servers.expected} running)"
    elif servers.suspended:
        state = (f"0/{servers.expected} running: suspended, waiting for Kueue to admit "
                 f"them again")
    else:
        state = f"{servers.running}/{servers.expected} running, {servers.ready} ready"
    print(f"servers     {state} since {_when(servers.since)} (JobSet {where}"
          + (f", {servers.restarts} JobSet restart(s)" if servers.restarts else "") + ")")
    last = servers.last_crash
    print(f"crashes     {servers.crashes}" + (
        f", the last {_when(last.at)}: {describe_crash(last)}" if last else ""))
    loss = servers.last_loss
    print(f"lost        {servers.losses} time(s)" + (
        f", the last {_when(loss.at)}: {loss.reason}; " + (
            f"created again {_when(loss.recreated)}" if loss.recreated
            else "being created again") if loss else ""))
    if servers.recent_crashes:
        print()
        shown = len(servers.recent_crashes)
        print(f"crashes of {rollout.version}, newest first"
              + (f" (the last {shown} of {servers.crashes})" if shown < servers.crashes
                 else ""))
        rows: list[tuple[str, ...]] = [("TIME", "COUNT", "POD", "CONTAINER", "EXIT",
                                        "REASON", "MESSAGE")]
        for crash in reversed(servers.recent_crashes):
            rows.append((_when(crash.at), str(crash.count), crash.pod, crash.container or "-",
                         "-" if crash.exit_code is None else str(crash.exit_code),
                         crash.reason or "-", (crash.message or "")[:100]))
        _table(rows)
    if servers.recent_losses:
        print()
        print(f"losses of {rollout.version}, newest first")
        rows = [("TIME", "JOBSET", "CREATED AGAIN", "REASON")]
        for lost in reversed(servers.recent_losses):
            rows.append((_when(lost.at), lost.jobset, _when(lost.recreated),
                         lost.reason[:100]))
        _table(rows)


def cmd_rollback(args: argparse.Namespace) -> int:
    from shared.serving.operator import rollback

    config, kube = _context(args)
    rollout = rollback(kube, config, args.model, args.to)
    print(f"{args.model}: rolling back to version {rollout.version} (release {rollout.id}); "
          f"`accelops models status {args.model}` follows it")
    return 0


def cmd_upload(args: argparse.Namespace) -> int:
    from pathlib import Path

    import yaml

    from shared.errors import PermanentError
    from shared.serving.upload import build_manifest, read_directory, upload_version
    from shared.storage import parse_gs_uri

    files = read_directory(Path(args.directory))
    fields: dict[str, Any] = {}
    if args.manifest:
        try:
            fields = yaml.safe_load(Path(args.manifest).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise PermanentError(f"cannot read {args.manifest}: {exc}",
                                 field="--manifest") from exc
        if not isinstance(fields, dict):
            raise PermanentError(f"{args.manifest} is not a YAML mapping", field="--manifest")
        fields.pop("files", None)
    for key in ("server", "model", "version"):
        if getattr(args, key):
            fields[key] = getattr(args, key)
        if not fields.get(key):
            raise PermanentError(f"say the {key}: --{key} or in --manifest", field=key)
    if args.deployment:
        fields["deployment"] = args.deployment
    chosen = accelerator(args.gpu, args.gpu_count, args.tpu)
    if chosen is not None:
        fields["accelerator"] = chosen
    if args.min_replicas or args.max_replicas:
        low = args.min_replicas or 1
        fields["replicas"] = {"min": low, "max": max(args.max_replicas or low, low)}
    server, model, version = (str(fields.pop(k)) for k in ("server", "model", "version"))
    manifest = build_manifest(files, server=server, model=model, version=version, **fields)
    bucket = parse_gs_uri(args.bucket.rstrip("/") + "/x")[0]
    print(f"uploading {len(files)} file(s) to gs://{bucket}/models/{server}/{model}/"
          f"{version}/, then deploy.yaml")
    name, generation = upload_version(bucket, files, manifest)
    print(f"gs://{bucket}/{name} generation {generation}: `accelops models status {model}` "
          f"follows the rollout")
    return 0


def accelerator(gpu: str | None, gpu_count: int | None,
                tpu: str | None) -> dict[str, Any] | None:
    """The manifest's ``accelerator`` from the upload flags, or None to keep the one in
    ``--manifest``. A flag that would be dropped is refused rather than ignored."""
    from shared.errors import PermanentError

    if gpu and tpu:
        raise PermanentError("say one accelerator: --gpu (Triton) or --tpu (Saxml), not both",
                             field="--tpu")
    if gpu_count is not None and not gpu:
        raise PermanentError("--gpu-count needs --gpu, the GPU type it counts",
                             field="--gpu-count")
    if gpu:
        return {"gpu": {"type": gpu, "count": 1 if gpu_count is None else gpu_count}}
    if tpu:
        return {"tpu": tpu}
    return None


def add_commands(sub: Any) -> None:
    models = sub.add_parser(
        "models", help="served models: list, status, rollback, upload",
        description="Reads the rollout ledgers in the serving namespace of the cluster named "
                    "by the environment (KUBECONFIG or ACCELOPS_PROJECT/LOCATION/CLUSTER).")
    actions = models.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="every model: current and previous versions, "
                                             "Saxml servers, rollout state, last failure")
    listing.set_defaults(func=cmd_list)
    status = actions.add_parser("status", help="one model's rollouts, newest first, and the "
                                               "serving Saxml version's model servers")
    status.add_argument("model")
    status.set_defaults(func=cmd_status)
    back = actions.add_parser("rollback", help="serve a version that served before")
    back.add_argument("model")
    back.add_argument("--to", metavar="VERSION", help="default: the previous version")
    back.set_defaults(func=cmd_rollback)
    upload = actions.add_parser(
        "upload", help="upload a model version: its files, then a deploy.yaml listing them",
        description="Uploads every file below DIRECTORY to "
                    "gs://BUCKET/models/SERVER/MODEL/VERSION/ and then the manifest, with "
                    "each file's md5: the manifest's arrival deploys the version.")
    upload.add_argument("directory", help="the version's files (config.pbtxt, model.py, ...)")
    upload.add_argument("bucket", help="gs://BUCKET, the models bucket")
    upload.add_argument("--server", choices=["triton", "saxml"])
    upload.add_argument("--model")
    upload.add_argument("--version", help="v<N> or <N>")
    upload.add_argument("--deployment", help="the Deployment to serve it (default: the model)")
    upload.add_argument("--gpu", help="GPU type, e.g. nvidia-l4 (Triton; the default)")
    upload.add_argument("--gpu-count", type=int,
                        help="GPUs per replica, with --gpu (default 1)")
    upload.add_argument("--tpu", help="TPU type from `accelops catalogue` (Saxml)")
    upload.add_argument("--min-replicas", type=int)
    upload.add_argument("--max-replicas", type=int)
    upload.add_argument("--manifest", help="a deploy.yaml with the other fields (saxml, "
                                           "autoscaling...); its files list is recomputed")
    upload.set_defaults(func=cmd_upload)
    for parser in (listing, status, back):
        parser.add_argument("--config", help="config YAML (default: $ACCELOPS_CONFIG)")
