"""Which load generator ran a test: its revision, recorded in every run record.

An image has no ``.git``: its build passes the revision as ``ACCELOPS_LOADGEN_REVISION``
(the Dockerfile's build argument of that name). A checkout answers ``git rev-parse
--short HEAD`` in the directory that holds this package. Neither is worth failing a
load test over, so anything that goes wrong gives ``None``; the plugin asks once per
process, at start-up, not on a user's greenlet.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

__all__ = ["REVISION_VARIABLE", "loadgen_revision"]

REVISION_VARIABLE = "ACCELOPS_LOADGEN_REVISION"
_HERE = Path(__file__).resolve().parent
_LIMIT = 256


def loadgen_revision(environ: Mapping[str, str] | None = None, directory: Path = _HERE,
                     timeout: float = 5.0) -> str | None:
    """``$ACCELOPS_LOADGEN_REVISION`` if set, else the short git commit of ``directory``,
    else None (no git, not a checkout, git too slow)."""
    env = os.environ if environ is None else environ
    if value := env.get(REVISION_VARIABLE, "").strip():
        return value[:_LIMIT]
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],  # noqa: S607 - git from PATH, if any
            cwd=directory, capture_output=True, text=True, timeout=timeout, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()[:_LIMIT] or None
