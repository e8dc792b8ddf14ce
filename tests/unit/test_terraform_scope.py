"""Which clusters the functions' GKE roles hold on, and the node service account TPU pools
run as: modules/cluster_scope. It needs no provider, so these tests run it with the real
terraform binary (offline), as envs/example calls it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.unit.test_terraform_modules import EXAMPLE, MODULES, blocks, output, run_root

SCOPE = MODULES / "cluster_scope"
CLUSTER = "projects/acme-ml/locations/us-central1-a/clusters/tpu"
NODES = "tpu-nodes@acme-ml.iam.gserviceaccount.com"


def hcl(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ", ".join(hcl(v) for v in value) + "]"
    return f'"{value}"'


def apply_scope(directory: Path, **arguments: Any) -> Any:
    """Apply a root module that calls cluster_scope; the result of `terraform apply`."""
    arguments = {"project_id": "acme-ml", "cluster_name": "tpu",
                 "cluster_location": "us-central1-a", "node_service_account": NODES,
                 **arguments}
    lines = "\n".join(f"  {name} = {hcl(value)}" for name, value in arguments.items())
    source = os.path.relpath(SCOPE, directory)
    return run_root(directory, f'module "scope" {{\n  source = "{source}"\n{lines}\n}}\n'
                               'output "scope" {\n  value = module.scope\n}\n')


def scope_of(directory: Path, **arguments: Any) -> dict[str, Any]:
    result = apply_scope(directory, **arguments)
    assert result.returncode == 0, result.stdout + result.stderr
    return output(directory, "scope")  # type: ignore[no-any-return]


def test_the_condition_holds_a_binding_to_the_cluster_and_its_node_pools(tmp_path: Path) -> None:
    scope = scope_of(tmp_path)
    assert scope["cluster"] == CLUSTER
    condition = scope["conditions"][CLUSTER]
    assert condition["title"] == "accelops cluster tpu in us-central1-a"
    zonal = "projects/acme-ml/zones/us-central1-a/clusters/tpu"
    assert condition["expression"] == (
        '(resource.type != "container.googleapis.com/Cluster" && '
        'resource.type != "container.googleapis.com/NodePool") || '
        f'resource.name == "{CLUSTER}" || resource.name.startsWith("{CLUSTER}/") || '
        f'resource.name == "{zonal}" || resource.name.startsWith("{zonal}/")')


def test_pool_schedule_acts_on_the_accelops_cluster_unless_the_config_lists_clusters(
        tmp_path: Path) -> None:
    scope = scope_of(tmp_path)
    assert scope["clusters"] == {"cluster": [CLUSTER], "scheduled_clusters": [CLUSTER]}
    assert scope["foreign_clusters"] == []


def test_listed_clusters_of_this_project_are_scheduled_and_others_are_reported(
        tmp_path: Path) -> None:
    other = "projects/acme-ml/locations/europe-west4/clusters/inference"
    foreign = "projects/elsewhere/locations/us-east5/clusters/gpu"
    scope = scope_of(tmp_path, pool_schedule_clusters=[other, foreign, other])
    assert scope["clusters"] == {"cluster": [CLUSTER], "scheduled_clusters": [other]}
    assert set(scope["conditions"]) == {CLUSTER, other}
    assert scope["foreign_clusters"] == [foreign]


def test_a_pool_schedule_entry_that_is_not_a_cluster_name_fails_at_plan(tmp_path: Path) -> None:
    result = apply_scope(tmp_path, pool_schedule_clusters=["us-central1-a/tpu"])
    assert result.returncode != 0
    assert "cluster resource names" in result.stderr


def test_a_config_without_a_node_service_account_fails_at_plan_naming_the_created_one(
        tmp_path: Path) -> None:
    created = "accelops-gke-nodes@acme-ml.iam.gserviceaccount.com"
    result = apply_scope(tmp_path, node_service_account=None,
                         created_node_service_account=created)
    assert result.returncode != 0
    message = " ".join(result.stderr.split())
    assert "names no slices.node_service_account" in message
    assert created in message
    assert "Compute Engine default service account" in message


def test_the_node_service_account_the_config_names_is_the_one_granted(tmp_path: Path) -> None:
    assert scope_of(tmp_path)["node_service_account"] == NODES


def test_the_grant_on_a_created_node_service_account_waits_for_that_account() -> None:
    # The config names the created account by its email; the output reads the created
    # account's (same string), which orders the grant after the account's creation.
    value = blocks(SCOPE, "output")["node_service_account"]["value"]
    assert "var.created_node_service_account" in value
    call = blocks(EXAMPLE, "module")["cluster_scope"]
    assert call["created_node_service_account"] == \
        "${var.create_cluster ? module.gke[0].node_service_account_email : null}"
