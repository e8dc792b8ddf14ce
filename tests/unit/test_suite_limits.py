"""The suite's own limits: a hanging test fails with its name and stack within the
per-test limit (pytest-timeout, as configured in pyproject.toml), serially and under
pytest-xdist; and the whole-suite budget check's decision."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.suite_report import Timing, judge, load_budget, report, subset_reason

REPO = Path(__file__).resolve().parents[2]

HANGS = '''
import time


def test_that_sleeps_forever():
    time.sleep(10**6)


def test_that_passes():
    assert True
'''


def run_hanging_test(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """pytest in a subprocess with the project's configuration (pyproject.toml's
    timeout method and scope), on a file whose first test never returns, limit 2 s.
    Only the two plugins that matter are loaded: every installed one costs seconds."""
    (tmp_path / "test_hangs.py").write_text(HANGS)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"),
         "--rootdir", str(tmp_path), "-p", "pytest_timeout", "-p", "xdist.plugin",
         "--timeout=2", *extra, str(tmp_path / "test_hangs.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        env=os.environ | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})


@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["serially", "under-xdist"])
def test_a_test_that_sleeps_forever_fails_with_its_name_and_stack_and_the_run_goes_on(
        tmp_path: Path, workers: list[str]) -> None:
    run = run_hanging_test(tmp_path, *workers)
    output = run.stdout + run.stderr

    assert run.returncode == 1, output
    assert "FAILED test_hangs.py::test_that_sleeps_forever" in output
    assert "Timeout (>2.0s) from pytest-timeout" in output
    assert "time.sleep(10**6)" in output  # the stack, down to the line that hung
    assert "1 failed, 1 passed" in output


def test_the_budget_is_kept_in_pyproject() -> None:
    assert load_budget(REPO / "pyproject.toml") > 0


TIMINGS = [Timing(f"tests/e2e/test_{i}.py::test_x", "call", float(i)) for i in range(30)]


def test_a_whole_parallel_run_over_budget_fails_naming_budget_time_and_ten_slowest() -> None:
    verdict = judge(700.4, 660, 3, None, TIMINGS)

    assert verdict.judged
    assert verdict.over_budget
    assert "700 s" in verdict.message
    assert "660 s" in verdict.message
    assert "budget_seconds" in verdict.message
    named = [t.nodeid for t in TIMINGS if t.nodeid in verdict.message]
    assert named == [f"tests/e2e/test_{i}.py::test_x" for i in range(20, 30)]


def test_a_whole_parallel_run_within_budget_passes() -> None:
    verdict = judge(600, 660, 2, None, TIMINGS)

    assert verdict.judged
    assert not verdict.over_budget


def test_a_subset_is_not_judged_against_the_whole_suite_budget() -> None:
    verdict = judge(5000, 660, 3, "a subset: tests/e2e", TIMINGS)

    assert not verdict.judged
    assert not verdict.over_budget
    assert "tests/e2e" in verdict.message


def test_a_serial_run_is_not_judged_against_the_parallel_budget() -> None:
    verdict = judge(1500, 660, 0, None, TIMINGS)

    assert not verdict.judged
    assert not verdict.over_budget


def test_the_run_is_the_whole_suite_only_without_paths_keywords_marks_or_deselection() -> None:
    tests = REPO / "tests"

    assert subset_reason([tests], REPO, [tests], 0, "", "") is None
    assert subset_reason([REPO], REPO, [tests], 0, "", "") is None
    assert subset_reason([tests / "unit"], REPO, [tests], 0, "", "") == "a subset: tests/unit"
    assert subset_reason([tests], REPO, [tests], 0, "kube", "") == "a subset: -k 'kube'"
    assert subset_reason([tests], REPO, [tests], 0, "", "e2e") == "a subset: -m 'e2e'"
    assert subset_reason([tests], REPO, [tests], 4, "", "") == "a subset: 4 tests deselected"


def test_the_report_keeps_the_25_slowest_tests_slowest_first() -> None:
    written = report(100, 3, {"passed": 30}, 660, judge(100, 660, 3, None, TIMINGS), TIMINGS)

    assert [t["seconds"] for t in written["slowest"]] == [float(i) for i in range(29, 4, -1)]
    assert written["slowest"][0] == {"nodeid": "tests/e2e/test_29.py::test_x",
                                     "phase": "call", "seconds": 29.0}
    assert (written["workers"], written["wall_seconds"], written["judged"]) == (3, 100, True)


def test_every_test_has_a_time_limit_that_covers_its_fixtures() -> None:
    ini = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["tool"]["pytest"][
        "ini_options"]

    # Generous for the slowest test on a busy machine, short beside the CI budget.
    assert 300 <= ini["timeout"] <= 900
    assert ini["timeout_method"] == "signal"
    assert ini["timeout_func_only"] is False


def test_a_run_under_xdist_writes_every_workers_tests_to_the_suite_report(tmp_path: Path) -> None:
    written = tmp_path / "suite.json"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "pytest_timeout", "-p", "xdist.plugin",
         "-n", "1", f"--suite-report={written}", "tests/unit/test_suite_limits.py",
         "-k", "whole_parallel_run"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
        env=os.environ | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    suite = json.loads(written.read_text())

    assert run.returncode == 0, run.stdout + run.stderr
    assert suite["workers"] == 1
    assert suite["counts"]["passed"] == 2
    assert suite["counts"]["failed"] == 0
    assert suite["judged"] is False
    assert "a subset: tests/unit/test_suite_limits.py took" in suite["verdict"]
    assert {t["nodeid"] for t in suite["slowest"]} == {
        "tests/unit/test_suite_limits.py::" + name for name in (
            "test_a_whole_parallel_run_over_budget_fails_naming_budget_time_and_ten_slowest",
            "test_a_whole_parallel_run_within_budget_passes")}
    assert "suite budget not judged" in run.stdout
    # the host's speed at the start and the end, to tell a slower host from a slower suite
    assert len(suite["host_probe_ms"]) == 2
    assert all(ms > 0 for ms in suite["host_probe_ms"])
    assert re.search(r"host probe: \d+ ms at the start, \d+ ms at the end", run.stdout)
