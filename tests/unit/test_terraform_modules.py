"""terraform/: the shape of every module, read as HCL (python-hcl2), plus `terraform fmt`.

`terraform validate` cannot run here: `terraform init` cannot download the google
provider offline, and validate needs its schema. These tests check what can be
checked without it (and run provider-free modules and expressions with the real
terraform binary); checkov (`make checkov`) checks policy.

The helpers at the top are shared by the other tests/unit/test_terraform_*.py files.
"""

from __future__ import annotations

import ipaddress
import json
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

from shared.serving.gateway import ROUTE_PORT

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
    return {**os.environ, "CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1"}


def run_root(directory: Path, main_tf: str) -> subprocess.CompletedProcess[str]:
    """`terraform init` and `apply` a provider-free root module (offline)."""
    binary = terraform_bin()
    (directory / "main.tf").write_text(main_tf, "utf-8")
    init = subprocess.run([binary, "init", "-input=false", "-no-color", "-backend=false"],
                          cwd=directory, capture_output=True, text=True, env=terraform_env(),
                          timeout=120, check=False)
    assert init.returncode == 0, init.stderr
    return subprocess.run([binary, "apply", "-auto-approve", "-input=false", "-no-color"],
                          cwd=directory, capture_output=True, text=True, env=terraform_env(),
                          timeout=120, check=False)


def output(directory: Path, name: str) -> Any:
    """An output of a root module `run_root` applied."""
    out = subprocess.run([terraform_bin(), "output", "-json", name], cwd=directory,
                         capture_output=True, text=True, env=terraform_env(), timeout=60,
                         check=True)
    return json.loads(out.stdout)


def evaluate(directory: Path, expression: str, **locals_: Any) -> Any:
    """The value of an HCL expression as python-hcl2 reads it (``"${...}"``), computed by
    the real terraform, offline; each keyword is available as ``local.<name>``."""
    assert expression.startswith("${"), expression
    assert expression.endswith("}"), expression
    (directory / "locals.json").write_text(json.dumps(locals_), "utf-8")
    values = "\n".join(f'  {name} = jsondecode(file("${{path.module}}/locals.json")).{name}'
                       for name in locals_)
    result = run_root(directory, f"locals {{\n{values}\n}}\n"
                                 f"output \"value\" {{\n  value = {expression[2:-1]}\n}}\n")
    assert result.returncode == 0, result.stdout + result.stderr
    return output(directory, "value")


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


# Each provider a module may use, pinned the same way everywhere. The google floor is
# 6.0: google_cloud_run_v2_service.deletion_protection (set in modules/services) does
# not exist before 6.0.0, build_config.service_account before 5.26.0, and 5.x below
# 5.38.0 rebuilds every function on every apply (envs/example/versions.tf).
PROVIDERS = {
    "google": {"source": "hashicorp/google", "version": ">= 6.0, < 7"},
    "google-beta": {"source": "hashicorp/google-beta", "version": ">= 6.0, < 7"},
    "time": {"source": "hashicorp/time", "version": ">= 0.9, < 1"},
    "archive": {"source": "hashicorp/archive", "version": ">= 2.4, < 3"},
}


def data_sources(directory: Path) -> dict[str, Any]:
    """"type.name" -> body of a module's data sources."""
    return {f"{dtype}.{name}": body
            for block in load_dir(directory).get("data", [])
            for dtype, named in block.items() for name, body in named.items()}


def providers_used(directory: Path) -> set[str]:
    """The providers whose resources or data sources a module declares."""
    used = set()
    for address, body in {**resources(directory), **data_sources(directory)}.items():
        kind = address.split(".")[0]
        if kind.startswith("google_"):
            used.add("google-beta" if body.get("provider") in ("google-beta", "${google-beta}")
                     else "google")
        elif kind.split("_")[0] in PROVIDERS:
            used.add(kind.split("_")[0])
    return used


def required_providers(directory: Path) -> dict[str, Any]:
    (terraform,) = load(directory / "versions.tf")["terraform"]
    return {name: spec for block in terraform.get("required_providers", [])
            for name, spec in block.items() if name != "__comments__"}


@pytest.mark.parametrize("directory", [*module_dirs(), EXAMPLE], ids=lambda p: p.name)
def test_terraform_and_every_provider_a_module_uses_are_pinned(directory: Path) -> None:
    (terraform,) = load(directory / "versions.tf")["terraform"]
    assert terraform["required_version"] == ">= 1.5"
    providers = required_providers(directory)
    expected = set(PROVIDERS) if directory == EXAMPLE else providers_used(directory)
    assert set(providers) == expected, "every provider used is pinned, no other"
    for name, spec in providers.items():
        assert spec == PROVIDERS[name], (name, spec)
    if not expected:
        assert not providers, "a provider-free module stays provider-free (its tests run offline)"


def test_the_google_provider_floor_is_6_0_because_cloud_run_services_set_deletion_protection(
) -> None:
    # 5.x has no deletion_protection on google_cloud_run_v2_service: the argument the
    # services set would be refused. This is what the floor in PROVIDERS is for.
    service = resources(MODULES / "services")["google_cloud_run_v2_service.service"]
    assert "deletion_protection" in service
    assert PROVIDERS["google"]["version"].startswith(">= 6.0,")
    function = resources(MODULES / "functions")["google_cloudfunctions2_function.function"]
    assert "service_account" in function["build_config"][0], "needs >= 5.26"


def test_every_module_is_used() -> None:
    sources = {(directory / body["source"]).resolve()
               for directory in [*module_dirs(), EXAMPLE]
               for body in blocks(directory, "module").values()}
    unused = [m.name for m in module_dirs() if m.resolve() not in sources]
    assert not unused, f"modules nothing calls: {unused}"


def test_the_example_composes_every_top_level_module() -> None:
    called = {Path(body["source"]).name for body in blocks(EXAMPLE, "module").values()}
    expected = {"pubsub", "functions", "scheduler", "log_sink", "bigquery", "services",
                "artifact_registry", "buckets", "iam", "gke", "project_services",
                "cluster_scope", "function_build", "function_source"}
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


def test_the_node_service_account_holds_gkes_minimum_node_role_and_nothing_else() -> None:
    gke = resources(MODULES / "gke")
    roles = [body for address, body in gke.items()
             if address.startswith("google_project_iam_member.")]
    assert [r["role"] for r in roles] == ["roles/container.defaultNodeServiceAccount"]
    assert roles[0]["member"] == "serviceAccount:${google_service_account.nodes.email}"
    pool = gke["google_container_node_pool.system"]
    assert pool["node_config"][0]["service_account"] == "${google_service_account.nodes.email}"


def test_the_created_node_service_account_is_known_at_plan() -> None:
    # The config check of modules/cluster_scope names it when the config names none.
    email = blocks(MODULES / "gke", "output")["node_service_account_email"]["value"]
    assert email == ("${google_service_account.nodes.account_id}@${var.project_id}"
                     ".iam.gserviceaccount.com")


def test_private_clusters_let_the_control_plane_reach_the_admission_webhooks_on_9443() -> None:
    gke = resources(MODULES / "gke")
    rule = gke["google_compute_firewall.control_plane_webhooks"]
    assert rule["count"] == "${var.enable_private_nodes ? 1 : 0}"
    assert rule["direction"] == "INGRESS"
    assert rule["source_ranges"] == ["${var.master_ipv4_cidr_block}"]
    assert rule["allow"] == [{"protocol": "tcp", "ports": "${var.webhook_ports}"}]
    assert blocks(MODULES / "gke", "variable")["webhook_ports"]["default"] == ["9443"]
    assert rule["target_service_accounts"] == ["${google_service_account.nodes.email}"]
    # The same range the control plane is given, and a higher priority than the
    # module's deny-all rule.
    cluster = gke["google_container_cluster.cluster"]
    private = cluster["dynamic"][0]["private_cluster_config"]["content"][0]
    assert private["master_ipv4_cidr_block"] == "${var.master_ipv4_cidr_block}"
    assert rule["priority"] < gke["google_compute_firewall.deny_ingress"]["priority"]


def test_the_cluster_runs_gkes_gateway_controller_with_the_standard_channel_crds() -> None:
    cluster = resources(MODULES / "gke")["google_container_cluster.cluster"]
    assert cluster["gateway_api_config"] == [{"channel": "CHANNEL_STANDARD"}]


def test_the_internal_gateway_has_its_proxy_only_subnet_apart_from_the_other_ranges() -> None:
    gke = resources(MODULES / "gke")
    subnet = gke["google_compute_subnetwork.proxy_only"]
    assert (subnet["purpose"], subnet["role"]) == ("REGIONAL_MANAGED_PROXY", "ACTIVE")
    assert subnet["region"] == "${var.region}"
    assert "log_config" not in subnet  # refused on a proxy-only subnet
    variables = blocks(MODULES / "gke", "variable")
    ranges = [ipaddress.ip_network(variables[name]["default"]) for name in
              ("proxy_only_cidr", "subnet_cidr", "pods_cidr", "services_cidr")]
    assert not any(a.overlaps(b) for i, a in enumerate(ranges) for b in ranges[i + 1:])


def test_the_gateways_proxies_and_health_checks_may_reach_tritons_port_and_only_it() -> None:
    gke = resources(MODULES / "gke")
    variables = blocks(MODULES / "gke", "variable")
    assert variables["gateway_backend_ports"]["default"] == [str(ROUTE_PORT)]
    proxies = gke["google_compute_firewall.gateway_proxies"]
    checks = gke["google_compute_firewall.gateway_health_checks"]
    assert proxies["source_ranges"] == ["${var.proxy_only_cidr}"]
    assert checks["source_ranges"] == "${var.health_check_ranges}"
    for rule in (proxies, checks):
        assert rule["direction"] == "INGRESS"
        assert rule["allow"] == [{"protocol": "tcp", "ports": "${var.gateway_backend_ports}"}]
        assert rule["target_service_accounts"] == ["${google_service_account.nodes.email}"]
        assert rule["priority"] < gke["google_compute_firewall.deny_ingress"]["priority"]
