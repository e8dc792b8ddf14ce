"""Saving and loading a stand-in's state as one JSON file.

Stand-ins (the Kubernetes API store, the GKE state) expose ``snapshot()`` and
``restore()``; a host process that stops and starts again keeps what they held.
Writes are atomic (temp file + rename), so a crash never leaves half a file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Protocol

__all__ = ["STATE_FORMAT", "Snapshotable", "load_state", "save_state"]

STATE_FORMAT = 1


class Snapshotable(Protocol):
    def snapshot(self) -> dict[str, Any]: ...

    def restore(self, document: Any) -> None: ...


def save_state(holder: Snapshotable, path: str | os.PathLike[str]) -> Path:
    """Write the holder's snapshot atomically and return the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    document = {"format": STATE_FORMAT, **holder.snapshot()}
    fd, tmp_name = tempfile.mkstemp(prefix=target.name, suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=1, sort_keys=True)
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return target


def load_state(holder: Snapshotable, path: str | os.PathLike[str]) -> bool:
    """Load a saved snapshot into the holder; False (holder untouched) when absent."""
    source = Path(path)
    if not source.exists():
        return False
    document = json.loads(source.read_text(encoding="utf-8"))
    if document.get("format") != STATE_FORMAT:
        raise ValueError(f"{source}: unsupported sandbox state format {document.get('format')!r}")
    holder.restore(document)
    return True
