"""shared.deployment.lock: a deployable requirements file from the lock, for one set
of distributions on the functions' targets; and shared.deployment.terraform's
pinned_requirements, which writes one for distributions the project declares."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.deployment.lock import Target, pins, requirements_text
from shared.deployment.terraform import pinned_requirements

_H = "sha256:" + "0" * 63


def _hash(n: int) -> str:
    return f"{_H}{n}"


LOCK = f'''
version = 1
requires-python = ">=3.11"

[[package]]
name = "App-Lib"
version = "1.0"
source = {{ registry = "https://pypi.org/simple" }}
dependencies = [
    {{ name = "needed" }},
    {{ name = "old-python-only", marker = "python_full_version < '3.12'" }},
    {{ name = "windows-only", marker = "sys_platform == 'win32'" }},
    {{ name = "with-extra", extra = ["fast"] }},
]
sdist = {{ url = "https://files.pythonhosted.org/p/app_lib-1.0.tar.gz", hash = "{_hash(1)}" }}
wheels = [
    {{ url = "https://f/app_lib-1.0-py3-none-any.whl", hash = "{_hash(2)}" }},
]

[[package]]
name = "needed"
version = "2.0"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [
    {{ url = "https://f/needed-2.0-cp311-cp311-manylinux_2_17_x86_64.whl", hash = "{_hash(3)}" }},
    {{ url = "https://f/needed-2.0-cp312-cp312-manylinux_2_17_x86_64.whl", hash = "{_hash(4)}" }},
    {{ url = "https://f/needed-2.0-cp311-cp311-win_amd64.whl", hash = "{_hash(5)}" }},
    {{ url = "https://f/needed-2.0-cp311-cp311-macosx_11_0_arm64.whl", hash = "{_hash(6)}" }},
    {{ url = "https://f/needed-2.0-cp311-cp311-musllinux_1_2_x86_64.whl", hash = "{_hash(7)}" }},
]

[[package]]
name = "old-python-only"
version = "3.0"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [{{ url = "https://f/old_python_only-3.0-py3-none-any.whl", hash = "{_hash(8)}" }}]

[[package]]
name = "windows-only"
version = "4.0"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [{{ url = "https://f/windows_only-4.0-py3-none-any.whl", hash = "{_hash(9)}" }}]

[[package]]
name = "with-extra"
version = "5.0"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [
    {{ url = "https://f/with_extra-5.0-cp38-abi3-manylinux1_x86_64.whl", hash = "{_hash(10)}" }},
]

[package.optional-dependencies]
fast = [{{ name = "speedup" }}]

[[package]]
name = "speedup"
version = "6.0"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [{{ url = "https://f/speedup-6.0-py3-none-any.whl", hash = "{_hash(11)}" }}]

[[package]]
name = "unrelated"
version = "7.0"
source = {{ registry = "https://pypi.org/simple" }}
'''

PY311 = Target(python_full_version="3.11.0")
PY312 = Target(python_full_version="3.12.0")


def test_pins_follow_dependencies_their_markers_and_extras_on_the_target() -> None:
    assert [(p.name, p.version) for p in pins(LOCK, ("app-lib",), PY311)] == [
        ("app-lib", "1.0"), ("needed", "2.0"), ("old-python-only", "3.0"),
        ("speedup", "6.0"), ("with-extra", "5.0")]
    assert "old-python-only" not in {p.name for p in pins(LOCK, ("app-lib",), PY312)}


def test_only_the_hashes_of_files_that_install_on_the_target_are_kept() -> None:
    needed = {p.name: p for p in pins(LOCK, ("app-lib",), PY311)}["needed"]
    assert needed.hashes == (_hash(3),)
    app = {p.name: p for p in pins(LOCK, ("app-lib",), PY312)}["app-lib"]
    assert app.hashes == (_hash(1), _hash(2))
    # abi3 built for 3.8 installs on later CPythons.
    extra = {p.name: p for p in pins(LOCK, ("app-lib",), PY312)}["with-extra"]
    assert extra.hashes == (_hash(10),)


def test_a_distribution_only_some_targets_need_says_which_in_a_marker() -> None:
    text = requirements_text(LOCK, ("app-lib",), (PY311, PY312))
    assert "old-python-only==3.0 ; python_version == '3.11' \\\n" in text
    assert "needed==2.0 \\\n" in text
    # The hashes of both targets' files.
    assert f"--hash={_hash(3)}" in text
    assert f"--hash={_hash(4)}" in text
    assert "windows-only" not in text
    assert "unrelated" not in text


def test_a_root_the_lock_does_not_hold_is_refused() -> None:
    with pytest.raises(ValueError, match=r"uv\.lock holds no \['missing'\]"):
        pins(LOCK, ("missing",), PY311)


PYPROJECT = """
[project]
name = "app"
dependencies = ["app-lib>=1,<2"]

[project.optional-dependencies]
tools = ["speedup>=6", "needed>=2 ; python_version >= '3.12'"]
"""


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "uv.lock").write_text(LOCK)
    return tmp_path / "pyproject.toml", tmp_path / "uv.lock"


def test_a_distribution_declared_only_in_an_extra_may_be_required(
        project: tuple[Path, Path]) -> None:
    text = pinned_requirements(("speedup",), ("3.11",), "TOOLS: what the tool imports",
                               *project)
    assert text.splitlines()[1] == "# (TOOLS: what the tool imports) and uv.lock (`make lock`):"
    assert f"speedup==6.0 \\\n    --hash={_hash(11)}\n" in text


def test_a_distribution_the_project_does_not_declare_is_refused_though_the_lock_holds_it(
        project: tuple[Path, Path]) -> None:
    # Locked only as a dependency of another: the lock pins it, pyproject.toml bounds nothing.
    with pytest.raises(ValueError, match=r"TOOLS names \['with-extra'\]"):
        pinned_requirements(("app-lib", "with-extra"), ("3.11",), "TOOLS", *project)


def test_a_distribution_declared_for_other_pythons_only_is_refused_on_the_rest(
        project: tuple[Path, Path]) -> None:
    assert "needed==2.0" in pinned_requirements(("needed",), ("3.12",), "TOOLS", *project)
    with pytest.raises(ValueError, match=r"TOOLS names \['needed'\]"):
        pinned_requirements(("needed",), ("3.11", "3.12"), "TOOLS", *project)
