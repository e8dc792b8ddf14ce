"""The project's lock (``uv.lock``, written by ``make lock``) read as data: which
version of each distribution the whole tree pins, what each one needs, and the
hashes of its files.

``pins`` answers the question a deployable requirements file asks: these
distributions and everything they need on one target (Python version, platform),
at the versions the lock pins, each with the hashes of the files that may install
it. Pure: takes the lock's text, returns values; reading the file is the caller's.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from typing import Any

from packaging.markers import Marker
from packaging.utils import canonicalize_name, parse_wheel_filename

__all__ = ["Pin", "Target", "pins", "requirements_text"]


@dataclass(frozen=True)
class Target:
    """Where the requirements install: the marker environment of PEP 508."""

    python_full_version: str = "3.11.0"
    sys_platform: str = "linux"
    platform_machine: str = "x86_64"

    @property
    def python_version(self) -> str:
        return ".".join(self.python_full_version.split(".")[:2])

    def environment(self, extra: str = "") -> dict[str, str]:
        major_minor = self.python_version
        # Every key set: a marker never falls back to the interpreter running this.
        return {
            "python_version": major_minor,
            "python_full_version": self.python_full_version,
            "sys_platform": self.sys_platform,
            "platform_system": "Linux" if self.sys_platform == "linux" else self.sys_platform,
            "platform_machine": self.platform_machine,
            "platform_release": "",
            "platform_version": "",
            "os_name": "posix",
            "implementation_name": "cpython",
            "implementation_version": self.python_full_version,
            "platform_python_implementation": "CPython",
            "extra": extra,
        }


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    hashes: tuple[str, ...]


def _installs_on(wheel: str, target: Target) -> bool:
    """Whether a wheel's tags fit the target (glibc Linux on its machine, CPython of
    its version): only those files' hashes are written, not every platform's."""
    major, minor = (int(part) for part in target.python_version.split("."))
    _, _, _, tags = parse_wheel_filename(wheel.rsplit("/", 1)[-1])
    for tag in tags:
        platform_fits = tag.platform == "any" or (
            tag.platform.endswith(target.platform_machine)
            and (tag.platform.startswith("manylinux") or tag.platform.startswith("linux")))
        if tag.interpreter.startswith("py"):
            python_fits = tag.interpreter in {"py3", f"py{major}", f"py{major}{minor}"}
        elif tag.abi == "abi3":
            python_fits = (tag.interpreter.startswith(f"cp{major}")
                           and int(tag.interpreter[3:] or 0) <= minor)
        else:
            python_fits = tag.interpreter == f"cp{major}{minor}"
        if platform_fits and python_fits:
            return True
    return False


def _applies(marker: str | None, target: Target, extra: str = "") -> bool:
    return marker is None or Marker(marker).evaluate(target.environment(extra))


def _package(packages: dict[str, list[dict[str, Any]]], name: str, target: Target,
             version: str | None = None) -> dict[str, Any]:
    """The one locked package of that name on the target (a forked lock may hold
    several versions, each for its own resolution markers)."""
    candidates = [p for p in packages.get(name, [])
                  if (version is None or p["version"] == version)
                  and (not p.get("resolution-markers")
                       or any(_applies(m, target) for m in p["resolution-markers"]))]
    if len(candidates) != 1:
        raise ValueError(f"uv.lock holds {len(candidates)} versions of {name!r} for "
                         f"{target}; expected one (run `make lock`)")
    return candidates[0]


def pins(lock_text: str, roots: tuple[str, ...], target: Target) -> list[Pin]:
    """The roots and their dependencies on the target, as the lock pins them,
    sorted by name. Raises ValueError naming a root the lock does not hold."""
    lock = tomllib.loads(lock_text)
    packages: dict[str, list[dict[str, Any]]] = {}
    for package in lock.get("package", []):
        packages.setdefault(canonicalize_name(package["name"]), []).append(package)
    missing = [r for r in roots if canonicalize_name(r) not in packages]
    if missing:
        raise ValueError(f"uv.lock holds no {missing} (run `make lock`)")
    found: dict[str, Pin] = {}
    # (name, version or None, extras) still to visit.
    todo: list[tuple[str, str | None, tuple[str, ...]]] = [
        (canonicalize_name(r), None, ()) for r in roots]
    seen: set[tuple[str, str | None, tuple[str, ...]]] = set()
    while todo:
        item = todo.pop()
        if item in seen:
            continue
        seen.add(item)
        name, version, extras = item
        package = _package(packages, name, target, version)
        artifacts = [package["sdist"]] if "sdist" in package else []
        artifacts += [wheel for wheel in package.get("wheels", [])
                      if _installs_on(wheel["url"], target)]
        found[name] = Pin(name, package["version"],
                          tuple(sorted(a["hash"] for a in artifacts if "hash" in a)))
        needs = list(package.get("dependencies", []))
        for extra in extras:
            needs += package.get("optional-dependencies", {}).get(extra, [])
        for dependency in needs:
            if _applies(dependency.get("marker"), target):
                todo.append((canonicalize_name(dependency["name"]), dependency.get("version"),
                             tuple(sorted(dependency.get("extra", [])))))
    return sorted(found.values(), key=lambda pin: pin.name)


def requirements_text(lock_text: str, roots: tuple[str, ...],
                      targets: tuple[Target, ...]) -> str:
    """requirements.txt lines for the roots on every target: ``name==version`` with
    every hash, which puts pip in hash-checking mode (each file it installs must be
    one the lock recorded). A distribution only some targets need carries a
    ``python_version`` marker naming those."""
    needed_on: dict[tuple[str, str], list[Target]] = {}
    hashes: dict[tuple[str, str], set[str]] = {}
    for target in targets:
        for pin in pins(lock_text, roots, target):
            needed_on.setdefault((pin.name, pin.version), []).append(target)
            hashes.setdefault((pin.name, pin.version), set()).update(pin.hashes)
    lines = []
    for key in sorted(needed_on):
        marker = ""
        if len(needed_on[key]) != len(targets):
            marker = " ; " + " or ".join(
                f"python_version == '{t.python_version}'" for t in needed_on[key])
        listed = "".join(f" \\\n    --hash={h}" for h in sorted(hashes[key]))
        lines.append(f"{key[0]}=={key[1]}{marker}{listed}\n")
    return "".join(lines)
