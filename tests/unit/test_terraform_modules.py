"""terraform/: the shape of every module, read as HCL (python-hcl2), plus `terraform fmt`.

`terraform validate` cannot run here: `terraform init` cannot download the google
provider offline, and validate needs its schema. These tests check what can be
checked without it; checkov (`make checkov`) checks policy.

The helpers at the top are shared by the other tests/unit/test_terraform_*.py files.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import hcl2
import pytest
from hcl2 import SerializationOptions

ROOT = Path(__file__).resolve().parents[2]
TERRAFORM = ROOT / "terraform"
MODULES = TERRAFORM / "modules"
EXAMPLE = TERRAFORM / "envs" / "example"
GENERATED = TERRAFORM / "generated"

# Classic dict form: literals unquoted, expressions as "${...}", blocks as lists.
_OPTIONS = SerializationOptions(strip_string_quotes=True, explicit_blocks=False)

MODULE_FILES = ("main.tf", "variables.tf", "outputs.tf", "versions.tf")


def module_dirs() -> list[Path]:
    return sorted(p for p in MODULES.iterdir() if p.is_dir())


def tf_files() -> list[Path]:
    """Every hand-written .tf file (terraform/generated holds no HCL)."""
    return sorted(p for p in TERRAFORM.rglob("*.tf") if ".terraform" not in p.parts)


@cache
def load(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as handle:
        return hcl2.load(handle, serialization_options=_OPTIONS)


def load_dir(directory: Path) -> dict[str, list[Any]]:
    """All top-level blocks of a module, merged across its files."""
    merged: dict[str, list[Any]] = {}
    for path in sorted(directory.glob("*.tf")):
        for kind, blocks in load(path).items():
            merged.setdefault(kind, []).extend(blocks)
    return merged


def blocks(directory: Path, kind: str) -> dict[str, Any]:
    """name -> body of the `variable` / `output` / `module` blocks of a module."""
    return {name: body for block in load_dir(directory).get(kind, [])
            for name, body in block.items()}


def resources(directory: Path) -> dict[str, Any]:
    """"type.name" -> body of a module's resources."""
    return {f"{rtype}.{name}": body
            for block in load_dir(directory).get("resource", [])
            for rtype, named in block.items() for name, body in named.items()}


def walk(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(key path, leaf) for every leaf of a parsed file, comments left out."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key != "__comments__":
                yield from walk(item, (*path, key))
    elif isinstance(value, list):
        for item in value:
            yield from walk(item, path)
    else:
        yield path, value


_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def string_literals(path: Path) -> Iterator[str]:
    """Every string literal of a .tf file: plain attribute values, map keys, and the
    quoted strings inside expressions (comments are not literals)."""
    for keys, leaf in walk(load(path)):
        yield from (k for k in keys if not k.startswith("${"))
        if isinstance(leaf, str):
            if "${" in leaf:
                yield from _QUOTED.findall(leaf.replace('\\"', '"'))
                yield re.sub(r"\$\{.*\}", "", leaf)
            else:
                yield leaf


def terraform_bin() -> str:
    binary = shutil.which("terraform")
    if binary is None:
        pytest.skip("terraform is not on PATH")
    return binary


def terraform_env() -> dict[str, str]:
    return {**os.environ, "CHECKPOINT_DISABLE": "1"}


# --- the shape of the modules ----------------------------------------------------------


@pytest.mark.parametrize("module", module_dirs(), ids=lambda p: p.name)
def test_every_module_has_main_variables_outputs_and_versions(module: Path) -> None:
    missing = [name for name in MODULE_FILES if not (module / name).is_file()]
    assert not missing, f"{module.relative_to(ROOT)} lacks {missing}"


def test_the_example_environment_has_the_four_files_and_a_gcs_backend() -> None:
    for name in MODULE_FILES:
        assert (EXAMPLE / name).is_file(), name
    (terraform,) = load(EXAMPLE / "versions.tf")["terraform"]
    assert "gcs" in terraform["backend"][0], "state in a GCS bucket (-backend-config=bucket=)"
    assert (EXAMPLE / "terraform.tfvars.example").is_file()
    assert (EXAMPLE / "accelops.yaml").is_file()


@pytest.mark.parametrize("directory", [*module_dirs(), EXAMPLE], ids=lambda p: p.name)
def test_every_variable_has_a_type_and_a_description(directory: Path) -> None:
    variables = blocks(directory, "variable")
    assert variables or directory.name == "bigquery_view_order"
    bad = [name for name, body in variables.items()
           if not body.get("type") or not str(body.get("description", "")).strip()]
    assert not bad, f"{directory.relative_to(ROOT)}: variables without type or description: {bad}"


@pytest.mark.parametrize("directory", [*module_dirs(), EXAMPLE], ids=lambda p: p.name)
def test_every_output_is_described(directory: Path) -> None:
    outputs = blocks(directory, "output")
    assert outputs, f"{directory.relative_to(ROOT)} has no outputs"
    bad = [name for name, body in outputs.items() if not str(body.get("description", "")).strip()]
    assert not bad, f"{directory.relative_to(ROOT)}: outputs without description: {bad}"


@pytest.mark.parametrize("directory", [*module_dirs(), EXAMPLE], ids=lambda p: p.name)
def test_terraform_and_the_google_provider_are_pinned(directory: Path) -> None:
    (terraform,) = load(directory / "versions.tf")["terraform"]
    assert terraform["required_version"] == ">= 1.5"
    providers = {name: spec for block in terraform.get("required_providers", [])
                 for name, spec in block.items()}
    uses_google = any(rtype.startswith("google_") for rtype in
                      (key.split(".")[0] for key in resources(directory))) or directory == EXAMPLE
    if uses_google:
        assert providers["google"] == {"source": "hashicorp/google", "version": ">= 5.0, < 7"}
    else:
        assert not providers, "a provider-free module stays provider-free (its tests run offline)"


def test_every_module_is_used() -> None:
    sources = {(directory / body["source"]).resolve()
               for directory in [*module_dirs(), EXAMPLE]
               for body in blocks(directory, "module").values()}
    unused = [m.name for m in module_dirs() if m.resolve() not in sources]
    assert not unused, f"modules nothing calls: {unused}"


def test_the_example_composes_every_top_level_module() -> None:
    called = {Path(body["source"]).name for body in blocks(EXAMPLE, "module").values()}
    expected = {"pubsub", "functions", "scheduler", "log_sink", "bigquery", "services",
                "artifact_registry", "buckets", "iam", "gke"}
    assert expected <= called, f"not composed in envs/example: {sorted(expected - called)}"


def test_the_gke_module_declares_no_tpu_node_pool() -> None:
    pools = {k: v for k, v in resources(MODULES / "gke").items()
             if k.startswith("google_container_node_pool.")}
    assert len(pools) == 1, "one CPU pool; reconcile_slices creates the TPU pools"
    for body in pools.values():
        config = body["node_config"][0]
        assert "guest_accelerator" not in config
        assert not str(config.get("machine_type", "")).startswith(("ct", "tpu"))
        assert config["workload_metadata_config"][0]["mode"] == "GKE_METADATA"
    (cluster,) = [v for k, v in resources(MODULES / "gke").items()
                  if k.startswith("google_container_cluster.")]
    assert cluster["remove_default_node_pool"] is True
    assert cluster["workload_identity_config"][0]["workload_pool"]
    assert cluster["ip_allocation_policy"][0]["cluster_secondary_range_name"]


def test_terraform_fmt_finds_nothing_to_change() -> None:
    command = [terraform_bin(), "fmt", "-check", "-recursive", "-diff", str(TERRAFORM)]
    result = subprocess.run(command, capture_output=True, text=True, env=terraform_env(),
                            timeout=120, check=False)
    assert result.returncode == 0, f"terraform fmt would change:\n{result.stdout}{result.stderr}"
