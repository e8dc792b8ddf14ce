"""The functions' source archive is built from the repository (modules/function_source):
main.py from functions/main.py, the shared/ package, and a requirements.txt of exactly the
distributions the functions import and what they need, pinned as uv.lock pins them,
uploaded under its content hash."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from functools import cache
from pathlib import Path

from packaging.requirements import Requirement

from shared.deployment import system
from shared.deployment.terraform import REQUIREMENTS_FILE, function_requirements
from tests.unit.test_terraform_definition import example_module
from tests.unit.test_terraform_modules import (
    EXAMPLE,
    GENERATED,
    MODULES,
    ROOT,
    blocks,
    data_sources,
    evaluate,
    load_dir,
    resources,
)

SOURCE = MODULES / "function_source"
FIRST_PARTY = {"shared", "functions", "sandbox", "services", "tests"}


def _module_path(module: str) -> Path | None:
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
def import_closure() -> tuple[frozenset[str], frozenset[str]]:
    """(first-party modules, other modules) reached from functions/main.py."""
    seen: set[str] = set()
    outside: set[str] = set()
    pending = ["functions.main"]
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        path = _module_path(module)
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
    return frozenset(m for m in seen if _module_path(m)), frozenset(outside)


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def _packages() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


@cache
def _owners(top: str) -> dict[str, tuple[str, ...]]:
    """The distributions installing top-level package ``top``, with their files."""
    owners = _packages().get(top, [])
    return {owner: tuple(str(f) for f in importlib.metadata.files(owner) or [])
            for owner in owners}


def _distribution_of(module: str) -> str:
    """The installed distribution providing ``module`` (namespace packages resolved by
    the files each distribution installs)."""
    parts = module.split(".")
    owners = _owners(parts[0])
    for depth in range(len(parts), 0, -1):
        prefix = "/".join(parts[:depth])
        holders = {owner for owner, files in owners.items()
                   if any(f.startswith((f"{prefix}/", f"{prefix}.py")) for f in files)}
        if len(holders) == 1:
            return _normalized(holders.pop())
    raise AssertionError(f"no single distribution provides {module}: {sorted(owners)}")


def _requires(distribution: str, seen: set[str]) -> set[str]:
    """``distribution`` and everything it requires, transitively (no extras)."""
    if distribution in seen:
        return seen
    seen.add(distribution)
    for spec in importlib.metadata.requires(distribution) or []:
        requirement = Requirement(spec)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            _requires(_normalized(requirement.name), seen)
    return seen


def test_the_archive_holds_main_py_the_shared_package_and_the_generated_requirements() -> None:
    archive = data_sources(SOURCE)["archive_file.source"]
    assert archive["type"] == "zip"
    static = {s["filename"]: s["content"] for s in archive["source"]}
    assert static == {"main.py": '${file("${var.repository_root}/${var.entry_module}")}',
                      "requirements.txt": "${file(var.requirements_file)}"}
    variables = blocks(SOURCE, "variable")
    assert variables["entry_module"]["default"] == "functions/main.py"
    assert variables["package"]["default"] == "shared"
    package = archive["dynamic"][0]["source"]
    assert package["for_each"] == "${local.package_files}"
    assert package["content"][0] == {"filename": "${source.value}",
                                     "content": '${file("${var.repository_root}/${source.value}")}'}
    call = example_module("function_source")
    assert call["repository_root"] == "${local.repository_root}"
    (local_block, *_) = load_dir(EXAMPLE)["locals"]
    assert (EXAMPLE / local_block["repository_root"].replace("${path.module}/", "")).resolve() \
        == ROOT
    assert call["requirements_file"] == f"${{local.generated_dir}}/{REQUIREMENTS_FILE}"


def test_every_source_file_of_the_package_and_nothing_else_goes_in(tmp_path: Path) -> None:
    (local_block,) = load_dir(SOURCE)["locals"]
    expression = local_block["package_files"].replace("var.repository_root", "local.root") \
        .replace("var.package", "local.package")
    files = evaluate(tmp_path, expression, root=str(ROOT), package="shared")
    on_disk = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "shared").rglob("*")
                     if p.is_file() and (p.suffix == ".py" or p.name == "py.typed")
                     and "__pycache__" not in p.parts)
    assert files == on_disk
    assert "shared/py.typed" in files


def test_every_module_the_entry_points_reach_is_in_the_archive() -> None:
    first_party, _ = import_closure()
    outside_archive = sorted(m for m in first_party
                             if m != "functions.main" and m.split(".")[0] != "shared"
                             and m != "functions")
    assert not outside_archive, f"imported by the functions but not archived: {outside_archive}"


def test_the_object_is_named_by_the_archives_hash_so_only_a_new_source_redeploys() -> None:
    upload = resources(SOURCE)["google_storage_bucket_object.source"]
    assert upload["name"] == "${var.object_prefix}${data.archive_file.source.output_sha256}.zip"
    assert upload["source"] == "${data.archive_file.source.output_path}"
    assert upload["lifecycle"][0]["create_before_destroy"] is True
    assert example_module("functions")["source_object"] == "${module.function_source.object}"
    assert "function_source_object" not in blocks(EXAMPLE, "variable"), \
        "the archive is built from the repository, not named by hand"
    # Read at plan: a module-level depends_on would defer the archive to apply and
    # make every function's source unknown at plan.
    assert "depends_on" not in example_module("function_source")


def test_the_requirements_are_exactly_the_distributions_the_functions_import() -> None:
    _, outside = import_closure()
    # `from google.cloud import bigquery` names google.cloud (a namespace many
    # distributions share) and google.cloud.bigquery: the deepest name decides.
    deepest = {m for m in outside if not any(o.startswith(f"{m}.") for o in outside)}
    imported = {_distribution_of(m) for m in deepest if m != "zoneinfo"}
    required = {_normalized(name) for name in system.FUNCTION_REQUIREMENTS}
    # tzdata backs zoneinfo where the image has no time zone database.
    expected_implicit = {"tzdata"} if "zoneinfo" in outside else set()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    declared = {_normalized(Requirement(spec).name) for spec in project["dependencies"]}
    assert required == (imported & declared) | expected_implicit
    # What they import without declaring comes with what they require.
    provided: set[str] = set()
    for name in required:
        _requires(name, provided)
    assert imported - declared <= provided, imported - declared - provided


def _pinned(text: str) -> dict[str, Requirement]:
    """The requirement lines of a requirements.txt (continuations joined, hashes kept)."""
    joined = text.replace("\\\n", " ")
    lines = [line for line in joined.splitlines() if line and not line.startswith("#")]
    return {_normalized(Requirement(line.split(" --hash")[0]).name):
            Requirement(line.split(" --hash")[0]) for line in lines}


def test_the_generated_requirements_pin_what_the_functions_import_with_the_lock_s_hashes(
) -> None:
    text = (GENERATED / REQUIREMENTS_FILE).read_text("utf-8")
    assert text == function_requirements()
    pinned = _pinned(text)
    # Every requirement an exact pin, every one hashed: pip installs in hash-checking mode.
    assert all(str(r.specifier).startswith("==") for r in pinned.values()), pinned
    entries = text.replace("\\\n", " ").splitlines()[3:]
    assert all("--hash=sha256:" in entry for entry in entries)
    # What the functions import is there, within the bounds pyproject.toml gives it.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    bounds = {_normalized(Requirement(spec).name): Requirement(spec).specifier
              for spec in project["dependencies"]}
    for name in system.FUNCTION_REQUIREMENTS:
        version = str(pinned[_normalized(name)].specifier).removeprefix("==")
        assert bounds[_normalized(name)].contains(version), (name, version)


def test_the_generated_requirements_hold_everything_the_pinned_distributions_need() -> None:
    pinned = _pinned((GENERATED / REQUIREMENTS_FILE).read_text("utf-8"))
    lock = tomllib.loads((ROOT / "uv.lock").read_text("utf-8"))
    by_name = {_normalized(p["name"]): p for p in lock["package"]}
    for name, requirement in pinned.items():
        package = by_name[name]
        assert requirement.specifier.contains(package["version"]), name
        for dependency in package.get("dependencies", []):
            marker = dependency.get("marker")
            needed = marker is None or any(
                Requirement(f"x ; {marker}").marker.evaluate(  # type: ignore[union-attr]
                    {"python_version": v, "python_full_version": f"{v}.0",
                     "sys_platform": "linux", "platform_system": "Linux",
                     "platform_machine": "x86_64", "extra": ""})
                for v in system.FUNCTION_PYTHONS)
            if needed:
                assert _normalized(dependency["name"]) in pinned, (name, dependency)
