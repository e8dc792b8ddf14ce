"""``accelops report TEST_ID``: an HTML report with PNG charts of a load test,
optionally compared with another."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from shared.errors import PermanentError
from shared.metrics.commands.source import metrics_env
from shared.metrics.commands.summary import format_summary
from shared.metrics.loadtest.report import build_report, report_dir_name, save_report
from shared.metrics.loadtest.views import BigQueryMetrics

__all__ = ["main"]


def main(args: argparse.Namespace) -> int:
    if args.since:
        raise PermanentError("--since is for `accelops report savings` and `accelops report "
                             "jobs`, not a load test")
    if args.team:
        raise PermanentError("--team is for `accelops report jobs`, not a load test")
    with contextlib.ExitStack() as stack:
        metrics_env(stack, args)
        report = build_report(BigQueryMetrics.from_env(), args.test_id, args.compare)
    for summary in filter(None, (report.test, report.other)):
        print(format_summary(summary))
    path = save_report(report, Path(args.out) / report_dir_name(args.test_id, args.compare))
    print(f"report: {path}")
    print(f"charts: {', '.join(sorted(p.name for p in path.parent.glob('*.png')))}")
    return 0
