"""The sandbox's commands of ``accelops``: ``sandbox``, ``loadtest`` and ``demo``, and
what ``report``, ``doctor`` and ``deploy up`` do against the local sandbox.

``shared/cli.py`` finds :func:`add_commands` through the ``accelops.commands`` entry
point (pyproject.toml) and calls it once the library's commands are in; the library
never imports the sandbox. Light (argparse and ``shared.cli`` only), like the rest of
the parser: each command is named as ``"module:function"`` and imported when it runs.
What the library's commands do against the sandbox is in ``sandbox/targets.py``:

* ``report`` with neither ``$ACCELOPS_PROJECT`` nor ``$BIGQUERY_EMULATOR_HOST`` reads
  the sandbox's BigQuery (``--state-dir``, started for the report if need be);
* ``doctor --state-dir DIR`` checks the sandbox running from DIR;
* ``deploy up --sandbox DIR`` deploys only the Kubernetes half onto it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from shared.cli import Subcommands, lazy, subcommand

__all__ = ["add_commands"]


class _Sandbox(argparse.Action):
    """An option naming a sandbox: given, the command runs against it (``target``)."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, target: str,
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.target = target

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        if values:
            namespace.func = self.target


def add_commands(sub: Subcommands) -> None:
    sandbox = sub.add_parser("sandbox", help="the local sandbox: up, down, status, env, token")
    sandbox.add_argument("action", choices=["up", "down", "status", "env", "token"],
                         help="token: print an ID token for the jobs API, signed by the "
                              "sandbox's issuer (--as EMAIL)")
    sandbox.add_argument("--state-dir",
                         help="where the sandbox keeps its state (default: .sandbox)")
    sandbox.add_argument("--speed", type=float, default=60.0,
                         help="with up: simulated seconds per real second (default: 60)")
    sandbox.add_argument("--foreground", action="store_true",
                         help="with up: stay in the foreground until interrupted")
    sandbox.add_argument("--start-timeout", type=float, metavar="SECONDS",
                         help="with up: how long each part may take to answer while it "
                              "keeps running (default: $ACCELOPS_SANDBOX_START_TIMEOUT, "
                              "else 600)")
    sandbox.add_argument("--pubsub", choices=["standin", "emulator"], default=None,
                         help="with up: the accelops stand-in or Google's Pub/Sub emulator "
                              "(default: $ACCELOPS_SANDBOX_PUBSUB, else standin)")
    sandbox.add_argument("--as", dest="identity", metavar="EMAIL",
                         help="with token: the identity (a team member or admin in the "
                              "sandbox config, e.g. alice@example.com)")
    sandbox.add_argument("--audience",
                         help="with token: the audience (default: the jobs API's URL)")
    sandbox.add_argument("--lifetime", type=int, default=3600,
                         help="with token: seconds until it expires (default: 3600)")
    sandbox.set_defaults(func="sandbox.supervisor.cli:main")

    # The library's `loadtest` (its options, and --cluster for the deployed load
    # generator), run on this sandbox unless --cluster is given.
    loadtest = subcommand(sub, "loadtest")
    loadtest.description = (
        "Locust against the sandbox's Triton (or Saxml stand-in); metrics go through "
        "Pub/Sub and ingest_metrics into BigQuery. Starts the sandbox's metrics part if "
        "it is not running, and stops it afterwards. --cluster: on the load generator "
        "deployed on the cluster of the environment instead.")
    loadtest.add_argument("--state-dir", help="local sandbox state (default: .sandbox)")
    loadtest.set_defaults(func="sandbox.demos.loadtest:main")

    demo = sub.add_parser("demo", help="run the demo scenario on a fresh sandbox")
    demo.add_argument("--state-dir", help="sandbox state directory (default: a temporary one)")
    demo.add_argument("--scenario", choices=["jobs", "serving", "schedule", "all"],
                      default="all",
                      help="jobs: requests to JobSets and slices; serving: model uploads "
                           "rolled out to Triton; schedule: node pools removed off-hours "
                           "and restored; all (default): every one")
    demo.add_argument("--report-dir", default="reports",
                      help="where the load test's HTML report goes (default: reports)")
    demo.add_argument("--start-timeout", type=float, metavar="SECONDS",
                      help="how long each sandbox part may take to answer while it keeps "
                           "running (default: $ACCELOPS_SANDBOX_START_TIMEOUT, else 600)")
    demo.set_defaults(func="sandbox.demos.demo:main")

    report = subcommand(sub, "report")
    report.add_argument("--state-dir", help="local sandbox state (default: .sandbox)")
    report.set_defaults(local_metrics=lazy("sandbox.targets:local_metrics"))

    subcommand(sub, "doctor").add_argument(
        "--state-dir", action=_Sandbox, target="sandbox.targets:doctor",
        help="check the local sandbox in this state directory")

    subcommand(sub, "deploy", "up").add_argument(
        "--sandbox", metavar="STATE_DIR", action=_Sandbox, target="sandbox.targets:deploy_up",
        help="only the Kubernetes half, on the local sandbox running from STATE_DIR")
