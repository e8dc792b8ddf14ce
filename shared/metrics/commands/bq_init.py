"""``accelops bq init``: create or update the metrics dataset, tables and views."""

from __future__ import annotations

import argparse

from shared.config import AccelopsConfig, Settings, load_config_from
from shared.errors import ConfigError
from shared.metrics.schema import apply_schema

__all__ = ["main"]


def main(args: argparse.Namespace) -> int:
    project = args.project or Settings.from_env().project
    if not project:
        raise ConfigError("no project: pass --project or set ACCELOPS_PROJECT")
    named = args.config or Settings.from_env().config_source
    config = load_config_from(args.config) if named else AccelopsConfig()
    outcome = apply_schema(project, config.metrics, progress=print)
    changed = sum(1 for result in outcome.values() if result != "unchanged")
    print(f"{changed} of {len(outcome)} objects created or updated")
    return 0
