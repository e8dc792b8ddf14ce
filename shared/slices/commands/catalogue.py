"""``accelops catalogue``: the TPU slice shapes accelops knows, as a table or JSON."""

from __future__ import annotations

import argparse
import json

from shared.jobspec.tpu import catalogue

__all__ = ["main"]


def main(args: argparse.Namespace) -> int:
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
