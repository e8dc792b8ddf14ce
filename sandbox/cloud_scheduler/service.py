"""A Cloud Scheduler stand-in: cron jobs that publish to Pub/Sub on the simulated clock.

Production runs the deployment definition's jobs in Cloud Scheduler (Terraform);
here each job fires at its unix-cron schedule's times in its IANA time zone
(``sandbox/cloud_scheduler/cron.py``, daylight saving time as cron handles it), read on the
SimClock: at 60x speed the every-minute tick of reconcile_slices fires every
real second, and a test that ``advance()``\\ s the clock sees the firings it
jumped to.

Like a scheduler that was down, a job whose times were skipped — the clock
jumped forward several periods — fires once, not once per missed time, and its
next firing is the first one after now. A failing publish is printed and does
not stop the other jobs (nor that job's later firings); ``stop()`` returns
within a fraction of a real second.

The cluster process takes jobs as ``--schedule`` flags, one per job, in the form
:meth:`ScheduledJob.flag` writes and :meth:`ScheduledJob.from_flag` reads::

    TOPIC|CRON|TIME_ZONE[|KEY=VALUE,...[|DATA]]
    --schedule='slices-reconcile|* * * * *|Etc/UTC|trigger=schedule'
    --schedule='slices-reconcile|0 19 * * 1-5|Europe/Berlin|mode=cleanup-only'
    --schedule='some-topic|*/5 * * * *|America/New_York||{"reason": "poll"}'

ATTRIBUTES are the message attributes (none when omitted), DATA its body (``{}``
when omitted; it is the rest of the value, so it may contain ``|``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sandbox.cloud_scheduler.cron import CronSchedule
from sandbox.common.clock import SimClock

__all__ = ["CloudScheduler", "ScheduledJob"]

# Polled at this real interval at most, so stop() is prompt whatever the speed.
_POLL_SECONDS = 0.2


@dataclass(frozen=True, slots=True)
class ScheduledJob:
    """One job: publish ``data`` with ``attributes`` to ``topic`` (a topic id) at
    the times of ``schedule`` in ``time_zone``. Raises ValueError for a schedule
    or zone Cloud Scheduler would refuse."""

    topic: str
    schedule: str
    time_zone: str = "Etc/UTC"
    attributes: dict[str, str] = field(default_factory=dict)
    data: str = "{}"
    cron: CronSchedule = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.topic or "|" in self.topic:
            raise ValueError(f"topic {self.topic!r} is not a topic id")
        object.__setattr__(self, "cron", CronSchedule(self.schedule, self.time_zone))

    @property
    def name(self) -> str:
        return f"{self.topic} at '{self.schedule}' {self.time_zone}"

    def next_after(self, when: float) -> float:
        """The simulated time (epoch seconds) of the first firing after ``when``."""
        return self.cron.next_after(datetime.fromtimestamp(when, UTC)).timestamp()

    def flag(self) -> str:
        """This job as the value of a ``--schedule`` flag.

        Raises ValueError when an attribute cannot be written in that form.
        """
        for key, value in self.attributes.items():
            if not key or any(c in key for c in "|,=") or any(c in value for c in "|,"):
                raise ValueError(f"attribute {key}={value} cannot be written in a "
                                 "--schedule flag (it contains '|', ',' or '=')")
        attributes = ",".join(f"{k}={v}" for k, v in self.attributes.items())
        return f"{self.topic}|{self.schedule}|{self.time_zone}|{attributes}|{self.data}"

    @classmethod
    def from_flag(cls, value: str) -> ScheduledJob:
        """Read a ``--schedule`` flag's value. Raises ValueError saying what is wrong."""
        parts = value.split("|", 4)
        if len(parts) < 3:
            raise ValueError(f"{value!r} is not TOPIC|CRON|TIME_ZONE[|KEY=VALUE,...[|DATA]]")
        topic, schedule, time_zone = (p.strip() for p in parts[:3])
        attributes: dict[str, str] = {}
        for item in filter(None, parts[3].split(",") if len(parts) > 3 else []):
            key, equals, attribute = item.partition("=")
            if not key or not equals:
                raise ValueError(f"{value!r}: attribute {item!r} is not KEY=VALUE")
            attributes[key] = attribute
        return cls(topic, schedule, time_zone or "Etc/UTC", attributes,
                   parts[4] if len(parts) > 4 else "{}")


Publish = Callable[[ScheduledJob], None]


class CloudScheduler:
    """Fires each job at its cron times on ``clock`` until stopped; ``fired``
    counts the firings per job name."""

    def __init__(self, clock: SimClock, jobs: list[ScheduledJob], publish: Publish) -> None:
        self._clock = clock
        self._jobs = jobs
        self._publish = publish
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.fired: dict[str, int] = {job.name: 0 for job in jobs}

    def start(self) -> CloudScheduler:
        self._thread = threading.Thread(target=self._run, name="sandbox-scheduler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        started = self._clock.time()
        due = [job.next_after(started) for job in self._jobs]
        while not self._stop.is_set():
            now = self._clock.time()
            for index, job in enumerate(self._jobs):
                if now < due[index]:
                    continue
                # From now, not from the due time: missed firings collapse into this one.
                due[index] = job.next_after(now)
                try:
                    self._publish(job)
                    self.fired[job.name] += 1
                except Exception as exc:  # a failed tick must not stop the others
                    print(f"scheduler: {job.name} failed: {exc}", flush=True)
            if due:
                self._clock.sleep_until(min(due), max_real=_POLL_SECONDS)
            else:
                self._stop.wait(_POLL_SECONDS)
