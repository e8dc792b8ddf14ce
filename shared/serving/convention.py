"""The upload convention: where users put model versions in the bucket.

::

    gs://BUCKET/models/<server>/<model>/<version>/<artifact files...>
    gs://BUCKET/models/<server>/<model>/<version>/deploy.yaml      (written last)

``server`` is ``triton`` or ``saxml``; ``model`` a lowercase name that becomes part of
Kubernetes object names; ``version`` ``v<N>`` or ``<N>`` (Triton serves integer
versions, so one rule for both servers). Only the manifest deploys; every other
object is an artifact and its event is acknowledged without effect.

Object names are untrusted: Cloud Storage allows ``../``, empty segments, control
characters and 1,024 bytes of anything. A name is accepted only when every segment
matches a conservative pattern, and it is only ever used as an object name, never
joined into a local path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from shared.errors import PermanentError

__all__ = [
    "MANIFEST_NAME",
    "MODELS_PREFIX",
    "SERVERS",
    "InvalidObjectNameError",
    "UploadPath",
    "parse_object_name",
    "version_number",
]

MODELS_PREFIX = "models/"
MANIFEST_NAME = "deploy.yaml"
SERVERS: tuple[str, ...] = ("triton", "saxml")
Server = Literal["triton", "saxml"]

# Model names end up in Deployment, Service and ConfigMap names (with a prefix), so a
# DNS label short enough to leave room for it.
MODEL_PATTERN = re.compile(r"^[a-z]([a-z0-9-]{0,38}[a-z0-9])?$")
VERSION_PATTERN = re.compile(r"^v?([1-9][0-9]{0,8})$")
# One segment of an artifact's path below the version directory.
_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
MAX_ARTIFACT_DEPTH = 8
MAX_NAME_BYTES = 512


class InvalidObjectNameError(PermanentError):
    """An object under ``models/`` that does not follow the convention."""


@dataclass(frozen=True, slots=True)
class UploadPath:
    """An object name under ``models/`` split into its parts."""

    server: Server
    model: str
    version: str
    relpath: str  # below the version directory, '/'-separated, validated

    @property
    def version_prefix(self) -> str:
        return f"{MODELS_PREFIX}{self.server}/{self.model}/{self.version}/"

    @property
    def is_manifest(self) -> bool:
        return self.relpath == MANIFEST_NAME


def version_number(version: str) -> int:
    """``v3`` or ``3`` → 3 (the Triton model version directory)."""
    match = VERSION_PATTERN.match(version)
    if match is None:
        raise InvalidObjectNameError(f"version {version!r} is not v<N> or <N>",
                                     field="version", rule="v<N> or <N>, N from 1")
    return int(match.group(1))


def check_relpath(relpath: str, field: str = "name") -> str:
    """An artifact's path below its version directory, or InvalidObjectNameError."""
    segments = relpath.split("/")
    if len(segments) > MAX_ARTIFACT_DEPTH:
        raise InvalidObjectNameError(
            f"{relpath!r} is nested deeper than {MAX_ARTIFACT_DEPTH} directories",
            field=field, rule=f"at most {MAX_ARTIFACT_DEPTH} path segments")
    for segment in segments:
        if segment in (".", "..") or not _SEGMENT.match(segment):
            raise InvalidObjectNameError(
                f"{relpath!r} has a path segment {segment[:40]!r} that is not allowed",
                field=field,
                rule="segments of letters, digits, '.', '_' and '-', not starting with "
                     "'.' or '-', no empty, '.' or '..' segments")
    return relpath


def parse_object_name(name: str) -> UploadPath | None:
    """The upload an object name belongs to; None for objects outside ``models/``.

    Raises InvalidObjectNameError for a name under ``models/`` that breaks the
    convention, saying which part and which rule.
    """
    if not name.startswith(MODELS_PREFIX):
        return None
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise InvalidObjectNameError(f"object name is longer than {MAX_NAME_BYTES} bytes",
                                     field="name", rule=f"at most {MAX_NAME_BYTES} bytes")
    parts = name[len(MODELS_PREFIX):].split("/", 3)
    if len(parts) < 4 or not parts[3]:
        raise InvalidObjectNameError(
            f"{name!r} is not models/<server>/<model>/<version>/<file>",
            field="name", rule="models/<server>/<model>/<version>/<file>")
    server, model, version, relpath = parts
    if server not in SERVERS:
        raise InvalidObjectNameError(f"server {server[:40]!r} is not one of {list(SERVERS)}",
                                     field="server", rule=f"one of {list(SERVERS)}")
    if not MODEL_PATTERN.match(model):
        raise InvalidObjectNameError(
            f"model name {model[:60]!r} is not allowed", field="model",
            rule="lowercase letters, digits and '-', starting with a letter, at most 40")
    version_number(version)
    check_relpath(relpath)
    return UploadPath(server, model, version, relpath)  # type: ignore[arg-type]
