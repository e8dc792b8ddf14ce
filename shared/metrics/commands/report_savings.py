"""``accelops report savings``: accelerator-hours saved by off-hours pool removal."""

from __future__ import annotations

import argparse
import contextlib

from shared.errors import PermanentError
from shared.metrics.commands.source import daily_window, metrics_env
from shared.metrics.savings.report import savings_text
from shared.metrics.savings.views import BigQuerySavings
from shared.metrics.window import first_day

__all__ = ["main"]


def main(args: argparse.Namespace) -> int:
    since_text, since = daily_window(args, "savings")
    if args.team:
        raise PermanentError("--team is for `accelops report jobs`, not `accelops report "
                             "savings`")
    with contextlib.ExitStack() as stack:
        metrics_env(stack, args)
        rows = BigQuerySavings.from_env().pool_savings(since)
    print(savings_text(rows, first_day(since), since_text), end="")
    return 0
