"""`accelops --help` and `--version` answer without importing a client, and every
command's implementation is found when it runs; the start-up deadline's setting is
checked before anything starts."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from shared.cli import COMMANDS_GROUP, build_parser, command, entry_points, main
from shared.metrics.cli import DAILY_REPORTS
from tests.functional.conftest import REPO

# What a command line that only parses must not import: the clients and what they
# stand on. (`google` and `google.cloud` themselves are namespace packages a .pth file
# of the virtualenv imports into every interpreter, so only their contents count.)
HEAVY = ("kubernetes", "google.", "grpc", "requests", "urllib3", "pydantic", "yaml",
         "proto", "sandbox")
# Except the sandbox's light module that adds its commands (the accelops.commands entry
# point).
LIGHT = ("sandbox", "sandbox.commands")

_IMPORTED_BY = """
import json, sys
before = set(sys.modules)
from shared.cli import main
try:
    main(json.loads(sys.argv[1]))
except SystemExit:
    pass
print(json.dumps(sorted(set(sys.modules) - before)), file=sys.stderr)
"""


def _run(*code_and_args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *code_and_args], capture_output=True, text=True,
                          cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
                          check=False, timeout=120)


def test_version_prints_the_package_version_and_exits_zero() -> None:
    expected = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    done = _run("-m", "shared.cli", "--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"accelops {expected}\n", "")


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["sandbox", "--help"],
                                  ["deploy", "up", "--help"], ["jobs", "list", "--help"]])
def test_help_and_version_import_no_client(argv: list[str]) -> None:
    done = _run("-c", _IMPORTED_BY, json.dumps(argv))
    imported = json.loads(done.stderr.strip().splitlines()[-1])
    assert done.stdout.startswith(("usage: accelops", "accelops "))
    assert [name for name in imported if name.startswith(HEAVY) and name not in LIGHT] == []


def _targets(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[str, object]:
    found: dict[str, object] = {}
    if "func" in parser._defaults:  # argparse keeps set_defaults there
        found[" ".join(path)] = parser._defaults["func"]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_targets(sub, (*path, name)))
    return found


def test_every_command_names_an_implementation_that_imports_and_is_callable() -> None:
    targets = _targets(build_parser())
    assert {"sandbox", "demo", "loadtest", "deploy up", "deploy down", "catalogue"} <= set(
        targets)
    targets.update({f"report {word}": target for word, target in DAILY_REPORTS.items()})
    targets["report TEST_ID"] = "shared.metrics.commands.report:main"
    for name, target in targets.items():
        assert callable(command(target)), name  # type: ignore[arg-type]


@pytest.mark.parametrize("group", [COMMANDS_GROUP, "console_scripts"])
def test_entry_points_are_those_importlib_metadata_finds(group: str) -> None:
    expected = {point.name: point.value.partition("[")[0].strip()
                for point in importlib.metadata.entry_points(group=group)}
    assert entry_points(group) == expected
    assert entry_points(COMMANDS_GROUP) == {"sandbox": "sandbox.commands:add_commands"}


@pytest.mark.parametrize(("argv", "env", "message"), [
    (["--start-timeout", "0"], "", "--start-timeout must be a positive number of seconds, "
                                   "not '0.0'"),
    ([], "soon", "ACCELOPS_SANDBOX_START_TIMEOUT must be a positive number of seconds, "
                 "not 'soon'"),
])
def test_sandbox_up_refuses_a_start_timeout_that_is_not_a_number_of_seconds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        argv: list[str], env: str, message: str) -> None:
    monkeypatch.setenv("ACCELOPS_SANDBOX_START_TIMEOUT", env)
    state = tmp_path / "state"
    assert main(["sandbox", "up", "--state-dir", str(state), *argv]) == 1
    assert capsys.readouterr().err == f"accelops sandbox: {message}\n"
    assert not state.exists()  # refused before anything started


@pytest.mark.parametrize(("argv", "target"), [
    (["doctor", "--state-dir", "sb"], "sandbox.targets:doctor"),
    (["deploy", "up", "--sandbox", "sb"], "sandbox.targets:deploy_up"),
    (["doctor"], "shared.deployment.doctor:main"),
    (["deploy", "up"], "shared.deployment.deploy_cli:cmd_up"),
    (["report", "savings"], "shared.metrics.commands.report_savings:main"),
    (["report", "lt-1"], "shared.metrics.commands.report:main"),
])
def test_options_naming_the_sandbox_send_the_command_there(argv: list[str],
                                                           target: str) -> None:
    args = build_parser().parse_args(argv)
    assert args.func == target
    assert callable(command(args.func))


def test_the_report_reads_the_sandboxs_bigquery_when_none_is_named() -> None:
    args = build_parser().parse_args(["report", "savings"])
    assert args.local_metrics.__name__ == "sandbox.targets:local_metrics"
    assert callable(command("sandbox.targets:local_metrics"))
