"""BigQuery views are created in an order real BigQuery accepts: a view only after the
views it reads. modules/bigquery_view_order computes the levels; it needs no provider,
so these tests run it with the real terraform binary (offline)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_terraform_modules import (
    GENERATED,
    MODULES,
    resources,
    terraform_bin,
    terraform_env,
)

ORDER_MODULE = MODULES / "bigquery_view_order"
STAGES = 4  # view_level_0 .. view_level_3 in modules/bigquery


def plan_levels(tmp_path: Path, views: list[dict[str, str]]) -> subprocess.CompletedProcess[str]:
    """`terraform plan` a root module that calls bigquery_view_order with `views`."""
    binary = terraform_bin()
    source = os.path.relpath(ORDER_MODULE, tmp_path)
    (tmp_path / "views.json").write_text(json.dumps(views), "utf-8")
    (tmp_path / "main.tf").write_text(
        'module "order" {\n'
        f'  source = "{source}"\n'
        '  views  = jsondecode(file("${path.module}/views.json"))\n'
        "}\n"
        'output "levels" {\n'
        "  value = module.order.levels\n"
        "}\n", "utf-8")
    env = {**terraform_env(), "TF_IN_AUTOMATION": "1"}
    init = subprocess.run([binary, "init", "-input=false", "-no-color", "-backend=false"],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert init.returncode == 0, init.stderr
    return subprocess.run([binary, "apply", "-auto-approve", "-input=false", "-no-color"],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120,
                          check=False)


def levels_of(tmp_path: Path, views: list[dict[str, str]]) -> dict[str, int]:
    result = plan_levels(tmp_path, views)
    assert result.returncode == 0, result.stdout + result.stderr
    out = subprocess.run([terraform_bin(), "output", "-json", "levels"], cwd=tmp_path,
                         capture_output=True, text=True, env=terraform_env(), timeout=60,
                         check=True)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def generated_views() -> list[dict[str, str]]:
    system: dict[str, Any] = json.loads((GENERATED / "system.json").read_text("utf-8"))
    return [{"name": v["name"], "query": (GENERATED / v["query_file"]).read_text("utf-8")}
            for v in system["bigquery"]["views"]]


def reads(query: str, names: list[str]) -> set[str]:
    """The views a query reads: `project.dataset.NAME` references (independent of the HCL)."""
    return {m for m in re.findall(r"`[^`]*\.(\w+)`", query) if m in names}


def test_every_generated_view_is_created_after_the_views_it_reads(tmp_path: Path) -> None:
    views = generated_views()
    levels = levels_of(tmp_path, views)
    names = [v["name"] for v in views]
    assert set(levels) == set(names)
    for view in views:
        for source in reads(view["query"], names):
            assert levels[view["name"]] > levels[source], (view["name"], source, levels)
        if not reads(view["query"], names):
            assert levels[view["name"]] == 0, "a view reading only tables goes right after them"
    assert max(levels.values()) < STAGES


def test_a_view_that_reads_a_similarly_named_view_is_not_confused(tmp_path: Path) -> None:
    views = [{"name": "t", "query": "SELECT * FROM `${project_id}.${dataset_id}.requests`"},
             {"name": "t_seconds", "query": "SELECT * FROM `${project_id}.${dataset_id}.t`"},
             {"name": "u", "query": "SELECT * FROM `${project_id}.${dataset_id}.t_seconds`"}]
    assert levels_of(tmp_path, views) == {"t": 0, "t_seconds": 1, "u": 2}


def test_views_nested_deeper_than_the_module_creates_fail_at_plan(tmp_path: Path) -> None:
    chain = [{"name": "v0", "query": "SELECT 1 FROM `p.d.requests`"}]
    chain += [{"name": f"v{i}", "query": f"SELECT 1 FROM `p.d.v{i - 1}`"}
              for i in range(1, STAGES + 1)]
    result = plan_levels(tmp_path, chain)
    assert result.returncode != 0
    assert "nest more than 4 levels deep" in result.stderr.replace("\n", " ")


def test_views_reading_each_other_in_a_cycle_fail_at_plan(tmp_path: Path) -> None:
    cycle = [{"name": "a", "query": "SELECT 1 FROM `p.d.b`"},
             {"name": "b", "query": "SELECT 1 FROM `p.d.a`"}]
    result = plan_levels(tmp_path, cycle)
    assert result.returncode != 0
    assert "cycle" in result.stderr


def test_each_level_of_views_waits_for_the_one_before_and_level_0_for_the_tables() -> None:
    bigquery = resources(MODULES / "bigquery")
    for level in range(STAGES):
        stage = bigquery[f"google_bigquery_table.view_level_{level}"]
        previous = "google_bigquery_table.table" if level == 0 else \
            f"google_bigquery_table.view_level_{level - 1}"
        assert stage["depends_on"] == [f"${{{previous}}}"]
        assert f"module.view_order.levels[name] == {level}" in stage["for_each"]
        assert stage["view"][0]["use_legacy_sql"] is False
    assert f"google_bigquery_table.view_level_{STAGES}" not in bigquery


@pytest.mark.parametrize("table", sorted(json.loads(
    (GENERATED / "system.json").read_text("utf-8"))["bigquery"]["tables"]))
def test_every_table_schema_file_exists(table: str) -> None:
    spec = json.loads((GENERATED / "system.json").read_text("utf-8"))["bigquery"]["tables"][table]
    schema = json.loads((GENERATED / spec["schema_file"]).read_text("utf-8"))
    assert spec["partition_field"] in {field["name"] for field in schema}
    assert set(spec["clustering"]) <= {field["name"] for field in schema}
