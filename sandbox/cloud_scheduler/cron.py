"""When a Cloud Scheduler job fires: a unix-cron schedule read in an IANA time zone.

The evaluation is cronsim's, which follows Debian cron across daylight saving
time changes, the behaviour people expect of a wall-clock schedule:

* a job at a fixed time (neither minute nor hour starts with ``*``) that falls
  in the hour skipped when clocks spring forward runs once, as soon as the clock
  is past the gap (02:30 Europe/Berlin on 2026-03-29 runs at 03:00 CEST);
* such a job in the hour repeated when clocks fall back runs once, on the first
  pass (02:30 on 2026-10-25 runs at 02:30 CEST, not again at 02:30 CET);
* a job with ``*`` in the minute or hour field (``*/5 * * * *``) follows elapsed
  time: it runs through both passes of a repeated hour and none of a skipped one.

Cloud Scheduler documents only that such times may behave unexpectedly and
recommends UTC; the sandbox chooses cron's answer, so a test can name it.
``shared/deployment/cron.py`` checks the syntax Cloud Scheduler accepts, a subset
of cronsim's.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from shared.deployment.cron import check_schedule, check_time_zone

__all__ = ["CronSchedule"]


class CronSchedule:
    """A unix-cron ``schedule`` in ``time_zone``.

    Raises ValueError naming the schedule or the zone when Cloud Scheduler would
    refuse it, or when it can never fire (``0 0 30 2 *``).
    """

    def __init__(self, schedule: str, time_zone: str = "Etc/UTC") -> None:
        # The same check as the deployment definition's: the sandbox refuses what
        # production refuses, though cronsim would read more.
        check_schedule(schedule)
        check_time_zone(time_zone)
        self.schedule = schedule
        self.time_zone = time_zone
        self.zone = ZoneInfo(time_zone)
        try:
            CronSim(schedule, datetime.now(self.zone))
        except CronSimError as exc:
            raise ValueError(f"schedule {schedule!r} can never fire: {exc}") from None

    def next_after(self, moment: datetime) -> datetime:
        """The first firing strictly after ``moment`` (an aware datetime), in UTC.

        Raises ValueError when the schedule never fires again (``0 0 30 2 *``).
        """
        # cronsim steps a fixed-time schedule on the naive local clock, so from the
        # second pass of a repeated hour it names times of the first pass (already
        # gone): cron never runs such a job twice there, so those are skipped. It
        # stops after 50 years without a match.
        for fire in CronSim(self.schedule, moment.astimezone(self.zone)):
            if fire > moment:
                return fire.astimezone(UTC)
        raise ValueError(f"schedule {self.schedule!r} never fires after {moment.isoformat()}")

    def times(self, after: datetime, count: int) -> list[datetime]:
        """The next ``count`` firings after ``after``, in UTC."""
        fires: list[datetime] = []
        for _ in range(count):
            after = self.next_after(after)
            fires.append(after)
        return fires

    def __repr__(self) -> str:
        return f"CronSchedule({self.schedule!r}, {self.time_zone!r})"
