"""``accelops bq init`` and ``accelops report TEST_ID|savings|jobs``: their arguments.

Light (argparse only): each command is named as ``"module:function"`` of
``shared/metrics/commands/``, imported only when it runs. The report reads the
BigQuery the environment names; a caller may add one to read when it names none (the
sandbox adds its own and ``--state-dir``: ``commands/source.py``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

__all__ = ["DAILY_REPORTS", "LOAD_TEST_REPORT", "add_commands"]

# Reports over a window of days, named by a word where a load test's id would go.
DAILY_REPORTS = {"savings": "shared.metrics.commands.report_savings:main",
                 "jobs": "shared.metrics.commands.report_jobs:main"}
LOAD_TEST_REPORT = "shared.metrics.commands.report:main"


class _Report(argparse.Action):
    """``TEST_ID|savings|jobs``: keeps the word and names the command it means."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        namespace.func = DAILY_REPORTS.get(str(values), LOAD_TEST_REPORT)


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bq = sub.add_parser("bq", help="BigQuery schema of load-test metrics").add_subparsers(
        dest="bq_command", required=True, metavar="ACTION")
    init = bq.add_parser("init", help="create or update the dataset, tables and views "
                                      "(idempotent)")
    init.add_argument("--project", help="BigQuery project (default: $ACCELOPS_PROJECT)")
    init.add_argument("--config", help="config YAML with a metrics: section "
                                       "(default: $ACCELOPS_CONFIG, else built-in defaults)")
    init.set_defaults(func="shared.metrics.commands.bq_init:main")

    report = sub.add_parser(
        "report", help="HTML report with PNG charts of a load test (optionally vs another); "
                       "`report savings`: accelerator-hours saved by off-hours pool removal; "
                       "`report jobs`: queue wait, run time and chip-hours of jobs",
        description="Reads the BigQuery views of $ACCELOPS_PROJECT (or $BIGQUERY_EMULATOR_HOST); "
                    "with neither set, the local sandbox's BigQuery (started if needed).")
    report.add_argument("test_id", metavar="TEST_ID|savings|jobs", action=_Report,
                        help="the load test to report on; `savings`: a table of "
                             "accelerator-hours saved per day, team and pool; `jobs`: jobs "
                             "submitted, started, finished and failed, queue wait, "
                             "provisioning and run time, chip-hours used and idle, per team, "
                             "TPU type and day, and the slowest queue waits")
    report.add_argument("--since", metavar="WINDOW",
                        help="with savings or jobs: how far back, e.g. 36h or 2w (default: a "
                             "week; whole UTC days)")
    report.add_argument("--team", help="with jobs: only this team's jobs")
    report.add_argument("--compare", metavar="OTHER_ID", help="a test to compare it with")
    report.add_argument("--out", default="reports",
                        help="directory for report folders (default: reports)")
    report.set_defaults(func=LOAD_TEST_REPORT)
