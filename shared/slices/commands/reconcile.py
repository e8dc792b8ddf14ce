"""``accelops slices plan|reconcile``: observe JobSets and node pools, print the plan,
and (reconcile) act on it once."""

from __future__ import annotations

import argparse
import time

from shared.slices.reconcile import ReconcileReport, reconcile

__all__ = ["main", "print_report"]


def print_report(report: ReconcileReport) -> None:
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


def main(args: argparse.Namespace) -> int:
    dry_run = args.action == "plan"
    report = reconcile(dry_run=dry_run, cleanup_only=True if args.cleanup_only else None)
    print_report(report)
    return 0
