"""The sandbox's Cloud Storage: fake-gcs-server publishing object events to Pub/Sub.

See ``server`` for the process, what it publishes, and why only its memory backend is
used.
"""

from __future__ import annotations

from sandbox.storage.server import (
    DEFAULT_EVENTS,
    DEFAULT_OBJECT_PREFIX,
    FakeGcs,
    FakeGcsNotInstalledError,
    create_bucket,
    fake_gcs_binary,
    storage_client,
)

__all__ = [
    "DEFAULT_EVENTS",
    "DEFAULT_OBJECT_PREFIX",
    "FakeGcs",
    "FakeGcsNotInstalledError",
    "create_bucket",
    "fake_gcs_binary",
    "storage_client",
]
