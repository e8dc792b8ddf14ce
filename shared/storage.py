"""Cloud Storage access: the one module that imports google-cloud-storage.

The client is created on first use and reused across invocations. With
``STORAGE_EMULATOR_HOST`` set the client talks to that endpoint anonymously, as the
library itself supports.
"""

from __future__ import annotations

import os
from typing import Any

from shared.clients import ClientCache
from shared.errors import ConfigError, NotFoundError, PermanentError, UnavailableError

__all__ = ["parse_gs_uri", "read_text", "reset_client"]

_clients: ClientCache[Any] = ClientCache()


def parse_gs_uri(uri: str) -> tuple[str, str]:
    """Split ``gs://bucket/path/to/object`` into (bucket, object name)."""
    if not uri.startswith("gs://"):
        raise ConfigError(f"{uri!r} is not a gs:// URI", field="uri")
    bucket, _, name = uri[len("gs://"):].partition("/")
    if not bucket or not name:
        raise ConfigError(f"{uri!r} must name a bucket and an object", field="uri")
    return bucket, name


def reset_client() -> None:
    """Forget the cached client (tests that switch endpoints)."""
    _clients.reset()


def _storage_client() -> Any:
    def build() -> Any:
        from google.cloud import storage  # type: ignore[attr-defined]

        if os.environ.get("STORAGE_EMULATOR_HOST"):
            from google.auth.credentials import AnonymousCredentials

            return storage.Client(
                project=os.environ.get("ACCELOPS_PROJECT", "local"),
                credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
            )
        return storage.Client()

    return _clients.get(None, build)


def read_text(uri: str) -> str:
    """The object's content as UTF-8 text.

    Raises NotFoundError when the object does not exist, PermanentError when it is not
    UTF-8, UnavailableError when Cloud Storage fails or cannot be reached.
    """
    from google.api_core import exceptions as gexc

    bucket, name = parse_gs_uri(uri)
    try:
        data: bytes = _storage_client().bucket(bucket).blob(name).download_as_bytes()
    except gexc.NotFound as exc:
        raise NotFoundError(f"{uri} does not exist", field="uri") from exc
    except (gexc.GoogleAPICallError, OSError) as exc:
        raise UnavailableError(f"reading {uri} failed: {exc}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PermanentError(f"{uri} is not UTF-8 text", field="uri") from exc
