"""Suite-wide set-up: each pytest-xdist worker its own port range, and the suite's report.

Servers told their port on the command line get it from ``sandbox.ports.free_port``,
which picks from ``ACCELOPS_PORT_RANGE``: set here per worker (``gw0``, ``gw1``, ...; the
subprocesses a test starts inherit it), so two workers never pick from the same range.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox import ports
from tests.suite_report import SuiteReport


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--suite-report", metavar="PATH", default=None,
                     help="write the run's wall time, counts and slowest tests to PATH "
                          "(JSON) and fail a whole-suite run over the budget in pyproject.toml")


def pytest_configure(config: pytest.Config) -> None:
    low, high = ports.worker_range(os.environ.get("PYTEST_XDIST_WORKER"))
    os.environ[ports.ENV] = f"{low}-{high}"
    path = config.getoption("--suite-report")
    if path and not hasattr(config, "workerinput"):  # the xdist controller, or a serial run
        config.pluginmanager.register(SuiteReport(config, Path(path)), "accelops-suite-report")
