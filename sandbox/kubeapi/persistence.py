"""Saving and loading the store as one JSON file.

A sandbox that is stopped and started again (``python -m sandbox.kubeapi
--state-file F`` across CLI invocations, or a test simulating an apiserver
restart) keeps its objects and its resourceVersion counter, so clients that
cached resourceVersions see the same conflicts they would on a real cluster.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from sandbox.kubeapi.store import ObjectStore

STATE_FORMAT = 1


def save_state(store: ObjectStore, path: str | os.PathLike[str]) -> Path:
    """Write the store atomically (temp file + rename) and return the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    document = {"format": STATE_FORMAT, **store.snapshot()}
    fd, tmp_name = tempfile.mkstemp(prefix=target.name, suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=1, sort_keys=True)
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return target


def load_state(store: ObjectStore, path: str | os.PathLike[str]) -> bool:
    """Load a saved state into ``store``; False (store untouched) when the file is absent."""
    source = Path(path)
    if not source.exists():
        return False
    document = json.loads(source.read_text(encoding="utf-8"))
    if document.get("format") != STATE_FORMAT:
        raise ValueError(f"{source}: unsupported sandbox state format {document.get('format')!r}")
    store.restore(document)
    return True
