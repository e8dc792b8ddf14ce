"""The sandbox's Cloud Storage (fake-gcs-server) and the object events it publishes.

Driven with the real google-cloud-storage and google-cloud-pubsub clients, on both
Pub/Sub backends (the stand-in and Google's emulator, through the contract fixtures):
what lands on the topic is what ``sandbox.storage.server`` documents.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sandbox.common.httpserver import free_port
from sandbox.storage import FakeGcs, create_bucket, storage_client
from tests.e2e import pubsub_fixtures as fx

# Fixtures are registered by binding them in this module's namespace.
pubsub_backend = fx.pubsub_backend
contract = fx.contract
push_endpoint = fx.push_endpoint
Contract = fx.Contract

pytestmark = [
    pytest.mark.e2e,
    # Contract.pull polls with return_immediately, so that no wait hangs on a long poll.
    pytest.mark.filterwarnings("ignore:The return_immediately flag is deprecated"),
]

BUCKET = "accelops-models"
OTHER_BUCKET = "accelops-other"


@dataclass
class Storage:
    server: FakeGcs
    client: Any
    pubsub: Contract
    subscription: str

    def upload(self, name: str, data: bytes, bucket: str = BUCKET) -> Any:
        blob = self.client.bucket(bucket).blob(name)
        blob.upload_from_string(data, content_type="text/plain")
        return blob

    def events(self, count: int, within: float = 10.0) -> list[Any]:
        """At least ``count`` messages (waiting up to ``within`` s), acknowledged."""
        received = self.pubsub.pull(self.subscription, count=count, within=within)
        if received:
            self.pubsub.ack(self.subscription, received)
        return [item.message for item in received]


@pytest.fixture
def storage(contract: Contract, tmp_path: Path) -> Iterator[Storage]:
    """fake-gcs-server publishing BUCKET's models/ events to a fresh topic."""
    topic = contract.topic("gcs-events")
    subscription = contract.subscription(topic, "gcs-events-sub")
    server = FakeGcs(free_port(), tmp_path / "fake-gcs.log", contract.project,
                     topic.rsplit("/", 1)[1], BUCKET, pubsub_host=contract.backend.address)
    with server:
        create_bucket(server.url, BUCKET, contract.project)
        create_bucket(server.url, OTHER_BUCKET, contract.project)
        client = storage_client(server.url, contract.project)
        try:
            yield Storage(server, client, contract, subscription)
        finally:
            client.close()


def _by_type(messages: list[Any]) -> dict[str, Any]:
    return {m.attributes["eventType"]: m for m in messages}


def test_an_upload_under_models_publishes_a_finalize_with_the_object_as_json(
        storage: Storage):
    blob = storage.upload("models/triton/toy-lm/v1/model.py", b"print('hi')\n")
    [message] = storage.events(1)
    attributes = dict(message.attributes)
    assert attributes.pop("eventTime").endswith("Z")
    assert attributes == {
        "eventType": "OBJECT_FINALIZE", "bucketId": BUCKET,
        "objectId": "models/triton/toy-lm/v1/model.py",
        "objectGeneration": str(blob.generation), "payloadFormat": "JSON_API_V1",
    }
    data = json.loads(message.data)
    assert data["name"] == "models/triton/toy-lm/v1/model.py"
    assert data["bucket"] == BUCKET
    assert data["generation"] == str(blob.generation)
    assert data["size"] == "12"
    assert data["md5Hash"] == blob.md5_hash
    assert data["crc32c"] == blob.crc32c
    assert data["contentType"] == "text/plain"


def test_objects_outside_models_or_in_another_bucket_publish_nothing(storage: Storage):
    storage.upload("releases/demo/r1/toy-lm/config.pbtxt", b"backend: 'python'")
    storage.upload("models/triton/toy-lm/v1/model.py", b"x", bucket=OTHER_BUCKET)
    storage.upload("models/marker", b"m")
    messages = storage.events(1)
    messages += storage.events(1, within=1.0)
    assert [m.attributes["objectId"] for m in messages] == ["models/marker"]


def test_an_overwrite_finalizes_the_new_generation_and_deletes_the_old(storage: Storage):
    old = storage.upload("models/triton/toy-lm/v1/deploy.yaml", b"version: v1\n")
    storage.events(1)
    new = storage.upload("models/triton/toy-lm/v1/deploy.yaml", b"version: v1 # again\n")
    messages = storage.events(2)
    events = _by_type(messages)
    assert len(messages) == 2
    finalize, delete = events["OBJECT_FINALIZE"], events["OBJECT_DELETE"]
    assert finalize.attributes["objectGeneration"] == str(new.generation)
    assert finalize.attributes["overwroteGeneration"] == str(old.generation)
    assert delete.attributes["objectGeneration"] == str(old.generation)
    assert delete.attributes["overwrittenByGeneration"] == str(new.generation)
    assert json.loads(delete.data)["md5Hash"] == old.md5_hash


def test_a_delete_publishes_object_delete_for_the_generation_deleted(storage: Storage):
    blob = storage.upload("models/triton/toy-lm/v1/model.py", b"x")
    storage.events(1)
    blob.delete()
    [message] = storage.events(1)
    assert message.attributes["eventType"] == "OBJECT_DELETE"
    assert message.attributes["objectGeneration"] == str(blob.generation)
    assert "overwrittenByGeneration" not in message.attributes


def test_a_push_subscription_delivers_the_event_to_an_http_endpoint(
        storage: Storage, push_endpoint: fx.RecordingEndpoint):
    topic = f"projects/{storage.pubsub.project}/topics/{storage.server.topic}"
    storage.pubsub.subscription(topic, "gcs-push",
                                push_config={"push_endpoint": push_endpoint.url})
    storage.upload("models/triton/toy-lm/v2/deploy.yaml", b"version: v2\n")
    assert push_endpoint.wait(1)
    message = push_endpoint.received()[0].body["message"]
    assert message["attributes"]["eventType"] == "OBJECT_FINALIZE"
    assert json.loads(base64.b64decode(message["data"]))["name"] == \
        "models/triton/toy-lm/v2/deploy.yaml"


def test_creating_the_bucket_again_is_harmless(storage: Storage):
    create_bucket(storage.server.url, BUCKET, storage.pubsub.project)
    assert storage.client.bucket(BUCKET).exists()


def test_events_need_a_pubsub_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST", raising=False)
    server = FakeGcs(free_port(), tmp_path / "gcs.log", "sandbox-project", "events", BUCKET)
    with pytest.raises(ValueError, match="Pub/Sub endpoint"):
        server.env()
    assert "PUBSUB_EMULATOR_HOST" not in FakeGcs(
        free_port(), tmp_path / "gcs.log", "sandbox-project", None, None).env(
            {"PUBSUB_EMULATOR_HOST": "127.0.0.1:1"})
