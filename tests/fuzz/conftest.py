"""The fuzz suite: hostile input, over HTTP, through functions-framework, against the
sandbox stand-ins (Kubernetes API, Pub/Sub, BigQuery) over sockets.

Stand-ins are started once per module, since every test here runs thousands of
examples. The budget scales with ``ACCELOPS_FUZZ_SCALE`` (1 in ``make test``, which
keeps the suite within minutes; ``make fuzz`` runs a longer campaign).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import functions_framework
import pytest
from hypothesis import HealthCheck, settings

from sandbox.kubeapi import KubeApiServer, install_crds, start_kube_api
from sandbox.pubsub import PubSubServer, start_pubsub
from shared import bigquery, kube, pubsub
from shared.kube import JOBSETS
from tests.jobs_fixtures import PROJECT, REPO, jobs_environment, provision_jobs

MAIN = str(REPO / "functions" / "main.py")
REJECTIONS_SUB = f"projects/{PROJECT}/subscriptions/fuzz-rejections"

SCALE = float(os.environ.get("ACCELOPS_FUZZ_SCALE", "1"))


def budget(examples: int) -> settings:
    """Hypothesis settings for ``examples`` examples at scale 1."""
    return settings(
        max_examples=max(1, int(examples * SCALE)), deadline=None, database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.function_scoped_fixture,
                               HealthCheck.large_base_example])


@dataclass
class JobsWorld:
    """submit_job and what it writes to: read results back, clean up between examples."""

    client: Any
    kube: kube.KubeClient
    pubsub: PubSubServer
    # True when the last example ended having seen no JobSet and having read every
    # rejection: the next one then starts clean without a clean-up round trip.
    clean: bool = False

    def jobsets(self) -> list[dict[str, Any]]:
        return self.kube.list(JOBSETS)

    def clear_jobsets(self) -> None:
        for jobset in self.jobsets():
            meta = jobset["metadata"]
            self.kube.delete(JOBSETS, meta["name"], meta["namespace"])

    def rejections(self) -> list[Any]:
        """Rejection records published so far (each read once). submit_job awaits its
        publish before answering, so they are there when the response is."""
        broker = self.pubsub.broker
        deliveries = broker.pull(REJECTIONS_SUB, 1000, timeout=0.0)
        if deliveries:
            broker.acknowledge(REJECTIONS_SUB, [d.ack_id for d in deliveries])
        return [d.message for d in deliveries]


@pytest.fixture(scope="module")
def jobs_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobsWorld]:
    kube_api: KubeApiServer = start_kube_api()
    install_crds(kube_api.store)
    pubsub_api: PubSubServer = start_pubsub(pull_wait_seconds=0.3)
    with pytest.MonkeyPatch.context() as env:
        for key, value in jobs_environment(kube_api, pubsub_api,
                                           tmp_path_factory.mktemp("fuzz-kube")).items():
            env.setenv(key, value)
        client = provision_jobs(pubsub_api, REJECTIONS_SUB,
                                topics=("job-rejections", "slices-reconcile"))
        app = functions_framework.create_app("submit_job", MAIN, "cloudevent")
        try:
            yield JobsWorld(app.test_client(), client, pubsub_api)
        finally:
            kube.reset_client()
            pubsub.reset_client()
            pubsub_api.stop()
            kube_api.stop()


@dataclass
class MetricsWorld:
    client: Any
    dataset: str

    def query(self, sql: str) -> list[dict[str, Any]]:
        return bigquery.query(PROJECT, sql.replace("DATASET", f"`{PROJECT}.{self.dataset}`"))


@pytest.fixture(scope="module")
def metrics_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsWorld]:
    from tests.bigquery_fixtures import metrics_dataset

    with metrics_dataset(tmp_path_factory.mktemp("fuzz-bq")) as dataset:
        yield MetricsWorld(dataset.ingest, dataset.config.dataset)
