"""The sandbox's simulated clock, driven from another process.

The clock lives in the cluster process; its GKE API serves a control surface
(``/sandbox/v1/clock``, :mod:`sandbox.gke.server`). A scenario that needs hours of
simulated time (an evening, a night) jumps it instead of waiting: the scheduler,
GKE operations, pods and every controller wake on a jump and catch up at once.
"""

from __future__ import annotations

import datetime as dt
import json
import urllib.request
from typing import Any

__all__ = ["SandboxClock"]

_TIMEOUT = 10.0


class SandboxClock:
    """The simulated clock of the sandbox whose GKE API is at ``gke_url``."""

    def __init__(self, gke_url: str) -> None:
        self._url = f"{gke_url.rstrip('/')}/sandbox/v1/clock"

    def _call(self, body: dict[str, float] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(  # noqa: S310 - the sandbox's loopback URL
            self._url, data=data, method="GET" if body is None else "POST",
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=_TIMEOUT) as response:  # noqa: S310
            answer: dict[str, Any] = json.loads(response.read())
        return answer

    def now(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(float(self._call()["time"]), dt.UTC)

    def speed(self) -> float:
        return float(self._call()["speed"])

    def set_speed(self, speed: float) -> None:
        self._call({"speed": speed})

    def advance_to(self, when: dt.datetime) -> dt.datetime:
        """Jump to ``when`` (nothing when it has passed); returns the clock's now."""
        ahead = (when - self.now()).total_seconds()
        answer = self._call({"advance": ahead}) if ahead > 0 else self._call()
        return dt.datetime.fromtimestamp(float(answer["time"]), dt.UTC)
