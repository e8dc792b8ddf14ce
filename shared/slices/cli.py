"""``accelops catalogue`` and ``accelops slices plan|reconcile``: their arguments.

Light (argparse only): each command is named as ``"module:function"`` of
``shared/slices/commands/``, imported only when it runs.
"""

from __future__ import annotations

import argparse

__all__ = ["add_commands"]


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cat = sub.add_parser("catalogue", help="print the TPU slice shapes accelops knows")
    cat.add_argument("--json", action="store_true", help="print JSON instead of a table")
    cat.set_defaults(func="shared.slices.commands.catalogue:main")

    slices = sub.add_parser(
        "slices", help="TPU node pools: print the plan, or reconcile once",
        description="Observe JobSets and node pools of the cluster named by the environment "
                    "(KUBECONFIG or ACCELOPS_PROJECT/LOCATION/CLUSTER) and plan or act.")
    slices.add_argument("action", choices=["plan", "reconcile"],
                        help="plan: print without acting (dry run); reconcile: act once")
    slices.add_argument("--cleanup-only", action="store_true",
                        help="only delete pools, never create")
    slices.set_defaults(func="shared.slices.commands.reconcile:main")
