"""``accelops report jobs``: queue wait, run time and chip-hours of jobs, per team."""

from __future__ import annotations

import argparse
import contextlib

from shared.metrics.commands.source import daily_window, metrics_env
from shared.metrics.usage.report import jobs_text
from shared.metrics.usage.views import BigQueryJobs
from shared.metrics.window import first_day

__all__ = ["main"]


def main(args: argparse.Namespace) -> int:
    since_text, since = daily_window(args, "jobs")
    with contextlib.ExitStack() as stack:
        metrics_env(stack, args)
        source = BigQueryJobs.from_env()
        rows = source.job_usage(since, args.team)
        waits = source.slowest_waits(since, args.team)
    print(jobs_text(rows, waits, first_day(since), since_text, args.team), end="")
    return 0
