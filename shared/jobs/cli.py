"""``accelops jobs``: the arguments of every jobs command (``render`` and ``submit`` run
from ``shared/jobs/commands/``, ``usage`` from ``budget.cli``), and ``list | status |
cancel | logs``: jobs read straight off the cluster, or through the jobs API.

The commands reach the cluster the environment names (``KUBECONFIG``, else
``ACCELOPS_PROJECT``/``ACCELOPS_LOCATION``/``ACCELOPS_CLUSTER``) with the caller's own
credentials, so Kubernetes RBAC decides what each person may read or delete; the
``--team`` that ``cancel`` requires only guards against cancelling another team's job by
mistake. With ``--api URL`` (or ``$ACCELOPS_JOBS_API``) they ask the jobs API instead
(``shared.jobs.api_client``), which decides from the caller's ID token which teams'
jobs they may see and cancel. Fetching (:mod:`shared.jobs.lookup`) and printing (:func:`print_jobs`,
:func:`print_status`) are apart: the printers take the same models the jobs API serves,
from wherever they came.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from shared.jobs.budget.cli import add_usage_command

if TYPE_CHECKING:
    from shared.jobs.status.model import JobStatus, JobSummary

__all__ = ["add_commands", "api_client", "format_jobs", "format_status", "print_jobs",
           "print_status"]

_RBAC_NOTE = ("Direct access uses your own Kubernetes credentials: RBAC decides which "
              "namespaces you may read and where you may delete.")


def _time(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def format_jobs(jobs: Sequence[JobSummary]) -> str:
    """``jobs list`` as an aligned table (oldest first)."""
    if not jobs:
        return "no jobs\n"
    rows = [("REQUEST ID", "JOBSET", "TEAM", "STATE", "TPU", "SLICES", "CREATED (UTC)",
             "SUMMARY")]
    rows += [(j.request_id, j.jobset or "-", j.team or "-", j.state, j.tpu_type or "-",
              str(j.slices) if j.slices is not None else "-", _time(j.created_at), j.summary)
             for j in jobs]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "".join("  ".join(cell.ljust(width) for cell, width in
                             zip(row[:-1], widths, strict=True)) + "  " + row[-1] + "\n"
                   for row in rows)


def format_status(status: JobStatus) -> str:
    """``jobs status``: the facts, then the explanation line by line."""
    tpu = status.tpu_type or "-"
    if status.slices is not None:
        tpu += f" x {status.slices} slice(s)"
    head = [("request id", status.request_id), ("jobset", status.jobset or "-"),
            ("team", status.team or "-"), ("state", status.state), ("tpu", tpu),
            ("created", _time(status.created_at) + (" UTC" if status.created_at else ""))]
    lines = [f"{key:<11} {value}" for key, value in head]
    return "\n".join([*lines, "", *status.explanation]) + "\n"


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json")


def print_jobs(jobs: Sequence[JobSummary], *, as_json: bool = False) -> None:
    if as_json:
        print(json.dumps([_dump(j) for j in jobs], indent=2))
    else:
        print(format_jobs(jobs), end="")


def print_status(status: JobStatus, *, as_json: bool = False) -> None:
    if as_json:
        print(json.dumps(_dump(status), indent=2))
    else:
        print(format_status(status), end="")


def api_client(args: argparse.Namespace) -> Any:
    """The jobs API client when the command goes through the API (``--api`` or
    ``$ACCELOPS_JOBS_API``), else None (straight to the cluster)."""
    import os

    from shared.jobs.api_client import API_ENV, JobsApiClient

    url = getattr(args, "api", None) or os.environ.get(API_ENV, "").strip()
    return JobsApiClient(url) if url else None


def _context(args: argparse.Namespace) -> tuple[Any, Any]:
    from shared.config import Settings, load_config_from

    return Settings.from_env(), load_config_from(args.config)


def cmd_list(args: argparse.Namespace) -> int:
    from shared.jobs.lookup import list_jobs

    if (api := api_client(args)) is not None:
        print_jobs(api.list_jobs(args.team), as_json=args.json)
        return 0
    settings, config = _context(args)
    print_jobs(list_jobs(settings, config, team=args.team), as_json=args.json)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from shared.jobs.lookup import job_status

    if (api := api_client(args)) is not None:
        print_status(api.job_status(args.id), as_json=args.json)
        return 0
    settings, config = _context(args)
    print_status(job_status(settings, config, args.id), as_json=args.json)
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    from shared.errors import PermanentError
    from shared.jobs.lookup import cancel_job

    if (api := api_client(args)) is not None:
        status = api.cancel_job(args.id)
    else:
        if not args.team:
            raise PermanentError("name the team you act for: --team TEAM (the jobs API "
                                 "knows it from your identity: --api URL)", field="--team")
        settings, config = _context(args)
        status = cancel_job(settings, config, args.id, teams=frozenset({args.team}))
    print(f"cancelled {status.jobset} (request {status.request_id}): its JobSet is deleted; "
          "Kubernetes stops its pods and reconcile_slices deletes its node pools")
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    from shared.jobs.lookup import job_logs

    if (api := api_client(args)) is not None:
        text = api.job_logs(args.id, pod=args.pod, tail_lines=args.tail)
    else:
        settings, config = _context(args)
        text = job_logs(settings, config, args.id, pod=args.pod, tail_lines=args.tail)
    print(text, end="" if text.endswith("\n") or not text else "\n")
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``accelops jobs``: render and submit (``shared/jobs/commands/``), list, status,
    cancel and logs (here), usage (``budget.cli``)."""
    jobs = sub.add_parser("jobs", help="job requests").add_subparsers(
        dest="jobs_command", required=True, metavar="ACTION")
    render = jobs.add_parser("render", help="print the JobSet a request becomes; publishes nothing")
    render.add_argument("file", help="job request JSON file")
    render.add_argument("--config", help="config YAML (default: $ACCELOPS_CONFIG)")
    render.add_argument("--request-id", default="local-render",
                        help="request id when the file has none (default: local-render)")
    render.set_defaults(func="shared.jobs.commands.render:main")
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
    submit.set_defaults(func="shared.jobs.commands.submit:main")
    _add_lookup_commands(jobs)
    add_usage_command(jobs)


def _add_lookup_commands(jobs: Any) -> None:
    """Add list, status, cancel and logs to the ``accelops jobs`` subparsers."""
    ident = ("a request id, a JobSet's NAMESPACE/NAME, or a JobSet name (unique across "
             "namespaces)")
    config_help = "config YAML (default: $ACCELOPS_CONFIG)"
    api_help = ("ask the jobs API at URL instead of the cluster (default: $ACCELOPS_JOBS_API; "
                "the ID token is $ACCELOPS_ID_TOKEN, else one from application default "
                "credentials)")

    listing = jobs.add_parser("list", help="jobs on the cluster, with their state",
                              description="Lists the JobSets of every team (or one) with "
                                          "their state and a one-line summary. " + _RBAC_NOTE)
    listing.add_argument("--team", help="only this team's jobs")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.add_argument("--config", help=config_help)
    listing.add_argument("--api", metavar="URL", help=api_help)
    listing.set_defaults(func=cmd_list)

    status = jobs.add_parser(
        "status", help="why a job is where it is: queued, provisioning, running, finished, "
                       "rejected",
        description="Explains a job's state: a queued job's ClusterQueue, chips and the "
                    "workloads ahead; each slice's node pool and a failed create (stockout, "
                    "quota) with the next attempt; pods and restarts; how it ended; or why "
                    "the request was rejected (from BigQuery's job_events). " + _RBAC_NOTE)
    status.add_argument("id", help=ident)
    status.add_argument("--json", action="store_true", help="print JSON")
    status.add_argument("--config", help=config_help)
    status.add_argument("--api", metavar="URL", help=api_help)
    status.set_defaults(func=cmd_status)

    cancel = jobs.add_parser(
        "cancel", help="delete a job's JobSet (its slices are then reaped)",
        description="Deletes the job's JobSet; its pods stop and reconcile_slices deletes "
                    "its node pools. Refused for a job of another team than --team. "
                    + _RBAC_NOTE + " --team guards against mistakes; RBAC is the boundary.")
    cancel.add_argument("id", help=ident)
    cancel.add_argument("--team", help="the team you act for (required without --api)")
    cancel.add_argument("--config", help=config_help)
    cancel.add_argument("--api", metavar="URL", help=api_help)
    cancel.set_defaults(func=cmd_cancel)

    logs = jobs.add_parser(
        "logs", help="a job pod's log: the first failed pod, else slice 0 worker 0",
        description="Prints the log of one pod of the job. " + _RBAC_NOTE)
    logs.add_argument("id", help=ident)
    logs.add_argument("--pod", help="this pod instead (jobs status names the failed one)")
    logs.add_argument("--tail", type=_positive, metavar="N", help="only the last N lines")
    logs.add_argument("--config", help=config_help)
    logs.add_argument("--api", metavar="URL", help=api_help)
    logs.set_defaults(func=cmd_logs)
