"""Cloud Storage access: the one module that imports google-cloud-storage.

The client is created on first use and reused across invocations. With
``STORAGE_EMULATOR_HOST`` set the client talks to that endpoint anonymously, as the
library itself supports.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from shared.clients import ClientCache
from shared.errors import (
    AccelopsError,
    ConfigError,
    NotFoundError,
    PermanentError,
    PermissionDeniedError,
    RateLimitedError,
    UnavailableError,
)

__all__ = [
    "ObjectInfo",
    "copy_once",
    "object_info",
    "parse_gs_uri",
    "read_bytes",
    "read_text",
    "reset_client",
    "upload",
    "write_once",
]

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

    # Keyed by the endpoint the client was built for (tests switch endpoints).
    return _clients.get(os.environ.get("STORAGE_EMULATOR_HOST"), build)


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


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """An object generation's metadata, as Cloud Storage reports it."""

    bucket: str
    name: str
    generation: int
    size: int
    md5_hash: str | None  # base64; absent for composite objects
    crc32c: str | None  # base64


# Bounds the client's own retries of one call: a function has a minute in all, and a
# retried event is better than one that times out mid-way.
_CALL_SECONDS = 15.0


def _policy() -> dict[str, Any]:
    from google.cloud.storage.retry import DEFAULT_RETRY

    return {"retry": DEFAULT_RETRY.with_timeout(_CALL_SECONDS), "timeout": 10.0}


@contextmanager
def _translated(what: str) -> Iterator[None]:
    """Cloud Storage failures as domain errors: 404 → NotFoundError, 401/403 → a
    permission the deployment lacks, 429 → rate limited, anything else → unavailable."""
    from google.api_core import exceptions as gexc

    try:
        yield
    except gexc.NotFound as exc:
        raise NotFoundError(f"{what}: not found") from exc
    except (gexc.Forbidden, gexc.Unauthorized) as exc:
        raise PermissionDeniedError(f"{what}: permission denied: {exc.message}") from exc
    except gexc.TooManyRequests as exc:
        raise RateLimitedError(f"{what}: rate limited: {exc.message}") from exc
    except AccelopsError:
        raise
    except (gexc.GoogleAPICallError, gexc.RetryError, OSError) as exc:
        raise UnavailableError(f"{what} failed: {exc}") from exc


def object_info(bucket: str, name: str) -> ObjectInfo | None:
    """The live generation's metadata, or None when there is no such object."""
    with _translated(f"reading gs://{bucket}/{name}"):
        blob = _storage_client().bucket(bucket).get_blob(name, **_policy())
    if blob is None:
        return None
    return ObjectInfo(bucket, name, int(blob.generation), int(blob.size or 0),
                      blob.md5_hash, blob.crc32c)


def read_bytes(bucket: str, name: str, *, generation: int | None = None,
               max_bytes: int | None = None) -> bytes:
    """An object's content (a given generation, or the live one).

    Raises NotFoundError when it (or that generation) does not exist, PermanentError
    when it is larger than ``max_bytes`` (checked before downloading).
    """
    what = f"reading gs://{bucket}/{name}" + (f"#{generation}" if generation else "")
    with _translated(what):
        blob = _storage_client().bucket(bucket).get_blob(name, generation=generation,
                                                         **_policy())
        if blob is None:
            raise NotFoundError(f"{what}: not found")
        if max_bytes is not None and int(blob.size or 0) > max_bytes:
            raise PermanentError(f"gs://{bucket}/{name} is {int(blob.size or 0):,} bytes",
                                 field=name, rule=f"at most {max_bytes:,} bytes")
        data: bytes = blob.download_as_bytes(**_policy())  # of blob.generation, the one checked
        return data


def _exists_already(exc: Exception) -> bool:
    from google.api_core import exceptions as gexc

    return isinstance(exc, gexc.PreconditionFailed)


def copy_once(source: ObjectInfo, bucket: str, name: str) -> bool:
    """Server-side copy of one object generation to ``gs://bucket/name`` unless that
    name exists already (then nothing is written: copies are immutable). True when
    this call wrote it."""
    what = f"copying gs://{source.bucket}/{source.name} to gs://{bucket}/{name}"
    client = _storage_client()
    try:
        with _translated(what):
            try:
                client.bucket(source.bucket).copy_blob(
                    client.bucket(source.bucket).blob(source.name),
                    client.bucket(bucket), name,
                    source_generation=source.generation, if_generation_match=0,
                    **_policy())
            except Exception as exc:
                if _exists_already(exc):
                    return False
                raise
    except NotFoundError as exc:
        raise NotFoundError(f"{what}: the source generation is gone", field=source.name) \
            from exc
    return True


def write_once(bucket: str, name: str, data: bytes, content_type: str = "text/plain") -> bool:
    """Write an object unless the name exists (immutable); True when this call wrote it."""
    with _translated(f"writing gs://{bucket}/{name}"):
        try:
            _storage_client().bucket(bucket).blob(name).upload_from_string(
                data, content_type=content_type, if_generation_match=0, **_policy())
        except Exception as exc:
            if _exists_already(exc):
                return False
            raise
    return True


def upload(bucket: str, name: str, data: bytes, content_type: str = "application/octet-stream",
           ) -> int:
    """Write (or overwrite) an object; its new generation."""
    with _translated(f"writing gs://{bucket}/{name}"):
        blob = _storage_client().bucket(bucket).blob(name)
        blob.upload_from_string(data, content_type=content_type, **_policy())
        return int(blob.generation)
