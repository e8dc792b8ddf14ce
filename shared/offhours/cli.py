"""``accelops schedule plan [--at TIME] [--force] | run [--force]``."""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

__all__ = ["add_commands", "parse_at"]


def parse_at(text: str) -> dt.datetime:
    """An ISO 8601 time (``2026-11-23T19:05+01:00``); without an offset it is UTC."""
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give an ISO 8601 time, e.g. 2026-11-23T19:05+01:00") from None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _context(args: argparse.Namespace) -> tuple[Any, Any]:
    from shared.config import Settings, load_config_from

    return Settings.from_env(), load_config_from(args.config)


def _print_schedules(config: Any, at: dt.datetime) -> None:
    from shared.offhours.windows import desired_state

    for name, schedule in sorted(config.schedules.items()):
        lead = (schedule.lead_time_minutes if schedule.lead_time_minutes is not None
                else config.pool_schedule.lead_time_minutes)
        state = desired_state(schedule, name, at, lead)
        print(f"  {'ON ' if state.on else 'OFF'} {state.reason}")


def cmd_plan(args: argparse.Namespace) -> int:
    from shared.offhours.tick import plan_tick

    settings, config = _context(args)
    at, clusters = plan_tick(settings, config, args.at, force=args.force)
    print(f"pool schedule at {at.isoformat()}"
          f"{' (forced: busy pools are removed too)' if args.force else ''}")
    _print_schedules(config, at)
    for cluster in clusters:
        print(f"{cluster.ref.path}:")
        if cluster.error:
            print(f"  cannot be read: {cluster.error}")
            continue
        scheduled = [p for p in cluster.pools if p.schedule and not p.managed]
        print(f"  {len(cluster.pools)} node pool(s), {len(scheduled)} on a schedule, "
              f"{len(cluster.saved)} saved while removed")
        if not cluster.plans:
            print("  nothing to do")
        for plan in cluster.plans:
            steps = "; ".join(s.describe() for s in plan.steps)
            print(f"  {plan.pool}: {plan.note}{' [' + steps + ']' if steps else ''}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from shared.offhours.tick import run_tick

    settings, config = _context(args)
    report = run_tick(settings, config, force=args.force)
    print(f"pool schedule at {report.at.isoformat()}")
    for line in report.lines():
        print(f"  {line}")
    print(report.summary())
    return 0


def add_commands(sub: Any) -> None:
    schedule = sub.add_parser(
        "schedule", help="off-hours node pools: print what a tick would do, or run one",
        description="Applies the config's schedules to node pools labelled "
                    "accelops.dev/schedule=<name> in the clusters in scope "
                    "(pool_schedule.clusters, else ACCELOPS_PROJECT/LOCATION/CLUSTER).")
    actions = schedule.add_subparsers(dest="schedule_command", required=True, metavar="ACTION")
    plan = actions.add_parser("plan", help="print what a tick would do (dry run)")
    plan.add_argument("--at", type=parse_at, metavar="TIME",
                      help="plan as if it were TIME (ISO 8601; no offset: UTC); "
                           "default: now")
    run = actions.add_parser("run", help="run one tick now")
    for parser, func in ((plan, cmd_plan), (run, cmd_run)):
        parser.add_argument("--force", action="store_true",
                            help="remove pools even while pods run on them (emergencies)")
        parser.add_argument("--config", help="config YAML (default: $ACCELOPS_CONFIG)")
        parser.set_defaults(func=func)
