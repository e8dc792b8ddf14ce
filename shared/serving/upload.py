"""Uploading a model version the way the convention asks: every artifact, then the
manifest listing them with their checksums, last — what ``accelops models upload``
does for a user, and what the demo and tests do.

Only the manifest's finalize event deploys, so writing it last means the function
never sees a version whose files are still on their way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from shared import storage
from shared.errors import PermanentError
from shared.serving.convention import MANIFEST_NAME, MODELS_PREFIX, check_relpath

__all__ = ["build_manifest", "read_directory", "upload_version"]

MAX_FILES = 1000


def build_manifest(files: Mapping[str, bytes], *, server: str, model: str, version: str,
                   **fields: Any) -> dict[str, Any]:
    """A manifest listing ``files`` (path below the version directory → content) with
    their md5; ``fields`` add or override the rest (accelerator, replicas, ...)."""
    manifest: dict[str, Any] = {"server": server, "model": model, "version": version}
    if server == "triton":
        manifest["accelerator"] = {"gpu": {"type": "nvidia-l4", "count": 1}}
    manifest.update(fields)
    manifest["files"] = [{"path": path, "md5": hashlib.md5(data).hexdigest()}  # noqa: S324
                         for path, data in sorted(files.items())]
    return manifest


def read_directory(directory: Path) -> dict[str, bytes]:
    """The files below ``directory`` by '/'-separated relative path (symlinks and
    names the convention refuses are errors, not skipped silently)."""
    found: dict[str, bytes] = {}
    for path in sorted(directory.rglob("*")):
        if path.is_symlink():
            raise PermanentError(f"{path} is a symbolic link", field="directory")
        if not path.is_file():
            continue
        relative = path.relative_to(directory).as_posix()
        if relative == MANIFEST_NAME:
            continue
        check_relpath(relative, field="directory")
        found[relative] = path.read_bytes()
        if len(found) > MAX_FILES:
            raise PermanentError(f"more than {MAX_FILES} files below {directory}",
                                 field="directory")
    if not found:
        raise PermanentError(f"no files below {directory}", field="directory")
    return found


def upload_version(bucket: str, files: Mapping[str, bytes], manifest: Mapping[str, Any], *,
                   at: tuple[str, str, str] | None = None) -> tuple[str, int]:
    """Upload the artifacts, then the manifest, below
    ``models/<server>/<model>/<version>/`` (``at``, by default the manifest's own);
    returns the manifest's object name and generation."""
    server, model, version = at or (manifest["server"], manifest["model"],
                                    manifest["version"])
    prefix = f"{MODELS_PREFIX}{server}/{model}/{version}/"
    for path, data in files.items():
        storage.upload(bucket, prefix + path, data)
    name = prefix + MANIFEST_NAME
    text = yaml.safe_dump(dict(manifest), sort_keys=False).encode("utf-8")
    return name, storage.upload(bucket, name, text, content_type="application/yaml")
