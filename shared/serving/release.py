"""Checking an upload against its manifest and writing its release snapshot.

Every listed file must exist below the version directory with the checksum the
manifest gives (compared with the metadata Cloud Storage keeps — nothing large is
downloaded); the first that does not is named in the refusal. The generation that
was checked is the generation that is copied, so an artifact overwritten between
the check and the copy cannot slip in. Copies are server-side and write-once: a
redelivered event finds its copies made and goes on.
"""

from __future__ import annotations

import base64
import hashlib

from shared import storage
from shared.serving.convention import UploadPath
from shared.serving.manifest import DeployManifest, ManifestError
from shared.serving.triton import snapshot_names
from shared.serving.triton_config import check, pin

__all__ = ["MAX_CONFIG_BYTES", "copy_snapshot", "pinned_config", "verify_files"]

MAX_CONFIG_BYTES = 64 * 1024


def verify_files(manifest: DeployManifest, bucket: str,
                 upload: UploadPath) -> dict[str, storage.ObjectInfo]:
    """Each listed file's checked generation, by path. Raises ManifestError naming the
    first file that is missing or whose checksum differs."""
    found: dict[str, storage.ObjectInfo] = {}
    for index, entry in enumerate(manifest.files):
        name = upload.version_prefix + entry.path
        info = storage.object_info(bucket, name)
        if info is None:
            raise ManifestError(
                f"{entry.path} is listed in the manifest but gs://{bucket}/{name} does not "
                f"exist", field=f"files[{index}].path",
                rule="upload every listed file before the manifest")
        for kind, wanted, actual in (("md5", entry.md5, info.md5_hash),
                                     ("crc32c", entry.crc32c, info.crc32c)):
            if wanted is None:
                continue
            if actual is None:
                raise ManifestError(
                    f"{entry.path}: Cloud Storage keeps no {kind} for it (a composite "
                    f"object has only crc32c)", field=f"files[{index}].{kind}",
                    rule="use a checksum Cloud Storage reports for the object")
            if actual != wanted:
                raise ManifestError(
                    f"{entry.path}: {kind} in the bucket is {actual}, the manifest says "
                    f"{wanted}", field=f"files[{index}].{kind}",
                    rule="the checksum must match the uploaded file")
        found[entry.path] = info
    return found


def pinned_config(manifest: DeployManifest, info: storage.ObjectInfo) -> bytes:
    """The release's config.pbtxt: the uploaded one (re-checked against its md5 once
    downloaded), named after the model and pinned to the manifest's version."""
    data = storage.read_bytes(info.bucket, info.name, generation=info.generation,
                              max_bytes=MAX_CONFIG_BYTES)
    if info.md5_hash is not None and \
            base64.b64encode(hashlib.md5(data).digest()).decode() != info.md5_hash:  # noqa: S324
        raise ManifestError("config.pbtxt changed while it was being read",
                            field="files.config.pbtxt", rule="upload, then write the manifest")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError("config.pbtxt is not UTF-8 text", field="config.pbtxt",
                            rule="UTF-8 protobuf text format") from exc
    check(text, manifest.model)
    return pin(text, manifest.model, manifest.version_number).encode("utf-8")


def copy_snapshot(manifest: DeployManifest, sources: dict[str, storage.ObjectInfo],
                  bucket: str, prefix: str, config: bytes | None) -> int:
    """Write the release snapshot under ``gs://bucket/prefix`` (``config``: the pinned
    config.pbtxt of a Triton model); returns the objects this call wrote (0 when an
    earlier delivery wrote them all)."""
    names = snapshot_names(prefix, manifest.model, manifest.version_number,
                           [f.path for f in manifest.files])
    written = 0
    for path, info in sources.items():
        if path == "config.pbtxt" and config is not None:
            written += storage.write_once(bucket, names[path], config)
        else:
            written += storage.copy_once(info, bucket, names[path])
    return written
