"""The world submit_job runs in, on the stand-ins: the environment a deployed function
would have, the team and state namespaces, the rejections topic and a subscription on
it, and the metrics topic it publishes lifecycle records on, with a subscription
(:data:`JOB_EVENTS_SUB`). Used by the functional tests, the fuzz suite and the
hostile-message benchmark."""

from __future__ import annotations

from pathlib import Path

from sandbox.kubeapi import KubeApiServer
from sandbox.pubsub import PubSubServer, SubscriptionConfig
from shared import kube, pubsub
from shared.config import Topics
from shared.kube import NAMESPACES

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "tests" / "data" / "config.yaml"
PROJECT = "accelops-test"
# The teams of CONFIG, and where submit_job keeps its request locks.
JOB_NAMESPACES = ("research", "inference", "accelops-system")
# Where submit_job and reconcile_slices publish lifecycle records, and a pull
# subscription on it for tests to read them.
METRICS_TOPIC = Topics().loadtest_metrics
JOB_EVENTS_SUB = f"projects/{PROJECT}/subscriptions/job-events-audit"


def topic(name: str) -> str:
    return f"projects/{PROJECT}/topics/{name}"


def jobs_environment(kube_api: KubeApiServer, pubsub_api: PubSubServer,
                     directory: Path) -> dict[str, str]:
    """The variables a deployed submit_job reads (a kubeconfig is written to directory)."""
    kubeconfig = kube_api.write_kubeconfig(directory / "kubeconfig")
    return {"KUBECONFIG": str(kubeconfig), "PUBSUB_EMULATOR_HOST": pubsub_api.address,
            "ACCELOPS_CONFIG": str(CONFIG), "ACCELOPS_PROJECT": PROJECT}


def provision_jobs(pubsub_api: PubSubServer, rejections_subscription: str,
                   *, topics: tuple[str, ...] = ("job-rejections",)) -> kube.KubeClient:
    """With jobs_environment set: the namespaces, the topics (``topics`` and the metrics
    topic) and pull subscriptions on the rejections and metrics topics; returns a
    Kubernetes client for reading results back."""
    kube.reset_client()
    pubsub.reset_client()
    client = kube.get_client()
    for namespace in JOB_NAMESPACES:
        client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": namespace}})
    for name in dict.fromkeys((*topics, METRICS_TOPIC)):
        pubsub_api.broker.create_topic(topic(name))
    pubsub_api.broker.create_subscription(SubscriptionConfig(
        name=rejections_subscription, topic=topic("job-rejections")))
    pubsub_api.broker.create_subscription(SubscriptionConfig(
        name=JOB_EVENTS_SUB, topic=topic(METRICS_TOPIC)))
    return client
