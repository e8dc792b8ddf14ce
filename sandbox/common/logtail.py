"""The last lines of a log file, for the sandbox's processes (servers it supervises and
pods that are processes): what an error message or a termination message quotes."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["log_tail"]


def log_tail(path: str | Path, lines: int = 20, *, offset: int = 0,
             max_bytes: int | None = None) -> str:
    """The last ``lines`` lines written to ``path`` from byte ``offset`` on (one run's
    part of an append-only log), reading at most the last ``max_bytes``; "" when the
    file cannot be read."""
    try:
        with open(path, "rb") as log:
            end = log.seek(0, os.SEEK_END)
            start = offset if max_bytes is None else max(offset, end - max_bytes)
            log.seek(start)
            text = log.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip("\n").splitlines()[-lines:]) if lines > 0 else ""
