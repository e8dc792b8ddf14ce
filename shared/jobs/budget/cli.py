"""``accelops jobs usage``: each team's chip-hours against its budget, as submit_job sees them.

It reads the ConfigMap team_usage writes (one GET against the cluster the environment
names: ``KUBECONFIG``, or ``ACCELOPS_PROJECT/LOCATION/CLUSTER``), never BigQuery, and
judges each team with the cluster's clock — the same snapshot, rule and time a request
submitted now would meet.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_usage_command", "cmd_jobs_usage"]


def add_usage_command(jobs: Any) -> None:
    """Register ``usage`` under the ``accelops jobs`` subcommands."""
    usage = jobs.add_parser(
        "usage", help="each team's chip-hours today and this week against its budget",
        description="Reads each team's usage as the team_usage function last cached it "
                    "in the cluster (ConfigMap accelops-team-usage in accelops-system) and "
                    "says whether the team's next request would be admitted.")
    usage.add_argument("--config", help="config YAML (default: $ACCELOPS_CONFIG)")
    usage.set_defaults(func=cmd_jobs_usage)


def cmd_jobs_usage(args: argparse.Namespace) -> int:
    import time
    from datetime import UTC, datetime

    from shared.config import Settings, load_config_from
    from shared.jobs.budget.gate import read_usage
    from shared.jobs.budget.report import usage_text
    from shared.kube import get_client

    config = load_config_from(args.config)
    kube = get_client(Settings.from_env())
    namespace = config.slices.state_namespace
    snapshot = read_usage(kube, namespace)
    now = datetime.fromtimestamp(kube.server_time() or time.time(), UTC)
    print(usage_text(config, snapshot, now, namespace))
    return 0
