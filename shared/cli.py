"""The ``accelops`` command line.

The parser is built from light modules only (argparse and the standard library), so
``accelops --help`` and ``accelops --version`` answer without importing a client.
A command names its implementation — a function here, or ``"module:function"`` —
and :func:`main` imports that module only when the command runs (the one place the
command line imports on demand), so ``accelops catalogue`` does not pay for the
Pub/Sub client and ``accelops jobs render`` publishes nothing.
Errors print one line naming the problem and exit non-zero; tracebacks are kept
for bugs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

# Each feature's commands, added to the parser: light modules (argparse and the standard
# library), whose commands are named as "module:function" or import on their own.
from shared.deployment.cli import add_commands as add_deployment_commands
from shared.errors import AccelopsError
from shared.jobs.cli import add_commands as add_job_commands
from shared.metrics.cli import add_commands as add_metrics_commands
from shared.offhours.cli import add_commands as add_schedule_commands
from shared.serving.cli import add_commands as add_model_commands
from shared.slices.cli import add_commands as add_slice_commands

__all__ = ["build_parser", "command", "main", "version"]


def version() -> str:
    """The installed distribution's version (``0.1.0``); ``unknown`` when this checkout
    runs without being installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("accelops")
    except PackageNotFoundError:
        return "unknown"


class _Version(argparse.Action):
    """``--version``: looked up only when asked for (importlib.metadata reads the
    installed distributions)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"accelops {version()}")
        parser.exit()


Command = Callable[[argparse.Namespace], int]


def command(target: Command | str) -> Command:
    """A command's implementation: the function itself, or ``"module:function"``
    imported now — the command line's one import on demand."""
    if callable(target):
        return target
    module, _, name = target.partition(":")
    found: Command = getattr(importlib.import_module(module), name)
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="accelops",
        description="Event-driven automation for AI accelerators on GKE.",
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    add_slice_commands(sub)
    add_job_commands(sub)
    add_metrics_commands(sub)
    add_deployment_commands(sub)
    add_model_commands(sub)
    add_schedule_commands(sub)

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
    sandbox.set_defaults(func="sandbox.runner:main")

    loadtest = sub.add_parser(
        "loadtest", help="run a load test on the local sandbox and report on it",
        description="Locust against the sandbox's Triton (or Saxml stand-in); metrics go "
                    "through Pub/Sub and ingest_metrics into BigQuery. Starts the sandbox's "
                    "metrics part if it is not running, and stops it afterwards.")
    loadtest.add_argument("--server", choices=["triton", "saxml"], default="triton")
    loadtest.add_argument("--deployment", metavar="NAME",
                          help="target the version a deployed model serves now (started "
                               "from a bucket upload; see `accelops models list`)")
    loadtest.add_argument("--users", type=int, default=4, help="concurrent users (default: 4)")
    loadtest.add_argument("--duration", type=int, default=10, help="seconds (default: 10)")
    loadtest.add_argument("--test-id", help="default: lt-<UTC time>-<random>")
    loadtest.add_argument("--host", help="target URL (default: the sandbox's server)")
    loadtest.add_argument("--model", help="default: toy-lm (Triton), /sax/test/toy (Saxml)")
    loadtest.add_argument("--accelerator", default="cpu",
                          help="recorded with the run, e.g. v5litepod-8 (default: cpu)")
    loadtest.add_argument("--max-tokens", type=int, default=16)
    loadtest.add_argument("--stream", action="store_true",
                          help="Triton only: stream tokens (generate_stream) and record the "
                               "time to first token; model default toy-lm-stream")
    loadtest.add_argument("--bad-request-ratio", type=float, default=0.0,
                          help="fraction of requests sent to a missing model (default: 0)")
    loadtest.add_argument("--report-dir", default="reports",
                          help="where the HTML report goes (default: reports)")
    loadtest.add_argument("--no-report", action="store_true", help="print the summary only")
    loadtest.add_argument("--state-dir", help="local sandbox state (default: .sandbox)")
    loadtest.set_defaults(func="sandbox.loadtest:main")

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
    demo.set_defaults(func="sandbox.demo:main")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result: int = command(args.func)(args)
    except AccelopsError as exc:
        where = f" [{exc.field}]" if exc.field else ""
        print(f"accelops: error{where}: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Output piped into head(1) and friends: stop quietly, like coreutils.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return result


if __name__ == "__main__":
    sys.exit(main())
