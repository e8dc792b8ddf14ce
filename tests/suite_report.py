"""The suite measures itself: ``--suite-report=PATH`` (``make test`` passes
``bench-results/suite.json``) writes the run's wall time, workers, outcome counts and
slowest tests there, and fails the run when a whole-suite run took longer than the budget.

The budget is kept in one place, ``[tool.accelops.suite] budget_seconds`` in
pyproject.toml. Only a run of the whole suite in parallel is judged against it: a run of
a subset (paths, ``-k``, ``-m``, ``--deselect``, ``--lf``: anything deselected) or a
serial run (``-n0``) is measured and written, with the reason it was not judged.

Under pytest-xdist the plugin runs in the controller only, which receives every worker's
reports (``pytest_runtest_logreport``), so the slowest tests are the whole run's.

The report also times a fixed piece of pure-Python work at the start and the end of the
run (``host_probe_ms``). The same code has taken 575 s on one 2-core machine and 768 s on
the same machine another day, when every process ran about a third slower; the probe is
what tells a slower host from a slower suite.
"""

from __future__ import annotations

import json
import time
import tomllib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

BUDGET_TABLE = "[tool.accelops.suite] budget_seconds"
SLOWEST_KEPT = 25
SLOWEST_NAMED = 10
PROBE_ITERATIONS = 2_000_000
OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed", "deselected")


@dataclass(frozen=True)
class Timing:
    nodeid: str
    phase: str
    seconds: float


@dataclass(frozen=True)
class Verdict:
    judged: bool
    over_budget: bool
    message: str


def load_budget(pyproject: Path) -> float:
    """The suite's budget in seconds, from pyproject.toml; raises KeyError when missing."""
    table = tomllib.loads(pyproject.read_text("utf-8"))
    return float(table["tool"]["accelops"]["suite"]["budget_seconds"])


def subset_reason(paths: Sequence[Path], root: Path, testpaths: Sequence[Path],
                  deselected: int, keyword: str, markexpr: str) -> str | None:
    """Why this run is not the whole suite, or None when it is: ``paths`` (absolute) are
    the repository ``root`` or its ``testpaths``, and nothing is deselected."""
    whole = {p.resolve() for p in (root, *testpaths)}
    narrower = [str(p.relative_to(root)) if p.is_relative_to(root) else str(p)
                for p in paths if p.resolve() not in whole]
    if narrower:
        return f"a subset: {' '.join(narrower)}"
    if keyword:
        return f"a subset: -k {keyword!r}"
    if markexpr:
        return f"a subset: -m {markexpr!r}"
    if deselected:
        return f"a subset: {deselected} tests deselected"
    return None


def slowest(timings: Sequence[Timing], count: int) -> list[Timing]:
    return sorted(timings, key=lambda t: (-t.seconds, t.nodeid, t.phase))[:count]


def judge(wall_seconds: float, budget_seconds: float, workers: int,
          subset: str | None, timings: Sequence[Timing]) -> Verdict:
    """Whether the run is over budget, and a message that says so (with the slowest
    tests, where the time went) or why the run was not judged."""
    measured = f"{wall_seconds:.0f} s"
    if subset is not None:
        return Verdict(False, False, f"suite budget not judged: {subset} took {measured} "
                                     f"(the budget, {budget_seconds:.0f} s, is for the "
                                     "whole suite)")
    if workers < 2:
        return Verdict(False, False, f"suite budget not judged: a serial run took {measured} "
                                     f"(the budget, {budget_seconds:.0f} s, is for the "
                                     "parallel suite, e.g. `make test`)")
    if wall_seconds <= budget_seconds:
        return Verdict(True, False, f"suite within budget: {measured} of "
                                    f"{budget_seconds:.0f} s ({BUDGET_TABLE})")
    lines = [f"suite over budget: the whole suite took {measured} on {workers} workers, "
             f"over the budget of {budget_seconds:.0f} s ({BUDGET_TABLE} in pyproject.toml)."
             f" Make it faster or pay for it by raising the budget. The "
             f"{SLOWEST_NAMED} slowest tests:"]
    lines += [f"  {t.seconds:8.2f} s  {t.phase:<8} {t.nodeid}"
              for t in slowest(timings, SLOWEST_NAMED)]
    return Verdict(True, True, "\n".join(lines))


def host_probe_ms() -> float:
    """The best of three timings of the same pure-Python loop, in milliseconds (245 ms on
    the slower day in pyproject.toml's budget comment); more on a slower or busier host."""
    def once() -> float:
        started = time.perf_counter()
        total = 0
        for i in range(PROBE_ITERATIONS):
            total += i * i % 7
        return time.perf_counter() - started
    return round(min(once() for _ in range(3)) * 1000, 1)


def report(wall_seconds: float, workers: int, counts: dict[str, int], budget: float,
           verdict: Verdict, timings: Sequence[Timing],
           probes: Sequence[float] = ()) -> dict[str, Any]:
    return {
        "wall_seconds": round(wall_seconds, 1),
        "host_probe_ms": list(probes),
        "workers": workers,
        "counts": counts,
        "budget_seconds": budget,
        "judged": verdict.judged,
        "over_budget": verdict.over_budget,
        "verdict": verdict.message,
        "slowest": [asdict(t) | {"seconds": round(t.seconds, 2)}
                    for t in slowest(timings, SLOWEST_KEPT)],
    }


class SuiteReport:
    """The pytest plugin (the controller's, under xdist)."""

    def __init__(self, config: pytest.Config, path: Path) -> None:
        self.config = config
        self.path = path
        self.started = time.monotonic()
        self.timings: list[Timing] = []
        self.verdict: Verdict | None = None
        self.probes = [host_probe_ms()]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.timings.append(Timing(report.nodeid, report.when or "", report.duration))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        wall = time.monotonic() - self.started
        config = self.config
        stats: dict[str, list[Any]] = config.pluginmanager.get_plugin("terminalreporter").stats
        counts = {k: len(stats.get(k, [])) for k in OUTCOMES}
        workers = int(getattr(config.option, "numprocesses", 0) or 0)
        root = config.rootpath
        testpaths = [root / p for p in config.getini("testpaths")]
        base = root if config.args_source == pytest.Config.ArgsSource.TESTPATHS \
            else config.invocation_params.dir
        paths = [base / a.split("::")[0] for a in config.args]
        subset = subset_reason(paths, root, testpaths, counts["deselected"],
                               config.option.keyword, config.option.markexpr)
        budget = load_budget(root / "pyproject.toml")
        self.verdict = judge(wall, budget, workers, subset, self.timings)
        self.probes.append(host_probe_ms())
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(
            report(wall, workers, counts, budget, self.verdict, self.timings, self.probes),
            indent=2) + "\n")
        if self.verdict.over_budget and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.verdict is not None:
            terminalreporter.write_sep("=", "suite budget", red=self.verdict.over_budget,
                                       green=not self.verdict.over_budget)
            terminalreporter.write_line(self.verdict.message)
            start, end = self.probes[0], self.probes[-1]
            terminalreporter.write_line(
                f"host probe: {start:.0f} ms at the start, {end:.0f} ms at the end (a fixed "
                "pure-Python loop; larger on a slower host)")
            terminalreporter.write_line(f"(written to {self.path})")
