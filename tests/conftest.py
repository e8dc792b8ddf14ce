"""Suite-wide set-up: each pytest-xdist worker its own port range, Hypothesis without
timing checks, and the suite's report.

Servers told their port on the command line get it from ``sandbox.common.ports.free_port``,
which picks from ``ACCELOPS_PORT_RANGE``: set here per worker (``gw0``, ``gw1``, ...; the
subprocesses a test starts inherit it), so two workers never pick from the same range.

Hypothesis's per-example deadline (200 ms) and its too-slow health check are timed
assertions: on a busy machine (workers beside each other, another job on the box) an
example that takes 350 ms once fails a correct test as "unreliable". The suite's profile
turns both off; what each property asserts is unchanged.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from sandbox.common import ports
from tests.suite_report import SuiteReport

settings.register_profile("accelops", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("accelops")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--suite-report", metavar="PATH", default=None,
                     help="write the run's wall time, counts and slowest tests to PATH "
                          "(JSON) and fail a whole-suite run over the budget in pyproject.toml")


# The order workers take modules in (make test runs xdist with --dist loadfile and
# --no-loadscope-reorder, so modules go out in collection order): the long sandbox
# scenarios first, the thousands of quick unit tests last, where they fill in around
# whichever worker finishes first. xdist's own order (most tests first) sent the
# one-test demo, two minutes long, out last: a worker ran it alone at the end.
HEAVIEST_FIRST = ("e2e", "fuzz", "functional", "browser", "unit")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent

    def rank(item: pytest.Item) -> int:
        try:
            folder = item.path.relative_to(tests).parts[0]
        except ValueError:
            return len(HEAVIEST_FIRST)
        return (HEAVIEST_FIRST.index(folder) if folder in HEAVIEST_FIRST
                else len(HEAVIEST_FIRST))

    items.sort(key=rank)  # stable: within a folder, files and tests keep their order


def pytest_configure(config: pytest.Config) -> None:
    low, high = ports.worker_range(os.environ.get("PYTEST_XDIST_WORKER"))
    os.environ[ports.ENV] = f"{low}-{high}"
    path = config.getoption("--suite-report")
    if path and not hasattr(config, "workerinput"):  # the xdist controller, or a serial run
        config.pluginmanager.register(SuiteReport(config, Path(path)), "accelops-suite-report")
