"""The documentation's generated reference pages are the ones the code renders now
(configuration, command line, job request schema, jobs API, error classes, import
contracts), the site's navigation lists every page under docs/, and the README and
CONTRIBUTING.md link to pages that exist."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from docs import gen

REPO = Path(__file__).resolve().parents[2]


def test_every_generated_page_is_current():
    stale = gen.stale_pages()
    assert not stale, (f"stale generated docs pages: {stale}; refresh them with "
                       f"{gen.REFRESH} and commit the result")


def test_the_generated_pages_describe_what_they_are_generated_from():
    pages = gen.generated_pages()
    assert "| `grace_period_seconds` | `int` | `120` |" in pages["reference/configuration.md"]
    assert "`ACCELOPS_CONFIG`" in pages["reference/configuration.md"]
    assert "## accelops jobs submit" in pages["reference/cli.md"]
    assert "## accelops sandbox" in pages["reference/cli.md"]
    assert '"title": "JobRequest"' in pages["reference/job-request.md"]
    assert '"openapi": "3.1.0"' in pages["reference/jobs-api.md"]
    assert "| `DeploymentError` | `TransientError` | retried" in pages["architecture/errors.md"]
    assert "Type: `layers`." in pages["architecture/contracts.md"]


def test_the_site_navigation_names_every_page():
    def paths(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, list):
            return [p for item in node for p in paths(item)]
        if isinstance(node, dict):
            return [p for value in node.values() for p in paths(value)]
        return []

    config = yaml.safe_load((REPO / "mkdocs.yml").read_text("utf-8"))
    listed = set(paths(config["nav"]))
    pages = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")}
    assert listed == pages


def test_the_readme_and_contributing_links_reach_files_in_the_repository():
    for name in ("README.md", "CONTRIBUTING.md"):
        text = (REPO / name).read_text("utf-8")
        targets = {t for t in re.findall(r"\]\(([^)#]+)", text) if "://" not in t}
        missing = sorted(t for t in targets if not (REPO / t).exists())
        assert targets, name
        assert not missing, f"{name} links to missing files: {missing}"


def test_the_docs_build_fails_on_a_warning_and_hides_none() -> None:
    # mkdocs' --quiet drops warnings before --strict counts them: with it, a build with
    # broken links passes.
    recipe = [line for line in (REPO / "Makefile").read_text("utf-8").splitlines()
              if "mkdocs build" in line]
    assert recipe
    assert all("--strict" in line and "--quiet" not in line for line in recipe)
