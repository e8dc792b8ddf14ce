"""Saving and loading the sandbox GKE state as one JSON file.

A host process that stops and starts the sandbox keeps its node pools and
operation history (pending operations finish at their simulated due time).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from sandbox.gke.state import GkeState

__all__ = ["STATE_FORMAT", "load_state", "save_state"]

STATE_FORMAT = 1


def save_state(state: GkeState, path: str | os.PathLike[str]) -> Path:
    """Write the state atomically (temp file + rename) and return the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    document = {"format": STATE_FORMAT, **state.snapshot()}
    fd, tmp_name = tempfile.mkstemp(prefix=target.name, suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=1, sort_keys=True)
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return target


def load_state(state: GkeState, path: str | os.PathLike[str]) -> bool:
    """Load a saved state into ``state``; False (state untouched) when the file is absent."""
    source = Path(path)
    if not source.exists():
        return False
    document = json.loads(source.read_text(encoding="utf-8"))
    if document.get("format") != STATE_FORMAT:
        raise ValueError(f"{source}: unsupported GKE sandbox state format "
                         f"{document.get('format')!r}")
    state.restore(document)
    return True
