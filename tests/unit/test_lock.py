"""The locks every install reads (uv.lock for the project, requirements/*.txt for uv
itself and for checkov) agree with what they were made from and were not changed by
hand since `make lock` wrote them. Offline: reads only the repository's files."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import (
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
LOCK_TEXT = (ROOT / "uv.lock").read_text("utf-8")
LOCK = tomllib.loads(LOCK_TEXT)
PIP_LOCKS = {"uv": ROOT / "requirements" / "uv.txt",
             "checkov": ROOT / "requirements" / "checkov.txt"}


def _key(requirement: Requirement, extra: str | None) -> tuple[Any, ...]:
    marker = f"extra == '{extra}'" if extra else None
    assert requirement.marker is None, "pyproject's requirements carry no markers of their own"
    return (canonicalize_name(requirement.name), tuple(sorted(requirement.extras)),
            requirement.specifier, marker)


def _declared() -> set[tuple[Any, ...]]:
    project = PYPROJECT["project"]
    keys = {_key(Requirement(spec), None) for spec in project["dependencies"]}
    for extra, specs in project["optional-dependencies"].items():
        keys |= {_key(Requirement(spec), extra) for spec in specs}
    return keys


def _locked_project() -> dict[str, Any]:
    (project,) = [p for p in LOCK["package"] if p["name"] == PYPROJECT["project"]["name"]]
    found: dict[str, Any] = project
    return found


def test_the_lock_was_made_from_pyproject_s_dependencies_and_extras() -> None:
    metadata = _locked_project()["metadata"]
    locked = {(canonicalize_name(r["name"]), tuple(sorted(r.get("extras", []))),
               SpecifierSet(r.get("specifier", "")), r.get("marker"))
              for r in metadata["requires-dist"]}
    assert locked == _declared(), "pyproject.toml changed since the lock: run `make lock`"
    assert metadata["provides-extras"] == list(PYPROJECT["project"]["optional-dependencies"])
    assert LOCK["requires-python"] == PYPROJECT["project"]["requires-python"]
    assert LOCK["supported-markers"] == PYPROJECT["tool"]["uv"]["environments"]
    build = {(canonicalize_name(c["name"]), SpecifierSet(c["specifier"]))
             for c in LOCK["manifest"]["build-constraints"]}
    assert build == {(canonicalize_name(r.name), r.specifier) for r in map(
        Requirement, PYPROJECT["tool"]["uv"]["build-constraint-dependencies"])}


def test_every_direct_dependency_is_locked_within_its_bounds() -> None:
    versions = {canonicalize_name(p["name"]): p["version"] for p in LOCK["package"]}
    for name, _, specifier, _ in _declared():
        if name == canonicalize_name(PYPROJECT["project"]["name"]):
            continue
        assert specifier.contains(versions[name], prereleases=True), (name, versions[name])


def test_every_locked_file_is_hashed_named_for_its_version_and_fetched_from_pypi() -> None:
    for package in LOCK["package"]:
        if package["source"].get("editable") == ".":
            continue
        assert package["source"] == {"registry": "https://pypi.org/simple"}, package["name"]
        files = ([package["sdist"]] if "sdist" in package else []) + package.get("wheels", [])
        assert files, package["name"]
        for file in files:
            # The registry's file host, never a local mirror or a path on this machine.
            assert file["url"].startswith("https://files.pythonhosted.org/"), file["url"]
            assert file["hash"].startswith("sha256:")
            assert len(file["hash"]) == len("sha256:") + 64
            filename = file["url"].rsplit("/", 1)[-1]
            if filename.endswith(".whl"):
                name, version, _, _ = parse_wheel_filename(filename)
            else:
                name, version = parse_sdist_filename(filename)
            # A version edited by hand no longer matches the files it names.
            assert (name, version) == (canonicalize_name(package["name"]),
                                       Version(package["version"])), filename


def _pip_lock(path: Path) -> dict[str, tuple[str, list[str]]]:
    """name → (version, hashes) of a `uv pip compile --generate-hashes` file."""
    entries: dict[str, tuple[str, list[str]]] = {}
    for entry in path.read_text("utf-8").replace("\\\n", " ").splitlines():
        if not entry.strip() or entry.lstrip().startswith("#"):
            continue
        requirement_text, *hashes = entry.split(" --hash=")
        requirement = Requirement(requirement_text.strip())
        (pin,) = requirement.specifier
        assert pin.operator == "==", entry
        entries[canonicalize_name(requirement.name)] = (pin.version,
                                                        [h.strip() for h in hashes])
    return entries


@pytest.mark.parametrize("tool", sorted(PIP_LOCKS))
def test_the_tool_locks_pin_every_distribution_with_hashes_within_their_inputs(
        tool: str) -> None:
    entries = _pip_lock(PIP_LOCKS[tool])
    assert entries
    assert all(hashes and all(h.startswith("sha256:") and len(h) == 71 for h in hashes)
               for _, hashes in entries.values())
    source = PIP_LOCKS[tool].with_suffix(".in").read_text("utf-8")
    for line in source.splitlines():
        if line.strip() and not line.startswith("#"):
            wanted = Requirement(line)
            version, _ = entries[canonicalize_name(wanted.name)]
            assert wanted.specifier.contains(version), (wanted, version)


def test_no_lock_changed_since_make_lock_wrote_it() -> None:
    # make lock records each lock's digest: an edited pin or hash (which nothing else
    # can check offline) fails here, until `make lock` writes the lock again.
    recorded = {}
    for line in (ROOT / "locks.sha256").read_text("utf-8").splitlines():
        digest, name = line.split(maxsplit=1)
        recorded[name] = digest
    assert set(recorded) == {"uv.lock", "requirements/uv.txt", "requirements/checkov.txt"}
    changed = [name for name, digest in recorded.items()
               if hashlib.sha256((ROOT / name).read_bytes()).hexdigest() != digest]
    assert not changed, f"{changed} changed since `make lock` wrote them: run `make lock`"
