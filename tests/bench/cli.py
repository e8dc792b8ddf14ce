"""``python -m tests.bench.cli [--compare CHECKOUT]``: what ``accelops --help`` and
``accelops --version`` cost, beside the functions' entry-point import.

Each figure is the median of ``BENCH_SAMPLES`` (default 7) fresh interpreters: wall
time, user+sys CPU, and the total of ``python -X importtime`` (the sum of every
module's own import time). The bare interpreter (``python -c pass``) is measured the
same way, so what the command line adds is the difference. ``--compare`` measures
another checkout (the one before a change, say) in the same run. Prints the figures
and writes ``bench-results/cli.json``.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.bench.results import REPO, write_results

SAMPLES = int(os.environ.get("BENCH_SAMPLES", "7"))

CASES: dict[str, list[str]] = {
    "python -c pass": ["-c", "pass"],
    "accelops --help": ["-m", "shared.cli", "--help"],
    "accelops --version": ["-m", "shared.cli", "--version"],
    "import functions.main": ["-c", "import functions.main"],
}
_SELF = re.compile(r"^import time:\s+(\d+) \|")


def _env(checkout: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(checkout)}


def _once(argv: list[str], checkout: Path) -> tuple[float, float, int]:
    """Wall seconds, user+sys seconds and exit status of one fresh interpreter."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], cwd=checkout, env=_env(checkout),
                          capture_output=True, check=False, timeout=120)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def _importtime(argv: list[str], checkout: Path) -> float:
    """Seconds of ``-X importtime``'s self times, summed (every module once)."""
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], cwd=checkout,
                          env=_env(checkout), capture_output=True, text=True, check=False,
                          timeout=120)
    return sum(int(m.group(1)) for line in done.stderr.splitlines()
               if (m := _SELF.match(line))) / 1e6


def measure(checkout: Path) -> dict[str, dict[str, Any]]:
    figures: dict[str, dict[str, Any]] = {}
    for name, argv in CASES.items():
        runs = [_once(argv, checkout) for _ in range(SAMPLES)]
        imports = [_importtime(argv, checkout) for _ in range(SAMPLES)]
        figures[name] = {
            "wall_ms": round(statistics.median(r[0] for r in runs) * 1000, 1),
            "cpu_ms": round(statistics.median(r[1] for r in runs) * 1000, 1),
            "importtime_ms": round(statistics.median(imports) * 1000, 1),
            "exit_status": runs[0][2],
        }
    return figures


def _print(label: str, figures: dict[str, dict[str, Any]]) -> None:
    print(f"\n{label}: median of {SAMPLES} fresh interpreters")
    print(f"  {'':<24} {'wall ms':>8} {'user+sys ms':>12} {'importtime ms':>14} {'exit':>5}")
    for name, f in figures.items():
        print(f"  {name:<24} {f['wall_ms']:>8.1f} {f['cpu_ms']:>12.1f} "
              f"{f['importtime_ms']:>14.1f} {f['exit_status']:>5}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.cli")
    parser.add_argument("--compare", type=Path, metavar="CHECKOUT",
                        help="also measure another checkout (e.g. the one before a change)")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"samples": SAMPLES, "load_average": os.getloadavg(),
                               "this checkout": measure(REPO)}
    _print("this checkout", results["this checkout"])
    if args.compare is not None:
        other = args.compare.resolve()
        results["compared with"] = str(other)
        results["other checkout"] = measure(other)
        _print(f"compared with {other}", results["other checkout"])
    write_results("cli", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
