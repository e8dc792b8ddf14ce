"""The submit_job entry point, in process, against the sandbox stand-ins over sockets.

Each test gets its own Kubernetes API and Pub/Sub endpoint on 127.0.0.1 and the
environment a deployed function would have; the production adapters reach them
through the standard variables, exactly as in the sandbox.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import functions_framework
import pytest
from google.cloud import pubsub_v1

from sandbox.common.clock import SimClock
from sandbox.gke import GkeApiServer, GkeState, start_gke_api
from sandbox.kubeapi import KubeApiServer, install_crds, start_kube_api
from sandbox.pubsub import PubSubServer, start_pubsub
from shared import kube, pubsub
from shared.kube import JOBSETS
from tests.jobs_fixtures import JOB_EVENTS_SUB, PROJECT, REPO, jobs_environment, provision_jobs

EVENTS = REPO / "tests" / "events"
REJECTIONS_SUB = f"projects/{PROJECT}/subscriptions/rejections-audit"


def load_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


def push_envelope(payload: Any, message_id: str = "9876543210") -> dict[str, Any]:
    """The stored Pub/Sub push body with its data and message id replaced."""
    envelope = copy.deepcopy(load_event("pubsub_push_job_request.json"))
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    envelope["message"].update(data=base64.b64encode(data).decode(), messageId=message_id,
                               message_id=message_id)
    return envelope


def job_request() -> dict[str, Any]:
    """The job request carried by the stored push event."""
    data = load_event("pubsub_push_job_request.json")["message"]["data"]
    result: dict[str, Any] = json.loads(base64.b64decode(data))
    return result


@pytest.fixture(scope="session")
def app_client() -> Any:
    app = functions_framework.create_app("submit_job", str(REPO / "functions" / "main.py"),
                                         "cloudevent")
    return app.test_client()


@pytest.fixture
def kube_api(tmp_path: Path) -> Iterator[KubeApiServer]:
    server = start_kube_api()
    install_crds(server.store)
    try:
        yield server
    finally:
        server.stop()


# accelops keeps its state (leases, records) in this namespace.
STATE_NAMESPACE = "accelops-system"


@pytest.fixture
def system_client(kube_api: KubeApiServer, tmp_path: Path,
                  monkeypatch: pytest.MonkeyPatch) -> Iterator[kube.KubeClient]:
    """The library's Kubernetes client, on the stand-in, with the state namespace made."""
    monkeypatch.setenv("KUBECONFIG", str(kube_api.write_kubeconfig(tmp_path / "kubeconfig")))
    kube.reset_client()
    client = kube.get_client()
    client.create(kube.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": STATE_NAMESPACE}})
    yield client
    kube.reset_client()


@pytest.fixture
def pubsub_api() -> Iterator[PubSubServer]:
    server = start_pubsub(pull_wait_seconds=0.3)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def cluster(kube_api: KubeApiServer, pubsub_api: PubSubServer, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[kube.KubeClient]:
    """The function's environment, team namespaces, the rejections topic and a pull
    subscription on it; yields a Kubernetes client for reading results back."""
    for key, value in jobs_environment(kube_api, pubsub_api, tmp_path).items():
        monkeypatch.setenv(key, value)
    client = provision_jobs(pubsub_api, REJECTIONS_SUB)
    try:
        yield client
    finally:
        kube.reset_client()
        pubsub.reset_client()


@pytest.fixture(scope="module")
def reconcile_app() -> Any:
    """reconcile_slices under functions-framework."""
    return functions_framework.create_app("reconcile_slices", str(REPO / "functions/main.py"),
                                          "cloudevent").test_client()


@pytest.fixture
def clock() -> SimClock:
    """The GKE API's clock, advanced by hand."""
    return SimClock(speed=1.0)


@pytest.fixture
def gke_api(kube_api: KubeApiServer, clock: SimClock, cluster: kube.KubeClient,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[GkeApiServer]:
    """The sandbox GKE API on ``clock``, with the cluster, and the environment naming it."""
    state = GkeState(clock)
    state.add_cluster("accelops-test", "us-central2-b", "sandbox", kube_api.url)
    server = start_gke_api(state)
    monkeypatch.setenv("ACCELOPS_GKE_ENDPOINT", server.url)
    monkeypatch.setenv("ACCELOPS_LOCATION", "us-central2-b")
    monkeypatch.setenv("ACCELOPS_CLUSTER", "sandbox")
    try:
        yield server
    finally:
        server.stop()


def jobsets(client: kube.KubeClient) -> list[dict[str, Any]]:
    return client.list(JOBSETS)


def pull_rejections(max_messages: int = 10) -> list[Any]:
    subscriber = pubsub_v1.SubscriberClient()
    try:
        response = subscriber.pull(subscription=REJECTIONS_SUB, max_messages=max_messages,
                                   timeout=5)
        if response.received_messages:
            subscriber.acknowledge(subscription=REJECTIONS_SUB,
                                   ack_ids=[m.ack_id for m in response.received_messages])
        return [m.message for m in response.received_messages]
    finally:
        subscriber.close()


def pull_job_events(max_messages: int = 100) -> list[Any]:
    """The lifecycle messages published so far on the metrics topic (acknowledged)."""
    subscriber = pubsub_v1.SubscriberClient()
    try:
        response = subscriber.pull(subscription=JOB_EVENTS_SUB, max_messages=max_messages,
                                   timeout=5)
        if response.received_messages:
            subscriber.acknowledge(subscription=JOB_EVENTS_SUB,
                                   ack_ids=[m.ack_id for m in response.received_messages])
        return [m.message for m in response.received_messages]
    finally:
        subscriber.close()


@pytest.fixture(scope="session")
def bigquery_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.bigquery_fixtures import bigquery_emulator

    with bigquery_emulator(tmp_path_factory.mktemp("bq") / "bqemulator.log") as emulator:
        yield emulator.url


@pytest.fixture
def metrics_store(bigquery_endpoint: str, tmp_path: Path,
                  monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fresh dataset with the metrics schema, and the environment ingest_metrics reads."""
    import yaml

    from shared.metrics.schema import apply_schema
    from tests.bigquery_fixtures import PROJECT as BQ_PROJECT
    from tests.bigquery_fixtures import fresh_dataset

    config = fresh_dataset()
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"metrics": config.model_dump()}))
    monkeypatch.setenv("BIGQUERY_EMULATOR_HOST", bigquery_endpoint)
    monkeypatch.setenv("ACCELOPS_PROJECT", BQ_PROJECT)
    monkeypatch.setenv("ACCELOPS_CONFIG", str(path))
    apply_schema(BQ_PROJECT, config)
    return config


@pytest.fixture(scope="session")
def ingest_client() -> Any:
    app = functions_framework.create_app("ingest_metrics", str(REPO / "functions" / "main.py"),
                                         "cloudevent")
    return app.test_client()


SERVING_NAMESPACE = "serving"


@pytest.fixture(scope="session")
def gcs_endpoint_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One fake-gcs-server for the session (its log in a file: a pipe nobody reads
    fills up and stalls the server); tests use buckets of their own."""
    from sandbox.common.httpserver import free_port
    from sandbox.storage import FakeGcs

    log = tmp_path_factory.mktemp("gcs") / "fake-gcs.log"
    with FakeGcs(free_port(), log, PROJECT, None, None) as server:
        yield server.url


@pytest.fixture
def serving_env(kube_api: KubeApiServer, pubsub_api: PubSubServer, gcs_endpoint_url: str,
                tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """deploy_model's and reconcile_models' environment, the serving namespace, the
    rollouts topic and a fresh models bucket; yields the bucket and a Kubernetes client."""
    import uuid

    import yaml
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage as gcs

    from shared import storage
    from shared.kube import NAMESPACES
    from tests.jobs_fixtures import CONFIG

    config = yaml.safe_load(CONFIG.read_text())
    config["serving"] = {"namespace": SERVING_NAMESPACE}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("KUBECONFIG", str(kube_api.write_kubeconfig(tmp_path / "kubeconfig")))
    monkeypatch.setenv("ACCELOPS_CONFIG", str(tmp_path / "config.yaml"))
    monkeypatch.setenv("ACCELOPS_PROJECT", PROJECT)
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub_api.address)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_endpoint_url)
    for module in (kube, pubsub, storage):
        module.reset_client()
    client = kube.get_client()
    client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": SERVING_NAMESPACE}})
    pubsub_api.broker.create_topic(f"projects/{PROJECT}/topics/model-rollouts")
    bucket = gcs.Client(project="test", credentials=AnonymousCredentials()).create_bucket(
        f"models-{uuid.uuid4().hex[:8]}")
    try:
        yield {"bucket": bucket, "kube": client}
    finally:
        for module in (kube, pubsub, storage):
            module.reset_client()


