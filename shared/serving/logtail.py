"""The line of a server's log tail that says what went wrong.

Kubernetes keeps the end of a crashed container's log as its termination message
(``terminationMessagePolicy: FallbackToLogsOnError``); rollouts and the model
servers' record quote one line of it. Pure; used by :mod:`shared.serving.observe`
and :mod:`shared.serving.servers`.
"""

from __future__ import annotations

import re

__all__ = ["essence"]

_TELLING = re.compile(r"error|fail|exception|traceback|unable|cannot|refus", re.IGNORECASE)


def essence(message: str, limit: int = 400) -> str:
    """The line of a termination message (a log tail) that says what went wrong: the
    last one naming an error, else the last non-empty one. Log tails end with whatever
    the server printed last — often a table — not with the reason."""
    lines = [line.strip(" |\t") for line in message.splitlines()]
    lines = [line for line in lines if line]
    telling = [line for line in lines if _TELLING.search(line)]
    chosen = telling[-1] if telling else (lines[-1] if lines else "")
    return chosen[:limit]
