"""terraform/README.md agrees with the code: every module is described, every inline
checkov skip is listed with the same reason, and the least-privilege table is the
definition's grants, row for row.

`python -m tests.unit.test_terraform_docs` prints the least-privilege table to paste
between the README's markers after the definition changes.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.unit.test_terraform_modules import GENERATED, TERRAFORM, module_dirs, tf_files

README = TERRAFORM / "README.md"
BEGIN = "<!-- BEGIN least-privilege: generated from terraform/generated/system.json -->"
END = "<!-- END least-privilege -->"

_SKIP = re.compile(r"#\s*checkov:skip=(CKV2?_[A-Z0-9]+_\d+):(.*)$")
_RESOURCE = re.compile(r'^resource\s+"([\w-]+)"\s+"([\w-]+)"')

_SCOPES = {
    "project": "project",
    "cluster": "project, held to the accelops cluster by an IAM condition",
    "scheduled_clusters": "project, held to each cluster pool_schedule acts on by an IAM condition",
    "config_bucket": "config bucket",
    "models_bucket": "models bucket",
    "releases_bucket": "releases bucket (the models bucket unless one is named)",
    "sax_bucket": "Sax bucket",
    "node_service_account": "node service account (the team config's slices.node_service_account)",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def least_privilege_table(system: dict[str, Any]) -> str:
    """The definition's grants as a Markdown table: one row per account and role."""
    rows = ["| service account | runs | role | on | why |",
            "| --- | --- | --- | --- | --- |"]
    kinds = (("function", system["functions"]), ("service", system["services"]),
             ("workload identity", system["serving"]["workload_identities"]))
    for kind, items in kinds:
        for name, spec in items.items():
            for grant in spec["grants"]:
                role = grant["role"]
                if role in system["custom_roles"]:
                    permissions = ", ".join(system["custom_roles"][role]["permissions"])
                    role_text = f"`{role}` (custom: {permissions})"
                else:
                    role_text = f"`{role}`"
                if grant["scope"] == "topic":
                    on = f"topic `{grant['target']}`"
                elif grant["scope"] == "table":
                    on = f"table `{system['bigquery']['dataset_id']}.{grant['target']}`"
                elif grant["scope"] == "dataset":
                    on = f"dataset `{system['bigquery']['dataset_id']}`"
                else:
                    on = _SCOPES[grant["scope"]]
                rows.append(f"| `{spec['service_account_id']}` | {kind} `{name}` | {role_text} "
                            f"| {on} | {_cell(grant['why'])} |")
    return "\n".join(rows)


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
        "terraform/README.md's least-privilege table is stale; replace it with the output of "
        "`python -m tests.unit.test_terraform_docs`")


def test_the_readme_describes_every_module_and_how_the_inputs_are_made() -> None:
    text = README.read_text("utf-8")
    for module in module_dirs():
        assert f"`modules/{module.name}`" in text, module.name
    assert "accelops deploy generate" in text
    assert "terraform validate" in text


def test_the_readme_lists_no_checkov_skip_that_is_not_a_table_row() -> None:
    ids_in_text = set(re.findall(r"CKV2?_[A-Z0-9]+_\d+", README.read_text("utf-8")))
    assert ids_in_text == {row[0] for row in readme_skips()}


if __name__ == "__main__":
    print(BEGIN)
    print(least_privilege_table(_system()))
    print(END)
