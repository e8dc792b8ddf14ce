"""The sandbox's simulated clock.

Simulated time runs ``speed`` times faster than real time (the demo runs at 60x:
a real second is a simulated minute), and tests may jump it forward with
:meth:`SimClock.advance`. Everything time-dependent in the sandbox — operation
delays of the GKE API, pod run times, Kueue admission, object timestamps, the
scheduler's cron ticks — reads this one clock, so a scenario keeps its
proportions whatever the speed.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

__all__ = ["SimClock"]

DEFAULT_START = datetime(2026, 11, 21, 8, 0, 0, tzinfo=UTC)


class SimClock:
    """Thread-safe simulated time: ``now()`` = start + speed x real elapsed + jumps."""

    def __init__(self, speed: float = 1.0, start: datetime | None = None) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self._lock = threading.Condition()
        self._speed = speed
        self._base_sim = (start or datetime.now(UTC)).timestamp()
        self._base_real = time.monotonic()

    @property
    def speed(self) -> float:
        return self._speed

    def time(self) -> float:
        """Simulated seconds since the epoch."""
        with self._lock:
            return self._base_sim + (time.monotonic() - self._base_real) * self._speed

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.time(), UTC)

    def __call__(self) -> datetime:
        return self.now()

    def set_speed(self, speed: float) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        with self._lock:
            now = self._base_sim + (time.monotonic() - self._base_real) * self._speed
            self._base_sim, self._base_real, self._speed = now, time.monotonic(), speed
            self._lock.notify_all()

    def advance(self, seconds: float) -> None:
        """Jump simulated time forward (wakes every sleeper)."""
        with self._lock:
            self._base_sim += seconds
            self._lock.notify_all()

    def real_seconds(self, sim_seconds: float) -> float:
        """How long sim_seconds of simulated time take in real time at the current speed."""
        return max(0.0, sim_seconds) / self._speed

    def sleep_until(self, when: float, *, max_real: float | None = None) -> None:
        """Sleep until simulated time reaches ``when`` (or max_real real seconds pass)."""
        deadline = None if max_real is None else time.monotonic() + max_real
        with self._lock:
            while True:
                remaining = when - (self._base_sim
                                    + (time.monotonic() - self._base_real) * self._speed)
                if remaining <= 0:
                    return
                wait = remaining / self._speed
                if deadline is not None:
                    wait = min(wait, deadline - time.monotonic())
                    if wait <= 0:
                        return
                self._lock.wait(wait)

    def sleep(self, sim_seconds: float) -> None:
        self.sleep_until(self.time() + sim_seconds)

    def isoformat(self, offset_seconds: float = 0.0) -> str:
        """RFC 3339 timestamp with a ``Z`` suffix, as Google and Kubernetes APIs print."""
        moment = self.now() + timedelta(seconds=offset_seconds)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
