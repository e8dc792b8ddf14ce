"""Each Cloud Run service's image (services/<name>/Dockerfile) installs exactly what
uv.lock pins for it, with hashes: the generated requirements of the distributions its
code imports and the program that runs it, and nothing else; the library is copied,
not built."""

from __future__ import annotations

import re
import shlex

import pytest

from shared.deployment import system
from shared.deployment.model import Service
from shared.deployment.terraform import (
    GENERATED_DIR,
    service_requirements,
    service_requirements_file,
)
from tests.deployable_requirements import (
    ROOT,
    declared,
    entries,
    import_closure,
    imported_distributions,
    normalized,
    pinned,
    requires,
    unmet_dependencies,
)

SERVICES = pytest.mark.parametrize("service", system.SERVICES, ids=lambda s: s.name)


def _instructions(service: Service) -> list[tuple[str, str]]:
    """The Dockerfile's instructions, (keyword, arguments), continuations joined."""
    text = (ROOT / "services" / service.name / "Dockerfile").read_text("utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = "\n".join(lines).replace("\\\n", " ")
    found = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, arguments = line.strip().partition(" ")
            found.append((keyword.upper(), arguments.strip()))
    return found


def _commands(service: Service) -> list[list[str]]:
    """Each shell command of the RUN instructions, as words."""
    commands = []
    for keyword, arguments in _instructions(service):
        if keyword == "RUN":
            commands += [shlex.split(part) for part in re.split(r"&&|;|\|\|", arguments)]
    return commands


def _runs(service: Service) -> tuple[str, str]:
    """(the program the image runs, the module it loads): from CMD or ENTRYPOINT."""
    (command,) = [arguments for keyword, arguments in _instructions(service)
                  if keyword in {"CMD", "ENTRYPOINT"}]
    program = re.match(r'(?:\[\s*"|exec\s+)?([\w-]+)', command)
    loaded = re.search(r"/app/(\S+)\.py|\s(services\.[\w.]+):\w+", command)
    assert program, command
    assert loaded, command
    module = loaded.group(1).replace("/", ".") if loaded.group(1) else loaded.group(2)
    return program.group(1), module


@SERVICES
def test_each_service_s_generated_requirements_are_what_the_definition_and_lock_make_now(
        service: Service) -> None:
    text = (ROOT / GENERATED_DIR / service_requirements_file(service)).read_text("utf-8")
    assert text == service_requirements(service)


@SERVICES
def test_every_generated_requirement_is_an_exact_pin_with_the_lock_s_hashes(
        service: Service) -> None:
    text = (ROOT / GENERATED_DIR / service_requirements_file(service)).read_text("utf-8")
    pins = pinned(text)
    assert all(str(r.specifier).startswith("==") and not r.marker for r in pins.values()), pins
    assert all("--hash=sha256:" in entry for entry in entries(text))
    # What the service needs is there, within the bounds pyproject.toml gives it.
    for name in service.requirements:
        version = str(pins[normalized(name)].specifier).removeprefix("==")
        assert declared()[normalized(name)].specifier.contains(version), (name, version)
    # And all it needs on the image's Python: pip installs with --no-deps.
    assert unmet_dependencies(text, system.SERVICE_PYTHONS) == []


@SERVICES
def test_each_service_requires_what_its_code_imports_and_the_program_that_runs_it(
        service: Service) -> None:
    program, module = _runs(service)
    imported, uses_zoneinfo = imported_distributions(module)
    required = {normalized(name) for name in service.requirements}
    # tzdata backs zoneinfo where the image has no time zone database.
    expected_implicit = {normalized(program)} | ({"tzdata"} if uses_zoneinfo else set())
    assert required == (imported & declared().keys()) | expected_implicit
    # What it imports without declaring comes with what it requires.
    provided: set[str] = set()
    for name in required:
        requires(name, provided)
    assert imported - declared().keys() <= provided, imported - declared().keys() - provided


@SERVICES
def test_the_module_an_image_runs_and_all_it_reaches_are_copied_into_the_image(
        service: Service) -> None:
    _, module = _runs(service)
    first_party, _ = import_closure(module)
    copied = {arguments.split()[0].rstrip("/") for keyword, arguments in _instructions(service)
              if keyword == "COPY"}
    assert {m.split(".")[0] for m in first_party} <= copied
    # On the path from /app, where they are copied to (the library is not installed).
    assert ("WORKDIR", "/app") in _instructions(service)
    assert any(keyword == "ENV" and re.search(r"(^|\s)PYTHONPATH=/app(\s|$)", arguments)
               for keyword, arguments in _instructions(service))


@SERVICES
def test_each_image_pip_installs_only_its_generated_requirements_with_hashes(
        service: Service) -> None:
    copies = [arguments.split() for keyword, arguments in _instructions(service)
              if keyword == "COPY"]
    generated = f"{GENERATED_DIR}/{service_requirements_file(service)}"
    (destination,) = [dest for source, dest in copies if source == generated]
    installs = [words for words in _commands(service)
                if "install" in words and any(w == "pip" or w.endswith("/pip") for w in words)]
    assert installs == [["pip", "install", "--no-cache-dir", "--require-hashes", "--no-deps",
                         "--only-binary=:all:", "-r", destination]]
    # Nothing builds the project: its pyproject.toml is not even in the image.
    assert not any("pyproject.toml" in words for words in copies)
    assert not any("pip" in words or "setup.py" in words for words in _commands(service)
                   if words not in installs)


@SERVICES
def test_each_image_s_python_is_the_one_its_requirements_are_pinned_for(
        service: Service) -> None:
    (base,) = [arguments for keyword, arguments in _instructions(service) if keyword == "FROM"]
    (python,) = system.SERVICE_PYTHONS
    assert base == f"python:{python}-slim"
