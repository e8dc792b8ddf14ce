"""``accelops loadtest``'s parser: the test's options, which every place it runs shares.

The library's command runs the test on the load generator deployed on the cluster
(:mod:`shared.deployment.loadtest`); the sandbox, when installed, makes the local
sandbox the default and adds its own options (``sandbox/commands.py``), and
``--cluster`` then chooses the cluster. Light: argparse only.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

__all__ = ["CLUSTER_RUN", "add_commands", "given_slos"]

# The cluster's implementation, imported when the command runs.
CLUSTER_RUN = "shared.deployment.loadtest:main"


class _Cluster(argparse.Action):
    """``--cluster``: the command runs on the cluster, whichever is the default."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=False, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, True)
        namespace.func = CLUSTER_RUN


SLO_MEASURES = ("ttft", "tpot", "latency")


def given_slos(args: argparse.Namespace) -> tuple[tuple[str, float], ...]:
    """The ``--slo-*-ms`` given, as (load generator option name, ms): ``slo_ttft_ms``..."""
    return tuple((f"slo_{measure}_ms", float(value)) for measure in SLO_MEASURES
                 if (value := getattr(args, f"slo_{measure}_ms", None)) is not None)


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: at least 1 worker")
    return value


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    loadtest = sub.add_parser(
        "loadtest", help="run a load test and report on it",
        description="Locust against a model server; every request's record goes through "
                    "Pub/Sub and ingest_metrics into BigQuery, and the summary and report "
                    "come from the views. On the cluster: the load generator's master and "
                    "workers deployed there (docs/guides/load-tests.md).")
    loadtest.add_argument("--cluster", action=_Cluster,
                          help="run on the load generator deployed on the cluster of the "
                               "environment ($KUBECONFIG, else $ACCELOPS_PROJECT, "
                               "$ACCELOPS_LOCATION, $ACCELOPS_CLUSTER): scale its workers, "
                               "start the test through the API server's service proxy")
    loadtest.add_argument("--config", help="with --cluster: the team config "
                                           "(default: $ACCELOPS_CONFIG)")
    loadtest.add_argument("--server", choices=["triton", "saxml"], default="triton")
    loadtest.add_argument("--deployment", metavar="NAME",
                          help="target the version a deployed model serves now (started "
                               "from a bucket upload; see `accelops models list`)")
    loadtest.add_argument("--users", type=int, default=4, help="concurrent users (default: 4)")
    loadtest.add_argument("--duration", type=int, default=10, help="seconds (default: 10)")
    loadtest.add_argument("--workers", type=_at_least_one, metavar="N",
                          help="run Locust as a master and N workers; the users are the "
                               "test's total, spread over the workers (default: one "
                               "process locally; on the cluster, the workers it has)")
    loadtest.add_argument("--test-id", help="default: lt-<UTC time>-<random>")
    loadtest.add_argument("--host", help="target URL (default: the sandbox's server; on the "
                                         "cluster, the serving Gateway with --deployment)")
    loadtest.add_argument("--model", help="default: toy-lm (Triton), /sax/test/toy (Saxml)")
    loadtest.add_argument("--accelerator", default="cpu",
                          help="recorded with the run, e.g. v5litepod-8 (default: cpu)")
    loadtest.add_argument("--max-tokens", type=int, default=16)
    loadtest.add_argument("--stream", action="store_true",
                          help="Triton only: stream tokens (generate_stream) and record the "
                               "time to first token; model default toy-lm-stream")
    loadtest.add_argument("--bad-request-ratio", type=float, default=0.0,
                          help="fraction of requests sent to a missing model (default: 0)")
    for measure in SLO_MEASURES:
        needs = "" if measure == "latency" else " (with --stream)"
        loadtest.add_argument(f"--slo-{measure}-ms", type=float, metavar="MS",
                              help=f"SLO on {measure.upper() if needs else measure}{needs}: "
                                   "goodput counts the requests meeting every SLO given")
    loadtest.add_argument("--report-dir", default="reports",
                          help="where the HTML report goes (default: reports)")
    loadtest.add_argument("--no-report", action="store_true", help="print the summary only")
    loadtest.set_defaults(func=CLUSTER_RUN)
