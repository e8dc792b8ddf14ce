"""A Cloud Scheduler stand-in: jobs that publish to Pub/Sub on the simulated clock.

Production runs the same jobs in Cloud Scheduler (Terraform); here each job is
an interval in simulated seconds, so at 60x speed the every-minute tick of
reconcile_slices fires every real second.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from sandbox.clock import SimClock

__all__ = ["ScheduledJob", "Scheduler"]


@dataclass(frozen=True, slots=True)
class ScheduledJob:
    name: str
    every_seconds: float  # simulated
    topic: str
    attributes: dict[str, str] = field(default_factory=dict)
    data: bytes = b"{}"


Publish = Callable[[ScheduledJob], None]


class Scheduler:
    """Fires each job every ``every_seconds`` of simulated time until stopped."""

    def __init__(self, clock: SimClock, jobs: list[ScheduledJob], publish: Publish) -> None:
        self._clock = clock
        self._jobs = jobs
        self._publish = publish
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.fired: dict[str, int] = {job.name: 0 for job in jobs}

    def start(self) -> Scheduler:
        self._thread = threading.Thread(target=self._run, name="sandbox-scheduler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        due = {job.name: self._clock.time() + job.every_seconds for job in self._jobs}
        while not self._stop.is_set():
            now = self._clock.time()
            for job in self._jobs:
                if now >= due[job.name]:
                    due[job.name] = now + job.every_seconds
                    try:
                        self._publish(job)
                        self.fired[job.name] += 1
                    except Exception as exc:  # a failed tick must not stop the others
                        print(f"scheduler: {job.name} failed: {exc}", flush=True)
            self._clock.sleep_until(min(due.values()), max_real=0.2)
