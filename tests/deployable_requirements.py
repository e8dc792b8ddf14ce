"""What a deployable (the functions' source archive, each service's image) imports, and
what its generated requirements.txt holds: the facts the tests compare to hold each
list of requirements in shared/deployment/system.py to the code it ships.

Imports are read from the source (every import statement anywhere in a file: the
entry points import lazily), following the first-party packages from an entry module;
each imported module is mapped to the installed distribution that provides it."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
FIRST_PARTY = {"shared", "functions", "sandbox", "services", "tests"}


def module_path(module: str) -> Path | None:
    for path in (ROOT / f"{module.replace('.', '/')}.py",
                 ROOT / module.replace(".", "/") / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports(module: str, path: Path) -> set[str]:
    """Every module a file imports, anywhere in it (the entry points import lazily)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[:len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


@cache
def import_closure(entry: str) -> tuple[frozenset[str], frozenset[str]]:
    """(first-party modules, other modules) reached from the entry module."""
    seen: set[str] = set()
    outside: set[str] = set()
    pending = [entry]
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        path = module_path(module)
        if path is None:
            continue
        for name in _imports(module, path):
            top = name.split(".")[0]
            if top in FIRST_PARTY:
                parts = name.split(".")
                pending += [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
            elif top not in sys.stdlib_module_names:
                outside.add(name)
            elif top == "zoneinfo":
                outside.add(top)
    return frozenset(m for m in seen if module_path(m)), frozenset(outside)


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def _packages() -> Mapping[str, list[str]]:
    return importlib.metadata.packages_distributions()


@cache
def _owners(top: str) -> dict[str, tuple[str, ...]]:
    """The distributions installing top-level package ``top``, with their files."""
    owners = _packages().get(top, [])
    return {owner: tuple(str(f) for f in importlib.metadata.files(owner) or [])
            for owner in owners}


def distribution_of(module: str) -> str:
    """The installed distribution providing ``module`` (namespace packages resolved by
    the files each distribution installs)."""
    parts = module.split(".")
    owners = _owners(parts[0])
    for depth in range(len(parts), 0, -1):
        prefix = "/".join(parts[:depth])
        holders = {owner for owner, files in owners.items()
                   if any(f.startswith((f"{prefix}/", f"{prefix}.py")) for f in files)}
        if len(holders) == 1:
            return normalized(holders.pop())
    raise AssertionError(f"no single distribution provides {module}: {sorted(owners)}")


def imported_distributions(entry: str) -> tuple[frozenset[str], bool]:
    """(the distributions the modules reached from ``entry`` import, whether they use
    zoneinfo: tzdata backs it where the image has no time zone database)."""
    _, outside = import_closure(entry)
    # `from google.cloud import bigquery` names google.cloud (a namespace many
    # distributions share) and google.cloud.bigquery: the deepest name decides.
    deepest = {m for m in outside if not any(o.startswith(f"{m}.") for o in outside)}
    return (frozenset(distribution_of(m) for m in deepest if m != "zoneinfo"),
            "zoneinfo" in outside)


def requires(distribution: str, seen: set[str]) -> set[str]:
    """``distribution`` and everything it requires, transitively (no extras)."""
    if distribution in seen:
        return seen
    seen.add(distribution)
    for spec in importlib.metadata.requires(distribution) or []:
        requirement = Requirement(spec)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            requires(normalized(requirement.name), seen)
    return seen


@cache
def declared(*, extras: bool = True) -> dict[str, Requirement]:
    """The distributions pyproject.toml declares in [project].dependencies and (with
    ``extras``) in any extra (``uv lock`` resolves them all), by normalized name (the
    project's own extras, ``accelops[...]``, left out)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    specs = list(project["dependencies"])
    if extras:
        specs += [spec for extra in project.get("optional-dependencies", {}).values()
                  for spec in extra]
    requirements = [Requirement(spec) for spec in specs]
    return {normalized(r.name): r for r in requirements
            if normalized(r.name) != normalized(project["name"])}


def entries(text: str) -> list[str]:
    """The requirement lines of a requirements.txt, continuations joined."""
    return [line for line in text.replace("\\\n", " ").splitlines()
            if line and not line.startswith("#")]


def pinned(text: str) -> dict[str, Requirement]:
    """The requirements of a requirements.txt by normalized name (hashes dropped)."""
    requirements = [Requirement(line.split(" --hash")[0]) for line in entries(text)]
    return {normalized(r.name): r for r in requirements}


def unmet_dependencies(text: str, pythons: tuple[str, ...]) -> list[tuple[str, str]]:
    """(pinned distribution, dependency) pairs where uv.lock says the pinned version
    needs a distribution on one of the Pythons (Linux x86_64) that the file does not
    pin, or where the pin is not the version the lock holds (as (name, "version"))."""
    pins = pinned(text)
    lock = tomllib.loads((ROOT / "uv.lock").read_text("utf-8"))
    by_name = {normalized(p["name"]): p for p in lock["package"]}
    unmet = []
    for name, requirement in pins.items():
        package = by_name[name]
        if not requirement.specifier.contains(package["version"]):
            unmet.append((name, "version"))
        for dependency in package.get("dependencies", []):
            marker = dependency.get("marker")
            needed = marker is None or any(
                Requirement(f"x ; {marker}").marker.evaluate(  # type: ignore[union-attr]
                    {"python_version": v, "python_full_version": f"{v}.0",
                     "sys_platform": "linux", "platform_system": "Linux",
                     "platform_machine": "x86_64", "extra": ""})
                for v in pythons)
            if needed and normalized(dependency["name"]) not in pins:
                unmet.append((name, dependency["name"]))
    return unmet
