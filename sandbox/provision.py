"""Creating what the functions expect to find: namespaces and Kueue queues in the
Kubernetes API, topics and subscriptions in Pub/Sub.

Uses the real clients (the project's Kubernetes adapter, google-cloud-pubsub) over
the wire, and is idempotent: running it against an already provisioned sandbox
changes nothing.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sandbox.topology import DEFAULT_TPU_QUOTA, TEAM_TPU_QUOTA, FunctionSpec
from shared.config import AccelopsConfig, Settings, load_config
from shared.kube import NAMESPACES, Resource, get_client

__all__ = ["provision_kubernetes", "provision_pubsub"]

LOCAL_QUEUES = Resource("kueue.x-k8s.io", "v1beta1", "localqueues")
CLUSTER_QUEUES = Resource("kueue.x-k8s.io", "v1beta1", "clusterqueues", namespaced=False)
FIELD_MANAGER = "accelops-sandbox"


def provision_kubernetes(config_path: Path) -> None:
    """A namespace, a Kueue ClusterQueue (with TPU quota) and a LocalQueue for every
    configured team, and the namespace of reconcile_slices' record."""
    config = load_config(str(config_path))
    kube = get_client(Settings.from_env())
    kube.apply(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": config.slices.state_namespace}},
               field_manager=FIELD_MANAGER)
    for team_name, team in config.teams.items():
        kube.apply(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": team.namespace,
                                             "labels": {"accelops.dev/team": team_name}}},
                   field_manager=FIELD_MANAGER)
        cluster_queue = f"{team_name}-cluster-queue"
        kube.apply(CLUSTER_QUEUES, {
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
            "metadata": {"name": cluster_queue},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": ["google.com/tpu"],
                "flavors": [{"name": "tpu", "resources": [{
                    "name": "google.com/tpu",
                    "nominalQuota": TEAM_TPU_QUOTA.get(team_name, DEFAULT_TPU_QUOTA)}]}],
            }]},
        }, field_manager=FIELD_MANAGER)
        kube.apply(LOCAL_QUEUES, {
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
            "metadata": {"name": team.queue, "namespace": team.namespace},
            "spec": {"clusterQueue": cluster_queue},
        }, field_manager=FIELD_MANAGER)


def _topic_id(key: str, config: AccelopsConfig) -> str:
    return str(getattr(config.topics, key, key))


def provision_pubsub(config_path: Path, project: str, functions: Iterable[FunctionSpec],
                     pull_subscriptions: Mapping[str, str],
                     push_endpoints: Mapping[str, str] | None) -> None:
    """Topics and pull subscriptions; with push_endpoints, the functions' push
    subscriptions too (created once the functions listen)."""
    from google.api_core import exceptions as gexc
    from google.cloud import pubsub_v1  # type: ignore[attr-defined,unused-ignore]

    config = load_config(str(config_path))
    publisher = pubsub_v1.PublisherClient()
    subscriber = pubsub_v1.SubscriberClient()

    def ensure(create: Any, **request: Any) -> None:
        with contextlib.suppress(gexc.AlreadyExists):
            create(request=request)

    functions = list(functions)
    try:
        if push_endpoints is None:
            topics = {_topic_id(f.topic_key, config) for f in functions}
            topics |= {f.dead_letter_topic for f in functions}
            topics |= {_topic_id(t, config) for t in pull_subscriptions.values()}
            topics.add(config.topics.rejections)
            for topic in sorted(topics):
                ensure(publisher.create_topic, name=publisher.topic_path(project, topic))
            for sub_id, topic_key in pull_subscriptions.items():
                ensure(subscriber.create_subscription,
                       name=subscriber.subscription_path(project, sub_id),
                       topic=publisher.topic_path(project, _topic_id(topic_key, config)))
            return
        for spec in functions:
            retry = spec.retry
            ensure(
                subscriber.create_subscription,
                name=subscriber.subscription_path(project, spec.subscription),
                topic=publisher.topic_path(project, _topic_id(spec.topic_key, config)),
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
