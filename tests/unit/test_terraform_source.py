"""The functions' source archive is built from the repository (modules/function_source):
main.py from functions/main.py, the shared/ package, and a requirements.txt of exactly the
distributions the functions import and what they need, pinned as uv.lock pins them,
uploaded under its content hash."""

from __future__ import annotations

from pathlib import Path

from shared.deployment import system
from shared.deployment.terraform import REQUIREMENTS_FILE, function_requirements
from tests.deployable_requirements import (
    declared,
    entries,
    import_closure,
    imported_distributions,
    normalized,
    pinned,
    requires,
    unmet_dependencies,
)
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
ENTRY = "functions.main"


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
    first_party, _ = import_closure(ENTRY)
    outside_archive = sorted(m for m in first_party
                             if m != ENTRY and m.split(".")[0] != "shared"
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
    imported, uses_zoneinfo = imported_distributions(ENTRY)
    required = {normalized(name) for name in system.FUNCTION_REQUIREMENTS}
    # The functions run the library alone: they import only what it depends on, no extra.
    library = declared(extras=False).keys()
    # tzdata backs zoneinfo where the image has no time zone database.
    expected_implicit = {"tzdata"} if uses_zoneinfo else set()
    assert required == (imported & library) | expected_implicit
    # What they import without declaring comes with what they require.
    provided: set[str] = set()
    for name in required:
        requires(name, provided)
    assert imported - library <= provided, imported - library - provided


def test_the_generated_requirements_pin_what_the_functions_import_with_the_lock_s_hashes(
) -> None:
    text = (GENERATED / REQUIREMENTS_FILE).read_text("utf-8")
    assert text == function_requirements()
    pins = pinned(text)
    # Every requirement an exact pin, every one hashed: pip installs in hash-checking mode.
    assert all(str(r.specifier).startswith("==") for r in pins.values()), pins
    assert all("--hash=sha256:" in entry for entry in entries(text))
    # What the functions import is there, within the bounds pyproject.toml gives it.
    for name in system.FUNCTION_REQUIREMENTS:
        version = str(pins[normalized(name)].specifier).removeprefix("==")
        assert declared(extras=False)[normalized(name)].specifier.contains(version), \
            (name, version)


def test_the_generated_requirements_hold_everything_the_pinned_distributions_need() -> None:
    text = (GENERATED / REQUIREMENTS_FILE).read_text("utf-8")
    assert unmet_dependencies(text, system.FUNCTION_PYTHONS) == []
