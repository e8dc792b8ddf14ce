"""Fresh clone to a working environment: the locked install against the previous way.

``python -m tests.bench.install`` (not part of ``make bench``: it downloads the whole
tree several times and takes minutes). Each case starts from a fresh ``git clone`` of
this checkout's HEAD in a temporary directory, with an empty download cache of its own
and none of this machine's package mirrors (``PIP_CONFIG_FILE=/dev/null``, no
find-links): every file comes from PyPI, as on a new machine.

* ``demo``: what ``make demo`` installs before it runs (the uv bootstrap, then the
  ``sandbox`` extra from uv.lock);
* ``test``: what ``make test`` installs (the uv bootstrap, the ``dev`` extra and
  checkov's own environment, both from their locks);
* ``previous``: the way the Makefile installed before the lock, for every target:
  ``pip install -e '.[dev]'`` resolved afresh, and checkov unpinned in its own venv
  (``--skip-previous`` leaves it out; ``--previous-timeout`` bounds it).

Per case: wall time, user+sys CPU of the install's processes, bytes received on the
machine's network interfaces (everything but loopback; other traffic on the machine
counts too), the download cache's size afterwards, the installed distributions and the
environments' size. Prints the figures and writes ``bench-results/install.json``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.bench.results import REPO, write_results

MIB = 1024 * 1024


def _received_bytes() -> int:
    total = 0
    for line in Path("/proc/net/dev").read_text().splitlines()[2:]:
        name, _, fields = line.partition(":")
        if name.strip() != "lo":
            total += int(fields.split()[0])
    return total


def _size(path: Path) -> int:
    if not path.exists():
        return 0
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True,
                         check=True).stdout
    return int(out.split()[0])


def _distributions(venv: Path) -> int:
    site = list(venv.glob("lib/python*/site-packages"))
    return sum(1 for _ in site[0].glob("*.dist-info")) if site else 0


def _environment(cache: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PIP_", "UV_", "VIRTUAL_ENV"))}
    env.update({
        # No machine-wide pip configuration (this machine's mirror and find-links).
        "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": "", "PIP_NO_CACHE_DIR": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "UV_CACHE_DIR": str(cache), "XDG_CACHE_HOME": str(cache / "xdg"),
    })
    if "PIP_CERT" in os.environ:
        env["PIP_CERT"] = os.environ["PIP_CERT"]
    return env


def _run_case(name: str, commands: list[list[str]], clone: Path, cache: Path,
              venvs: list[str], timeout_s: float) -> dict[str, Any]:
    env = _environment(cache)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    received = _received_bytes()
    start = time.monotonic()
    outcome = "ok"
    for command in commands:
        left = timeout_s - (time.monotonic() - start)
        try:
            done = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True,
                                  timeout=max(left, 1), check=False)
        except subprocess.TimeoutExpired:
            outcome = f"timed out after {timeout_s:.0f} s"
            break
        if done.returncode != 0:
            outcome = f"failed: {' '.join(command)} (exit {done.returncode})"
            print(done.stdout[-3000:], done.stderr[-3000:], sep="\n", file=sys.stderr)
            break
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    figures = {
        "outcome": outcome,
        "wall_s": round(wall, 1),
        "user_plus_sys_s": round(after.ru_utime - before.ru_utime
                                 + after.ru_stime - before.ru_stime, 1),
        "received_mib": round((_received_bytes() - received) / MIB, 1),
        "cache_mib": round(_size(cache) / MIB, 1),
        "distributions": {venv: _distributions(clone / venv) for venv in venvs},
        "installed_mib": {venv: round(_size(clone / venv) / MIB, 1) for venv in venvs},
    }
    print(f"{name:>9}: {figures}", flush=True)
    return figures


def _clone(into: Path) -> Path:
    clone = into / "accelops"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(clone)],
                   check=True)
    return clone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-previous", action="store_true")
    parser.add_argument("--previous-timeout", type=float, default=3600.0)
    parser.add_argument("--timeout", type=float, default=1800.0)
    args = parser.parse_args()
    python = shutil.which("python3") or sys.executable
    cases: list[tuple[str, list[list[str]], list[str], float]] = [
        ("demo", [["make", ".venv/.installed-sandbox"]], [".venv"], args.timeout),
        ("test", [["make", "venv", ".venv-checkov/.installed-stamp"]],
         [".venv", ".venv-checkov"], args.timeout),
    ]
    if not args.skip_previous:
        cases.append(("previous", [
            [python, "-m", "venv", ".venv"],
            [".venv/bin/python", "-m", "pip", "install", "--quiet", "-e", ".[dev]"],
            [python, "-m", "venv", ".venv-checkov"],
            [".venv-checkov/bin/python", "-m", "pip", "install", "--quiet", "checkov>=3.3,<4"],
        ], [".venv", ".venv-checkov"], args.previous_timeout))
    results: dict[str, Any] = {
        "conditions": {"cores": os.cpu_count(), "load_average_at_start": os.getloadavg(),
                       "python": sys.version.split()[0]},
    }
    for name, commands, venvs, timeout_s in cases:
        with tempfile.TemporaryDirectory(prefix=f"install-{name}-") as tmp:
            clone = _clone(Path(tmp))
            results[name] = _run_case(name, commands, clone, Path(tmp) / "cache", venvs,
                                      timeout_s)
    results["conditions"]["load_average_at_end"] = os.getloadavg()
    write_results("install", results)


if __name__ == "__main__":
    main()
