"""Saxml rollouts: model servers on TPU slices, published through the HTTP proxy.

A Saxml version is served by model servers that join the Sax cell, on a TPU slice
of the manifest's type. The slice comes from the same machinery as training: the
model servers are a JobSet queued through the Saxml team's Kueue LocalQueue, and
``reconcile_slices`` creates its node pool once Kueue admits it and deletes it
when the JobSet goes. No pool is made by hand.

Each version is published under a Sax model name of its own
(``/sax/<cell>/<model>-v<N>``), so the new one is loaded beside the old:

1. ``deploy_model`` writes the snapshot, creates the model-server JobSet and
   records the rollout (``rolling-out``: waiting for the slice);
2. once the servers run, ``reconcile_models`` publishes the version through the
   proxy (``/publish``: model path, checkpoint in the snapshot, replicas);
3. once it answers a generation (``/listcell`` counts servers *assigned* to a model,
   loading, loaded or failed alike, so only a probe through ``/generate`` shows a
   version servable), the previous version is unpublished and its JobSet deleted —
   only then — and the new version is current;
4. a version that does not become servable in time is unpublished and its JobSet
   deleted: the previous one never stopped serving (``rolled-back``). Loading and
   a broken checkpoint look alike from outside, so this is decided by
   ``serving.rollout_timeout_seconds`` unless the probe's answer cannot change.

Model servers run for as long as their version serves, however often they crash.
A Job fails once its pods' failures exceed ``backoffLimit``, and under
``restartPolicy: OnFailure`` every container restart of its running pods counts
(``pastBackoffLimitOnFailure`` in kubernetes v1.32 ``pkg/controller/job/
job_controller.go``); a failed Job makes JobSet restart every Job, counting towards
``failurePolicy.maxRestarts``, which nothing ever resets (jobset v0.7.2
``pkg/controllers/failure_policy.go``), then fail; Kueue finishes the Workload of a
failed JobSet and ``reconcile_slices`` deletes the slice. With a ``backoffLimit`` of 0
and 3 restarts, as training jobs have, the fourth crash in a version's life took its
servers away for good. So the model servers' Jobs keep ``restartPolicy: OnFailure``
(the kubelet restarts a crashed server in place, on its node, with a crash back-off
that grows to at most 5 minutes, its ``MaxContainerBackOff``) and get
``backoffLimit`` 2147483647, Kubernetes' own "no limit" (it defaults ``backoffLimit``
to ``math.MaxInt32`` when a Job limits failures per index instead,
``pkg/apis/batch/v1/defaults.go``):
crash-looping at the back-off's ceiling, twelve restarts an hour, a server would
take twenty thousand years to reach it. A pod that fails outright — a spot
preemption or maintenance (``DisruptionTarget``), an eviction — counts one failure
and the Job creates it again, so disruptions are ridden out by the Job without a
JobSet restart. (A ``podFailurePolicy`` could tell them apart, but Kubernetes allows
it only with ``restartPolicy: Never``, which would trade the in-place restart for a
new pod per crash.) The budget is not reset by accelops (a JobSet's restart count
is its controller's status) and the kind stays JobSet: Kueue v0.10.1 could queue a
StatefulSet as one serving pod group (``pkg/controller/jobs/statefulset``), but
slices are provisioned for JobSets, one node pool per replicated job's replica, and
a second path for another kind buys nothing the Job's limit does not. Model servers
of one multi-host slice restart independently; Saxml's servers re-join the cell
when they come back.

A version that serves is followed all its life (:mod:`shared.serving.saxml_servers`):
crashes are recorded in the ledger, and servers lost as a whole (their JobSet failed,
completed or gone) are recorded, logged at ERROR and created again.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

from shared.config import AccelopsConfig
from shared.errors import AlreadyExistsError, ConfigError, NotFoundError, PermanentError
from shared.jobspec.labels import JOBSET_NAME_LABEL, LABEL_REQUEST_KEY
from shared.jobspec.policy import check_policy
from shared.jobspec.render import render_jobset
from shared.jobspec.request import JobRequest
from shared.jobspec.tpu import lookup
from shared.kube import CONFIG_MAPS, JOBSETS, PODS, KubeClient
from shared.log import get_logger
from shared.names import jobset_name, request_key
from shared.serving import release as releases
from shared.serving.ledger import Ledger, Rollout
from shared.serving.manifest import DeployManifest
from shared.serving.rollout_start import DeployOutcome, start_rollout
from shared.serving.saxml import SaxmlProxy, sax_model_name
from shared.serving.saxml_cell import SAXML_CONFIG_MAP
from shared.serving.triton import snapshot_names
from shared.storage import ObjectInfo

if TYPE_CHECKING:
    from shared.serving.saxml import SaxmlProxy

__all__ = ["MODEL_SERVER_BACKOFF_LIMIT", "PROXY_ENV", "advance_saxml", "model_server_jobset",
           "model_server_name", "model_servers", "sax_root", "saxml_namespace", "start_saxml"]

log = get_logger("accelops.serving")

# Where the Saxml HTTP proxy answers; production reaches the in-cluster Service.
PROXY_ENV = "ACCELOPS_SAXML_PROXY"
DEFAULT_PROXY = "http://sax-proxy.serving.svc.cluster.local:8888"
_MODEL_SERVER_PORT = 10001
# The Job's pod failures (container restarts included, under OnFailure) it tolerates:
# Kubernetes' largest, which it uses itself for "no limit" (module docstring).
MODEL_SERVER_BACKOFF_LIMIT = 2_147_483_647
# Training jobs may restart a few times; the model servers' Jobs do not fail, so this
# only matters if one is made to fail some other way.
_MODEL_SERVER_JOBSET_RESTARTS = 3


def _proxy() -> SaxmlProxy:
    return SaxmlProxy(os.environ.get(PROXY_ENV) or DEFAULT_PROXY)


def _team(config: AccelopsConfig) -> str:
    team = config.serving.saxml_team
    if team is None or team not in config.teams:
        raise ConfigError("serving.saxml_team must name a team of the configuration: its "
                          "Kueue queue provides the Saxml model servers' TPU slices",
                          field="serving.saxml_team")
    return team


def saxml_namespace(config: AccelopsConfig) -> str:
    """Where the model servers run: the namespace of ``serving.saxml_team``."""
    return config.teams[_team(config)].namespace


def _request_name(rollout: Rollout) -> str:
    return f"sax-{rollout.spec['deployment']}-{rollout.version}"


def model_server_name(rollout: Rollout) -> str:
    """The name of the version's model-server JobSet (the same every time it is made)."""
    return jobset_name(_request_name(rollout), rollout.id)


def model_server_jobset(config: AccelopsConfig, rollout: Rollout,
                        sax_root: str) -> dict[str, Any]:
    """The model servers of one version as a Kueue-queued JobSet on one TPU slice,
    running as the Saxml identity (Workload Identity), joining the cell whose state
    is under ``sax_root`` and restarting in place however often they crash."""
    spec = rollout.spec
    shape = lookup(spec["accelerator"]["tpu"])
    chip = {"v5e": "tpuv5e", "v4": "tpuv4", "v5p": "tpuv5p", "v6e": "tpuv6e"}.get(
        shape.family, shape.family)
    request = JobRequest.model_validate({
        "name": _request_name(rollout),
        "team": _team(config),
        "image": config.serving.saxml_model_server_image,
        "args": [f"--sax_cell={config.serving.saxml_cell}",
                 f"--port={_MODEL_SERVER_PORT}", f"--platform_chip={chip}",
                 f"--platform_topology={shape.topology}"],
        "env": dict((spec.get("saxml") or {}).get("env") or {}),
        "tpu": {"type": shape.type, "slices": 1},
        "priority": "high",
        "max_restarts": _MODEL_SERVER_JOBSET_RESTARTS,
        "request_id": rollout.id,
    })
    try:
        admission = check_policy(request, config)
    except PermanentError as exc:
        raise ConfigError(f"the Saxml team's policy refuses its model servers: "
                          f"{exc.message}", field="serving.saxml_team") from exc

    # Restarted in place: the Job API allows a podFailurePolicy only with Never, so the
    # renderer leaves it out, and disruptions are failures the Job replaces a pod for.
    jobset = render_jobset(admission, rollout.id, restart_policy="OnFailure")
    job = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]
    job["backoffLimit"] = MODEL_SERVER_BACKOFF_LIMIT
    # Job requests may not choose an identity; the model servers need one to read the
    # release snapshot and the cell's state, so it is set here, from the config.
    pod = job["template"]["spec"]
    pod["serviceAccountName"] = config.serving.saxml_service_account
    pod["automountServiceAccountToken"] = False
    pod["containers"][0].setdefault("env", []).append({"name": "SAX_ROOT",
                                                        "value": sax_root})
    return jobset


def sax_root(kube: KubeClient, config: AccelopsConfig) -> str:
    """Where the cell keeps its state: the SAX_ROOT of the serving namespace's Saxml
    settings (:mod:`shared.serving.saxml_cell`)."""
    try:
        settings = kube.get(CONFIG_MAPS, SAXML_CONFIG_MAP, config.serving.namespace)
    except NotFoundError as exc:
        raise ConfigError(f"ConfigMap {config.serving.namespace}/{SAXML_CONFIG_MAP} is "
                          f"missing: apply the manifests (kubectl apply -k)",
                          field="serving") from exc
    root = (settings.get("data") or {}).get("SAX_ROOT")
    if not root:
        raise ConfigError(f"ConfigMap {SAXML_CONFIG_MAP} has no SAX_ROOT", field="serving")
    return str(root)


def start_saxml(kube: KubeClient, config: AccelopsConfig, ledger: Ledger, rollout: Rollout,
                manifest: DeployManifest, sources: dict[str, ObjectInfo], bucket: str,
                prefix: str) -> DeployOutcome:
    """Record the rollout, write the snapshot, create the model-server JobSet."""
    assert manifest.saxml is not None
    # The checkpoint directory in the snapshot: where one of its files is copied,
    # less that file's path below the version directory.
    checkpoint = manifest.saxml.checkpoint.rstrip("/")
    inside = next(f.path for f in manifest.files if f.path.startswith(checkpoint + "/"))
    copied = snapshot_names(prefix, manifest.model, manifest.version_number, [inside])[inside]
    checkpoint_dir = copied[:-len(inside)] + checkpoint
    rollout = rollout.model_copy(update={
        "serving": sax_model_name(config.serving.saxml_cell, manifest.target, manifest.version),
        "spec": {**rollout.spec, "checkpoint": f"gs://{bucket}/{checkpoint_dir}"}})
    jobset_name = ""

    def act() -> None:
        nonlocal jobset_name
        releases.copy_snapshot(manifest, sources, bucket, prefix, None)
        jobset = model_server_jobset(config, rollout, sax_root(kube, config))
        jobset_name = jobset["metadata"]["name"]
        with contextlib.suppress(AlreadyExistsError):
            kube.create(JOBSETS, jobset)

    refused = start_rollout(kube, config, ledger, rollout, act,
                            "waiting for the model servers' TPU slice")
    if refused is not None:
        return refused
    log.info(f"{manifest.model}: Saxml version {manifest.version} requested its model "
             f"servers ({jobset_name})", model=manifest.model)
    return DeployOutcome("started", f"model servers requested for {manifest.version}",
                         manifest.model, rollout.id)


def model_servers(kube: KubeClient, config: AccelopsConfig,
                  rollout: Rollout) -> list[dict[str, Any]]:
    """The model-server JobSets of a version (found by its request key)."""
    return kube.list(JOBSETS, saxml_namespace(config),
                     label_selector=f"{LABEL_REQUEST_KEY}={request_key(rollout.id)}")


def _servers_running(kube: KubeClient, config: AccelopsConfig, rollout: Rollout) -> bool:
    jobsets = model_servers(kube, config, rollout)
    if not jobsets:
        return False
    name = jobsets[0]["metadata"]["name"]
    pods = kube.list(PODS, saxml_namespace(config),
                     label_selector=f"{JOBSET_NAME_LABEL}={name}")
    return bool(pods) and all((p.get("status") or {}).get("phase") == "Running" for p in pods)


def _retire(kube: KubeClient, config: AccelopsConfig, rollout: Rollout) -> None:
    """Unpublish a version and delete its model servers (their slice is then reaped)."""
    if rollout.serving:
        _proxy().unpublish(rollout.serving)
    for jobset in model_servers(kube, config, rollout):
        kube.delete(JOBSETS, jobset["metadata"]["name"], saxml_namespace(config))


def advance_saxml(kube: KubeClient, ledger: Ledger, rollout: Rollout, config: AccelopsConfig,
                  now: float) -> bool:
    """Move one Saxml rollout on (see the module docstring); True when it changed."""
    age = now - rollout.started
    if rollout.state != "rolling-out" or rollout.serving is None:
        ledger.update(rollout.id, state="failed", finished=now,
                      reason=f"cannot continue a Saxml rollout in state {rollout.state}")
        return True
    proxy = _proxy()
    status = proxy.model_status(rollout.serving)
    if status is None:
        if _servers_running(kube, config, rollout):
            spec = rollout.spec
            proxy.publish(rollout.serving, spec["saxml"]["model_path"], spec["checkpoint"],
                          int(spec["saxml"]["replicas"]))
            ledger.update(rollout.id, progress="published; waiting until it is servable")
            return True
        detail = "waiting for the model servers' TPU slice"
    elif status.servable:
        previous = ledger.find(ledger.current)
        if previous is not None and previous.id != rollout.id:
            _retire(kube, config, previous)
        ledger.update(rollout.id, state="ready", finished=now,
                      progress=f"{rollout.serving} servable")
        ledger.promote(rollout.id)
        log.info(f"{ledger.model}: Saxml version {rollout.version} serves", model=ledger.model)
        return True
    else:
        detail = f"published, not servable yet{': ' + status.error if status.error else ''}"
    if age > config.serving.rollout_timeout_seconds or (status is not None and status.error):
        reason = f"{rollout.serving} not servable after {age:.0f} s: {detail}"
        _retire(kube, config, rollout)
        previous = ledger.find(ledger.current)
        state = "rolled-back" if previous is not None and previous.id != rollout.id \
            else "failed"
        ledger.update(rollout.id, state=state, finished=now, reason=reason)
        log.error(f"{ledger.model}: Saxml version {rollout.version} {state}: {reason}",
                  model=ledger.model, version=rollout.version)
        return True
    if rollout.progress == detail:
        return False
    ledger.update(rollout.id, progress=detail)
    return True
