"""Uploading model versions the way users do: artifacts first, then the manifest.

Shared by the functional, e2e and benchmark code that drives ``deploy_model``:
files go to ``models/<server>/<model>/<version>/`` with google-cloud-storage, the
manifest lists them with the md5 Cloud Storage will report, and the events are
built in the two shapes the function accepts.
"""

from __future__ import annotations

import base64
import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.serving.upload import build_manifest
from shared.serving.upload import upload_version as upload

REPO = Path(__file__).resolve().parent.parent
EVENTS = REPO / "tests" / "events"

TOY_CONFIG = b"""name: "toy-lm"
backend: "python"
max_batch_size: 8
input [ { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "text_output" data_type: TYPE_STRING dims: [ 1 ] } ]
dynamic_batching { }
"""
TOY_MODEL = b"# a python-backend model\nclass TritonPythonModel:\n    pass\n"


@dataclass(frozen=True)
class Upload:
    bucket: str
    name: str  # the manifest's object name
    generation: int
    manifest: dict[str, Any]


def manifest_for(model: str, version: str, files: dict[str, bytes], *,
                 server: str = "triton", **extra: Any) -> dict[str, Any]:
    return build_manifest(files, server=server, model=model, version=version,
                          **{"replicas": {"min": 1, "max": 2}, **extra})


def upload_version(bucket: Any, model: str, version: str, files: dict[str, bytes], *,
                   server: str = "triton", manifest: dict[str, Any] | None = None,
                   skip: tuple[str, ...] = ()) -> Upload:
    """Upload ``files`` (except ``skip``) then the manifest, through accelops' own
    upload path with the environment's Cloud Storage. ``bucket`` is a
    google-cloud-storage Bucket or a bucket name."""
    bucket_name = bucket if isinstance(bucket, str) else bucket.name
    body = manifest if manifest is not None else manifest_for(model, version, files,
                                                              server=server)
    kept = {path: data for path, data in files.items() if path not in skip}
    name, generation = upload(bucket_name, kept, body, at=(server, model, version))
    return Upload(bucket_name, name, generation, body)


def notification_envelope(bucket: str, name: str, generation: int, *,
                          event_type: str = "OBJECT_FINALIZE",
                          message_id: str = "1001") -> dict[str, Any]:
    """A Cloud Storage Pub/Sub notification as push delivers it (the stored sample,
    re-addressed)."""
    envelope: dict[str, Any] = copy.deepcopy(
        json.loads((EVENTS / "pubsub_push_storage_notification.json").read_text()))
    resource = {"kind": "storage#object", "name": name, "bucket": bucket,
                "generation": str(generation)}
    envelope["message"].update(
        data=base64.b64encode(json.dumps(resource).encode()).decode(),
        messageId=message_id, message_id=message_id)
    envelope["message"]["attributes"].update(
        bucketId=bucket, objectId=name, objectGeneration=str(generation),
        eventType=event_type)
    return envelope


def eventarc_event(bucket: str, name: str, generation: int) -> tuple[dict[str, str], bytes]:
    """(headers, body) of the Eventarc storage event in binary content mode."""
    from cloudevents.conversion import to_binary
    from cloudevents.http import CloudEvent

    sample = json.loads((EVENTS / "eventarc_storage_finalized.json").read_text())
    data = dict(sample["data"], bucket=bucket, name=name, generation=str(generation))
    attributes = dict(sample["attributes"], subject=f"objects/{name}",
                      source=f"//storage.googleapis.com/projects/_/buckets/{bucket}")
    headers, body = to_binary(CloudEvent(attributes, data))
    return dict(headers), body if isinstance(body, bytes) else str(body).encode()
