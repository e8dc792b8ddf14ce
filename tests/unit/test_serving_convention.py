"""The upload convention and the storage events that report uploads."""

from __future__ import annotations

import base64
import json
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.errors import InvalidEventError, PermanentError
from shared.serving.convention import parse_object_name
from shared.serving.events import parse_storage_event
from tests.serving_fixtures import EVENTS


def cloud_event(attributes: dict, data: object) -> SimpleNamespace:
    event = SimpleNamespace(data=data)
    event.get = attributes.get  # type: ignore[attr-defined]
    return event


def test_a_manifest_path_is_split_into_server_model_and_version():
    upload = parse_object_name("models/triton/toy-lm/v3/deploy.yaml")

    assert upload is not None
    assert (upload.server, upload.model, upload.version, upload.is_manifest) == \
        ("triton", "toy-lm", "v3", True)
    assert upload.version_prefix == "models/triton/toy-lm/v3/"


def test_objects_outside_models_are_not_uploads():
    assert parse_object_name("releases/toy-lm/r-1/toy-lm/config.pbtxt") is None
    assert parse_object_name("notes.txt") is None


@pytest.mark.parametrize(("name", "field"), [
    ("models/triton/../x/v1/deploy.yaml", "model"),
    ("models/triton/toy-lm/v1/../deploy.yaml", "name"),
    ("models/triton/toy-lm/v1/a//deploy.yaml", "name"),
    ("models/triton/toy-lm/v0/deploy.yaml", "version"),
    ("models/triton/toy-lm/latest/deploy.yaml", "version"),
    ("models/tf/toy-lm/v1/deploy.yaml", "server"),
    ("models/triton/toy-lm/v1/.hidden", "name"),
    ("models/triton/toy-lm/v1", "name"),
    ("models/triton/-x/v1/deploy.yaml", "model"),
])
def test_names_that_break_the_convention_are_refused_with_the_part(name, field):
    with pytest.raises(PermanentError) as error:
        parse_object_name(name)

    assert error.value.field == field


@given(st.text(max_size=300))
def test_an_accepted_name_never_escapes_its_version_directory(suffix):
    name = "models/triton/toy-lm/v1/" + suffix
    try:
        upload = parse_object_name(name)
    except PermanentError:
        return
    assert upload is not None
    segments = upload.relpath.split("/")
    assert all(s not in ("", ".", "..") and not s.startswith(("/", "\\")) for s in segments)
    assert all(c.isascii() and (c.isalnum() or c in "._-/") for c in upload.relpath)


def test_the_eventarc_storage_event_is_read():
    sample = json.loads((EVENTS / "eventarc_storage_finalized.json").read_text())

    event = parse_storage_event(cloud_event(sample["attributes"], sample["data"]))

    assert event is not None
    assert event.key == \
        "gs://acme-models/models/triton/toy-lm/v1/deploy.yaml#1763892902431000"
    assert event.md5_hash == "1B2M2Y8AsgTpgAmY7PhCfg=="


def test_the_pubsub_notification_gives_the_same_key():
    envelope = json.loads((EVENTS / "pubsub_push_storage_notification.json").read_text())
    attributes = {"id": "1", "type": "google.cloud.pubsub.topic.v1.messagePublished"}

    event = parse_storage_event(cloud_event(attributes, envelope))

    assert event is not None
    assert event.key == \
        "gs://acme-models/models/triton/toy-lm/v1/deploy.yaml#1763892902431000"


def test_deletes_and_other_storage_events_are_not_finalizes():
    envelope = json.loads((EVENTS / "pubsub_push_storage_notification.json").read_text())
    envelope["message"]["attributes"]["eventType"] = "OBJECT_DELETE"
    sample = json.loads((EVENTS / "eventarc_storage_finalized.json").read_text())
    deleted = dict(sample["attributes"], type="google.cloud.storage.object.v1.deleted")

    assert parse_storage_event(cloud_event({"id": "1"}, envelope)) is None
    assert parse_storage_event(cloud_event(deleted, sample["data"])) is None


@pytest.mark.parametrize("attributes", [
    {"bucketId": "UPPER", "objectGeneration": "1"},
    {"bucketId": "acme-models", "objectGeneration": "-1"},
    {"bucketId": "acme-models", "objectGeneration": "1", "objectId": ""},
])
def test_a_notification_with_unusable_coordinates_is_not_a_storage_event(attributes):
    message = {"messageId": "5", "data": base64.b64encode(b"{}").decode(),
               "attributes": {"eventType": "OBJECT_FINALIZE", "objectId": "models/x",
                              **attributes}}

    with pytest.raises(InvalidEventError):
        parse_storage_event(cloud_event({"id": "5"}, {"message": message}))
