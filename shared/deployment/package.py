"""The functions' source archive: what Cloud Run functions builds the functions from.

At the archive's root: ``main.py`` (a copy of ``functions/main.py``, the entry
points), the ``shared/`` package and ``requirements.txt`` (the project's runtime
dependencies from ``pyproject.toml``). The archive is reproducible — files in name
order, fixed timestamps and modes, stored uncompressed so no zlib version changes
the bytes — so its name can be its content's hash: the
same source uploads as the same object (and does not redeploy the functions), and
any change makes a new object (which does).
"""

from __future__ import annotations

import hashlib
import io
import tomllib
import zipfile
from collections.abc import Mapping
from pathlib import Path

from shared.errors import ConfigError

__all__ = ["archive", "archive_files", "digest", "object_name"]

# The earliest time a zip entry can carry: no file's mtime leaks into the archive.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def archive_files(root: Path) -> dict[str, bytes]:
    """The archive's files (name → content) from the repository at ``root``.
    Raises ConfigError when the repository lacks one of them."""
    try:
        files = {"main.py": (root / "functions" / "main.py").read_bytes()}
        project = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))["project"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read the functions' source under {root}: {exc}") from exc
    for path in sorted((root / "shared").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files[path.relative_to(root).as_posix()] = path.read_bytes()
    requirements = "".join(f"{dependency}\n" for dependency in project["dependencies"])
    files["requirements.txt"] = requirements.encode()
    return files


def archive(files: Mapping[str, bytes]) -> bytes:
    """The zip of ``files``: the same bytes for the same files, wherever it is built."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as zipped:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.external_attr = 0o644 << 16
            zipped.writestr(info, files[name])
    return buffer.getvalue()


def digest(data: bytes) -> str:
    """What names the archive: the start of its SHA-256."""
    return hashlib.sha256(data).hexdigest()[:16]


def object_name(data: bytes) -> str:
    """The archive's object name in the function source bucket: its content's hash."""
    return f"functions/accelops-{digest(data)}.zip"
