"""Where ``accelops report`` reads from: the BigQuery the environment names, else the
one a caller added to the command (the local sandbox's, started for the report when
it is not running: ``sandbox/commands.py``)."""

from __future__ import annotations

import argparse
import contextlib
import os
from datetime import timedelta

from shared.errors import ConfigError, PermanentError
from shared.metrics.window import DEFAULT_SINCE, parse_since

__all__ = ["daily_window", "metrics_env"]


def _local_metrics() -> bool:
    """Whether reports should come from a caller's BigQuery (the local sandbox's):
    nothing names a real project or a BigQuery endpoint."""
    return not (os.environ.get("ACCELOPS_PROJECT") or os.environ.get("BIGQUERY_EMULATOR_HOST"))


def metrics_env(stack: contextlib.ExitStack, args: argparse.Namespace) -> None:
    """Point the BigQuery client at the one a caller added to the command
    (``args.local_metrics(args)``, a context manager) when nothing names another."""
    if _local_metrics():
        local = getattr(args, "local_metrics", None)
        if local is None:
            raise ConfigError("no BigQuery to read: set ACCELOPS_PROJECT (or "
                              "BIGQUERY_EMULATOR_HOST)")
        stack.enter_context(local(args))


def daily_window(args: argparse.Namespace, what: str) -> tuple[str, timedelta]:
    """``--since`` of a daily report (savings, jobs) as text and duration; refuses the
    load-test options."""
    if args.compare:
        raise PermanentError(f"--compare is for load tests, not `accelops report {what}`")
    since_text = args.since or DEFAULT_SINCE
    try:
        return since_text, parse_since(since_text)
    except ValueError as exc:
        raise PermanentError(str(exc), field="--since") from exc
