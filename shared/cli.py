"""The ``accelops`` command line: builds the parser and runs the command chosen.

The parser is built from light modules only (argparse and the standard library), so
``accelops --help`` and ``accelops --version`` answer without importing a client.
Each feature adds its own commands (``shared/<feature>/cli.py``); a command names its
implementation as ``"module:function"`` (or a function of that light module), and
:func:`main` imports that module only when the command runs (the one place the
command line imports on demand), so ``accelops catalogue`` does not pay for the
Pub/Sub client and ``accelops jobs render`` publishes nothing.

Callers built on the library add commands too, and never the other way round: every
installed ``accelops.commands`` entry point names a function that is given the
subparsers once the library's commands are in, and adds its own commands or options
of existing ones (:func:`subcommand` finds one, :func:`lazy` defers an import to a
call). The sandbox adds ``sandbox``, ``loadtest`` and ``demo`` and what ``report``,
``doctor`` and ``deploy up`` do against it (``sandbox/commands.py``).

Errors print one line naming the problem and exit non-zero; tracebacks are kept
for bugs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

# Each feature's commands, added to the parser: light modules (argparse and the standard
# library), whose commands are named as "module:function" or import on their own.
from shared.deployment.cli import add_commands as add_deployment_commands
from shared.deployment.loadtest_cli import add_commands as add_loadtest_commands
from shared.errors import AccelopsError
from shared.jobs.cli import add_commands as add_job_commands
from shared.metrics.cli import add_commands as add_metrics_commands
from shared.offhours.cli import add_commands as add_schedule_commands
from shared.serving.cli import add_commands as add_model_commands
from shared.slices.cli import add_commands as add_slice_commands

__all__ = ["COMMANDS_GROUP", "Subcommands", "build_parser", "command", "entry_points", "lazy",
           "main", "subcommand", "version"]

# The entry-point group of the commands callers add.
COMMANDS_GROUP = "accelops.commands"

# What add_subparsers returns (generic only to type checkers).
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def version() -> str:
    """The installed distribution's version (``0.1.0``); ``unknown`` when this checkout
    runs without being installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("accelops")
    except PackageNotFoundError:
        return "unknown"


class _Version(argparse.Action):
    """``--version``: looked up only when asked for (importlib.metadata reads the
    installed distributions)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"accelops {version()}")
        parser.exit()


Command = Callable[[argparse.Namespace], int]


def command(target: Command | str) -> Command:
    """A command's implementation: the function itself, or ``"module:function"``
    imported now — the command line's one import on demand."""
    if callable(target):
        return target
    found: Command = _resolve(target)
    return found


def _resolve(target: str) -> Any:
    """What ``"module:attribute"`` names, its module imported now."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def lazy(target: str) -> Callable[..., Any]:
    """``"module:function"`` as a function that imports it when called: what a light
    module hands to a command (an option's default) without importing it now."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return _resolve(target)(*args, **kwargs)

    call.__qualname__ = call.__name__ = target
    return call


def subcommand(sub: Subcommands, *names: str) -> argparse.ArgumentParser:
    """The parser of an existing command, ``subcommand(sub, "deploy", "up")``, for a
    caller that adds an option to it."""
    parser = sub.choices[names[0]]
    for name in names[1:]:
        inner = next(action for action in parser._actions
                     if isinstance(action, argparse._SubParsersAction))
        parser = inner.choices[name]
    return parser


def entry_points(group: str) -> dict[str, str]:
    """Name → ``"module:function"`` of the installed distributions' entry points in
    ``group``: what ``importlib.metadata.entry_points(group=group)`` finds (the first
    distribution of a name on ``sys.path`` counts), read from each ``*.dist-info`` (or
    ``*.egg-info``) directory's ``entry_points.txt``. Importing importlib.metadata and
    reading every distribution's metadata would take ``accelops --help`` longer than
    building the whole parser; tests/functional/test_cli_answers_fast.py checks both
    agree."""
    header = f"[{group}]"
    found: dict[str, str] = {}
    seen: set[str] = set()
    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:
            continue  # not a directory (a zip archive, a missing path)
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            distribution = name.partition("-")[0].lower().replace(".", "_")
            if distribution in seen:
                continue
            seen.add(distribution)
            try:
                with open(os.path.join(entry or ".", name, "entry_points.txt"),
                          encoding="utf-8") as file:
                    text = file.read()
            except OSError:
                continue
            if header in text:
                found.update((key, value) for key, value in _section(text, header)
                             if key not in found)
    return found


def _section(text: str, header: str) -> list[tuple[str, str]]:
    """The ``name = value`` lines of one ``[group]`` section of an entry_points.txt."""
    lines, inside = [], False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            inside = line == header
        elif inside and "=" in line and not line.startswith(("#", ";")):
            key, _, value = line.partition("=")
            lines.append((key.strip(), value.partition("[")[0].strip()))
    return lines


def _added_commands() -> list[Callable[[Subcommands], None]]:
    """The functions of the installed ``accelops.commands`` entry points, by name."""
    return [_resolve(target) for _, target in sorted(entry_points(COMMANDS_GROUP).items())]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="accelops",
        description="Event-driven automation for AI accelerators on GKE.",
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    add_slice_commands(sub)
    add_job_commands(sub)
    add_metrics_commands(sub)
    add_deployment_commands(sub)
    add_loadtest_commands(sub)
    add_model_commands(sub)
    add_schedule_commands(sub)

    # What callers built on the library add (the sandbox: sandbox, loadtest, demo, and
    # its options of report, doctor and deploy up), after the library's own.
    for add in _added_commands():
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result: int = command(args.func)(args)
    except AccelopsError as exc:
        where = f" [{exc.field}]" if exc.field else ""
        print(f"accelops: error{where}: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Output piped into head(1) and friends: stop quietly, like coreutils.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return result


if __name__ == "__main__":
    sys.exit(main())
