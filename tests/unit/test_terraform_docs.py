"""terraform/README.md agrees with the code: every module is described, every inline
checkov skip is listed with the same reason, and the least-privilege table is the
definition's grants, row for row (`accelops deploy generate` rewrites it)."""

from __future__ import annotations

import json
import re
from typing import Any

from shared.deployment.readme import TERRAFORM_BEGIN as BEGIN
from shared.deployment.readme import TERRAFORM_END as END
from shared.deployment.readme import least_privilege_table
from tests.unit.test_terraform_modules import GENERATED, TERRAFORM, module_dirs, tf_files

README = TERRAFORM / "README.md"
_SKIP = re.compile(r"#\s*checkov:skip=(CKV2?_[A-Z0-9]+_\d+):(.*)$")
_RESOURCE = re.compile(r'^resource\s+"([\w-]+)"\s+"([\w-]+)"')

def inline_skips() -> set[tuple[str, str, str]]:
    """(check id, `module` `type.name`, reason) of every #checkov:skip in the HCL."""
    found = set()
    for path in tf_files():
        current = ""
        for line in path.read_text("utf-8").splitlines():
            resource = _RESOURCE.match(line)
            if resource:
                current = f"{resource[1]}.{resource[2]}"
            skip = _SKIP.search(line.strip())
            if skip:
                where = path.parent.relative_to(TERRAFORM).as_posix()
                found.add((skip[1], f"`{where}` `{current}`", skip[2].strip()))
    return found


def readme_skips() -> set[tuple[str, str, str]]:
    rows = set()
    for line in README.read_text("utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"`CKV2?_[A-Z0-9]+_\d+`", cells[0]):
            rows.add((cells[0].strip("`"), cells[1], cells[2]))
    return rows


def _system() -> dict[str, Any]:
    return json.loads((GENERATED / "system.json").read_text("utf-8"))  # type: ignore[no-any-return]


def test_every_inline_checkov_skip_is_listed_in_the_readme_with_its_reason() -> None:
    inline = inline_skips()
    assert inline, "the HCL has checkov skips; the README lists them"
    listed = readme_skips()
    missing, stale = sorted(inline - listed), sorted(listed - inline)
    assert not missing, f"skips missing from terraform/README.md: {missing}"
    assert not stale, f"README lists skips the HCL no longer has: {stale}"


def test_the_least_privilege_table_is_the_definitions_grants() -> None:
    text = README.read_text("utf-8")
    assert BEGIN in text
    assert END in text
    table = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    expected = least_privilege_table(_system())
    assert table == expected, (
        "terraform/README.md's least-privilege table is stale; run `accelops deploy generate`")


def test_the_readme_describes_every_module_and_how_the_inputs_are_made() -> None:
    text = README.read_text("utf-8")
    for module in module_dirs():
        assert f"`modules/{module.name}`" in text, module.name
    assert "accelops deploy generate" in text
    assert "terraform validate" in text


def test_the_readme_lists_no_checkov_skip_that_is_not_a_table_row() -> None:
    ids_in_text = set(re.findall(r"CKV2?_[A-Z0-9]+_\d+", README.read_text("utf-8")))
    assert ids_in_text == {row[0] for row in readme_skips()}
