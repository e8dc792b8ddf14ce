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
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shared.errors import AccelopsError, PermanentError

if TYPE_CHECKING:
    from datetime import timedelta

    from shared.jobs.request import JobRequest

__all__ = ["main"]


def _read_request(path: str, *, validate: bool = True) -> tuple[bytes, JobRequest | None]:
    """The file's bytes and the job request in it, checked exactly as ``submit_job``
    checks a message; PermanentError saying what is wrong."""
    from shared.jobs.request import read_job_request

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise PermanentError(f"cannot read {path}: {exc.strerror}") from exc
    if not validate:
        return data, None
    try:
        return data, read_job_request(data)
    except PermanentError as exc:
        raise PermanentError(f"{path}: {exc.message}", field=exc.field,
                             rule=exc.rule) from exc


def _config(args: argparse.Namespace) -> Any:
    from shared.config import load_config_from

    return load_config_from(args.config)


def cmd_catalogue(args: argparse.Namespace) -> int:
    from shared.tpu import catalogue

    rows = [("type", "accelerator", "topology", "machine type", "VMs", "chips/VM", "chips")]
    rows += [(s.type, s.accelerator, s.topology, s.machine_type, str(s.vms),
              str(s.chips_per_vm), str(s.chips)) for s in catalogue()]
    if args.json:
        keys = ["type", "accelerator", "topology", "machine_type", "vms", "chips_per_vm",
                "chips"]
        print(json.dumps([dict(zip(keys, (r[0], r[1], r[2], r[3], int(r[4]), int(r[5]),
                                          int(r[6])), strict=True)) for r in rows[1:]],
                         indent=2))
        return 0
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
              .rstrip())
    return 0


def cmd_jobs_render(args: argparse.Namespace) -> int:
    import yaml

    from shared.jobs.policy import check_policy
    from shared.jobs.render import render_jobset

    _, request = _read_request(args.file)
    assert request is not None
    admission = check_policy(request, _config(args))
    request_id = request.request_id or args.request_id
    print(yaml.safe_dump(render_jobset(admission, request_id), sort_keys=False), end="")
    return 0


def cmd_jobs_submit(args: argparse.Namespace) -> int:
    import os

    from shared import pubsub
    from shared.config import Settings
    from shared.jobs.cli import api_client

    # Fail here, not in a rejection record, on obvious mistakes.
    data, _ = _read_request(args.file, validate=not args.no_validate)
    if (api := api_client(args)) is not None:
        accepted = api.submit(data)
        print(f"submitted {args.file} through {api.base_url}: request id "
              f"{accepted.request_id}; status: accelops jobs status {accepted.request_id} "
              f"(or GET {api.base_url}{accepted.status_url})")
        return 0
    project = args.project or Settings.from_env().project
    if not project:
        raise PermanentError("no project: pass --project or set ACCELOPS_PROJECT")
    topic = args.topic
    if topic is None:
        from shared.config import Topics

        has_config = args.config or os.environ.get("ACCELOPS_CONFIG")
        topic = (_config(args).topics if has_config else Topics()).job_requests
    message_id = pubsub.publish(project, topic, data)
    target = os.environ.get("PUBSUB_EMULATOR_HOST") or "Pub/Sub"
    print(f"published {args.file} to {pubsub.topic_path(project, topic)} on {target}: "
          f"message id {message_id}")
    return 0


def _print_report(report: Any) -> None:
    observed, plan = report.observed, report.plan
    print(f"JobSets wanting TPU slices: {sum(1 for j in observed.jobsets if j.wants_slices)}"
          f" of {len(observed.jobsets)}; node pools: {len(observed.pools)} "
          f"({sum(1 for p in observed.pools if p.managed)} provisioned by accelops)")
    for pool in sorted(observed.pools, key=lambda p: p.name):
        owner = pool.jobset_key if pool.managed else "-"
        print(f"  pool {pool.name:<40} {pool.status:<12} nodes {pool.nodes:<3} "
              f"running pods {pool.active_pods:<3} jobset {owner}")
    print(f"plan: {len(plan.actions)} action(s) due, in the order they will be started; "
          f"those marked * start in this run")
    starting = {a.pool for a in plan.start}
    for action in plan.actions:
        detail = ""
        if action.kind == "create":
            spec = action.spec
            detail = (f" [{spec.machine_type} x{spec.node_count}"
                      f"{', topology ' + spec.topology if spec.topology else ''}"
                      f"{', spot' if spec.spot else ''}"
                      f"{', reservation ' + spec.reservation if spec.reservation else ''}]")
        mark = "*" if action.pool in starting else " "
        print(f"  {mark} {action.kind:<6} {action.pool}{detail}: {action.reason}")
    for note in plan.waiting:
        print(f"  waiting: {note}")
    for jobset, failure in sorted(plan.failures.items()):
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(failure.next_attempt))
        print(f"  failed: {jobset}: creating {failure.pool} ({failure.capacity}) failed "
              f"{failure.attempts} time(s): {failure.reason}; next attempt at {when} UTC")
    print(report.summary())


def cmd_slices(args: argparse.Namespace) -> int:
    from shared.slices.reconcile import reconcile

    dry_run = args.action == "plan"
    report = reconcile(dry_run=dry_run, cleanup_only=True if args.cleanup_only else None)
    _print_report(report)
    return 0


def cmd_bq_init(args: argparse.Namespace) -> int:
    from shared.config import AccelopsConfig, Settings
    from shared.errors import ConfigError
    from shared.metrics.schema import apply_schema

    project = args.project or Settings.from_env().project
    if not project:
        raise ConfigError("no project: pass --project or set ACCELOPS_PROJECT")
    config = _config(args) if args.config or Settings.from_env().config_source else (
        AccelopsConfig())
    outcome = apply_schema(project, config.metrics, progress=print)
    changed = sum(1 for result in outcome.values() if result != "unchanged")
    print(f"{changed} of {len(outcome)} objects created or updated")
    return 0


def _local_metrics() -> bool:
    """Whether reports should come from the local sandbox: nothing names a real project
    or a BigQuery endpoint."""
    import os

    return not (os.environ.get("ACCELOPS_PROJECT") or os.environ.get("BIGQUERY_EMULATOR_HOST"))


def _metrics_env(stack: Any, args: argparse.Namespace) -> None:
    """Point the BigQuery client at the local sandbox's when nothing names another."""
    if _local_metrics():
        from sandbox.runner import session, state_dir_from

        sandbox = stack.enter_context(session(state_dir_from(args.state_dir), {"reports"}))
        stack.enter_context(sandbox.client_env())


def _daily_window(args: argparse.Namespace, what: str) -> tuple[str, timedelta]:
    """``--since`` of a daily report (savings, jobs) as text and duration; refuses the
    load-test options."""
    from shared.metrics.window import DEFAULT_SINCE, parse_since

    if args.compare:
        raise PermanentError(f"--compare is for load tests, not `accelops report {what}`")
    since_text = args.since or DEFAULT_SINCE
    try:
        return since_text, parse_since(since_text)
    except ValueError as exc:
        raise PermanentError(str(exc), field="--since") from exc


def cmd_report_savings(args: argparse.Namespace) -> int:
    import contextlib

    from shared.metrics.savings import BigQuerySavings
    from shared.metrics.savings_report import savings_text
    from shared.metrics.window import first_day

    since_text, since = _daily_window(args, "savings")
    if args.team:
        raise PermanentError("--team is for `accelops report jobs`, not `accelops report "
                             "savings`")
    with contextlib.ExitStack() as stack:
        _metrics_env(stack, args)
        rows = BigQuerySavings.from_env().pool_savings(since)
    print(savings_text(rows, first_day(since), since_text), end="")
    return 0


def cmd_report_jobs(args: argparse.Namespace) -> int:
    import contextlib

    from shared.metrics.jobs import BigQueryJobs
    from shared.metrics.jobs_report import jobs_text
    from shared.metrics.window import first_day

    since_text, since = _daily_window(args, "jobs")
    with contextlib.ExitStack() as stack:
        _metrics_env(stack, args)
        source = BigQueryJobs.from_env()
        rows = source.job_usage(since, args.team)
        waits = source.slowest_waits(since, args.team)
    print(jobs_text(rows, waits, first_day(since), since_text, args.team), end="")
    return 0


# Reports over a window of days, named by a word where a load test's id would go.
_DAILY_REPORTS = {"savings": cmd_report_savings, "jobs": cmd_report_jobs}


def cmd_report(args: argparse.Namespace) -> int:
    import contextlib

    from sandbox.loadtest import format_summary
    from shared.metrics.report import build_report, report_dir_name, save_report
    from shared.metrics.views import BigQueryMetrics

    daily = _DAILY_REPORTS.get(args.test_id)
    if daily is not None:
        return daily(args)
    if args.since:
        raise PermanentError("--since is for `accelops report savings` and `accelops report "
                             "jobs`, not a load test")
    if args.team:
        raise PermanentError("--team is for `accelops report jobs`, not a load test")
    with contextlib.ExitStack() as stack:
        _metrics_env(stack, args)
        report = build_report(BigQueryMetrics.from_env(), args.test_id, args.compare)
    for summary in filter(None, (report.test, report.other)):
        print(format_summary(summary))
    path = save_report(report, Path(args.out) / report_dir_name(args.test_id, args.compare))
    print(f"report: {path}")
    print(f"charts: {', '.join(sorted(p.name for p in path.parent.glob('*.png')))}")
    return 0


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

    cat = sub.add_parser("catalogue", help="print the TPU slice shapes accelops knows")
    cat.add_argument("--json", action="store_true", help="print JSON instead of a table")
    cat.set_defaults(func=cmd_catalogue)

    jobs = sub.add_parser("jobs", help="job requests").add_subparsers(
        dest="jobs_command", required=True, metavar="ACTION")
    render = jobs.add_parser("render", help="print the JobSet a request becomes; publishes nothing")
    render.add_argument("file", help="job request JSON file")
    render.add_argument("--config", help="config YAML (default: $ACCELOPS_CONFIG)")
    render.add_argument("--request-id", default="local-render",
                        help="request id when the file has none (default: local-render)")
    render.set_defaults(func=cmd_jobs_render)
    submit = jobs.add_parser("submit", help="publish a request to the job-requests topic, or "
                                            "POST it to the jobs API (--api)")
    submit.add_argument("file", help="job request JSON file")
    submit.add_argument("--project", help="Pub/Sub project (default: $ACCELOPS_PROJECT)")
    submit.add_argument("--topic", help="topic id (default: the config's, else job-requests)")
    submit.add_argument("--config", help="config YAML (default: $ACCELOPS_CONFIG)")
    submit.add_argument("--no-validate", action="store_true",
                        help="publish even if the request does not validate locally")
    submit.add_argument("--api", metavar="URL",
                        help="POST it to the jobs API at URL instead of publishing "
                             "(default: $ACCELOPS_JOBS_API): the API checks it, gives it a "
                             "request id when it has none, and publishes it")
    submit.set_defaults(func=cmd_jobs_submit)
    from shared.jobs.budget_cli import add_usage_command
    from shared.jobs.cli import add_commands as add_job_commands

    add_job_commands(jobs)
    add_usage_command(jobs)

    slices = sub.add_parser(
        "slices", help="TPU node pools: print the plan, or reconcile once",
        description="Observe JobSets and node pools of the cluster named by the environment "
                    "(KUBECONFIG or ACCELOPS_PROJECT/LOCATION/CLUSTER) and plan or act.")
    slices.add_argument("action", choices=["plan", "reconcile"],
                        help="plan: print without acting (dry run); reconcile: act once")
    slices.add_argument("--cleanup-only", action="store_true",
                        help="only delete pools, never create")
    slices.set_defaults(func=cmd_slices)

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

    bq = sub.add_parser("bq", help="BigQuery schema of load-test metrics").add_subparsers(
        dest="bq_command", required=True, metavar="ACTION")
    init = bq.add_parser("init", help="create or update the dataset, tables and views "
                                      "(idempotent)")
    init.add_argument("--project", help="BigQuery project (default: $ACCELOPS_PROJECT)")
    init.add_argument("--config", help="config YAML with a metrics: section "
                                       "(default: $ACCELOPS_CONFIG, else built-in defaults)")
    init.set_defaults(func=cmd_bq_init)

    report = sub.add_parser(
        "report", help="HTML report with PNG charts of a load test (optionally vs another); "
                       "`report savings`: accelerator-hours saved by off-hours pool removal; "
                       "`report jobs`: queue wait, run time and chip-hours of jobs",
        description="Reads the BigQuery views of $ACCELOPS_PROJECT (or $BIGQUERY_EMULATOR_HOST); "
                    "with neither set, the local sandbox's BigQuery (started if needed).")
    report.add_argument("test_id", metavar="TEST_ID|savings|jobs",
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
    report.add_argument("--state-dir", help="local sandbox state (default: .sandbox)")
    report.set_defaults(func=cmd_report)

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

    from shared.deployment.cli import add_commands
    from shared.schedule.cli import add_commands as add_schedule_commands
    from shared.serving.cli import add_commands as add_model_commands

    add_commands(sub)
    add_model_commands(sub)
    add_schedule_commands(sub)
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
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return result


if __name__ == "__main__":
    sys.exit(main())
