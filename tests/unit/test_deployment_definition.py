"""The one definition of the deployable system (shared/deployment) is complete,
consistent with the code, and what terraform/ and manifests/ were generated from."""

from __future__ import annotations

import json
import shutil

import functions
import functions.main
from shared.config import Topics
from shared.deployment import system
from shared.deployment.cli import repo_root, stale_generated_files
from shared.deployment.manifests import base_files
from shared.deployment.terraform import GENERATED_DIR, generated_files
from shared.jobs.submit import REQUEST_LOCK_SECONDS
from shared.jobspec.request import JobRequest
from shared.metrics.schema import REQUEST_FIELDS

REPO = repo_root()


def test_the_committed_terraform_and_manifest_files_are_what_the_definition_generates():
    assert stale_generated_files(REPO) == []


def test_a_hand_edit_of_a_generated_file_is_reported_stale(tmp_path):
    for directory in (GENERATED_DIR, "manifests/base"):
        shutil.copytree(REPO / directory, tmp_path / directory)
    system_json = tmp_path / GENERATED_DIR / "system.json"
    system_json.write_text(system_json.read_text().replace('"max_delivery_attempts": 10',
                                                           '"max_delivery_attempts": 7'))
    (tmp_path / "manifests/base/extra.yaml").write_text("kind: ConfigMap\n")

    assert stale_generated_files(tmp_path) == [f"{GENERATED_DIR}/system.json",
                                             "manifests/base/extra.yaml"]


def test_every_entry_point_in_functions_main_is_deployed_and_nothing_else():
    assert {f.name for f in system.FUNCTIONS} == set(functions.main.__all__)


def test_every_service_with_a_dockerfile_is_deployed():
    built = {p.parent.name for p in (REPO / "services").glob("*/Dockerfile")}
    assert built == {s.name for s in system.SERVICES}


def test_every_topic_the_code_publishes_to_or_is_triggered_by_is_deployed():
    assert set(Topics().model_dump().values()) <= set(system.TOPICS)


def test_subscriptions_service_accounts_and_dead_letter_topics_are_distinct_per_function():
    for attribute in ("subscription", "service_account", "dead_letter_topic"):
        values = [getattr(f, attribute) for f in system.FUNCTIONS]
        assert len(set(values)) == len(values), attribute


def test_submit_job_finishes_before_another_delivery_may_take_over_its_request_lease():
    assert system.function("submit_job").timeout_seconds < REQUEST_LOCK_SECONDS


def test_every_function_publishes_only_to_topics_it_is_granted_and_reads_its_settings():
    document = json.loads(generated_files()["system.json"])
    for name, spec in document["functions"].items():
        granted = {g["target"] for g in spec["grants"] if g["role"] == "roles/pubsub.publisher"}
        assert granted == set(system.function(name).publishes_to)
        assert {"ACCELOPS_CONFIG", "ACCELOPS_PROJECT"} <= set(spec["env"])


def test_no_grant_is_a_primitive_role_or_a_project_wide_container_role():
    forbidden = {"roles/owner", "roles/editor", "roles/viewer", "roles/container.admin",
                 "roles/container.developer", "roles/container.clusterAdmin"}
    document = json.loads(generated_files()["system.json"])
    for part in (*document["functions"].values(), *document["services"].values()):
        for grant in part["grants"]:
            assert grant["role"] not in forbidden
            if grant["scope"] == "project":
                assert not grant["role"].startswith(("roles/container.", "roles/pubsub.",
                                                     "roles/bigquery.data"))


def test_the_table_schema_files_carry_every_column_of_the_schema_module():
    columns = json.loads(generated_files()["schemas/requests.json"])
    assert [c["name"] for c in columns] == [f.name for f in REQUEST_FIELDS]
    assert {c["type"] for c in columns} <= {"STRING", "INTEGER", "FLOAT", "TIMESTAMP"}


def test_the_priority_classes_in_the_base_are_exactly_those_a_request_may_name():
    names = JobRequest.model_fields["priority"].annotation.__args__
    assert all(f"name: {name}\n" in base_files()["kueue-priorities.yaml"] for name in names)
    assert base_files()["kueue-priorities.yaml"].count("kind: WorkloadPriorityClass") == len(names)


def test_the_docs_permissions_table_is_the_one_the_definition_renders():
    from shared.deployment.readme import BEGIN, PAGE, replace_block

    text = (REPO / PAGE).read_text()
    assert BEGIN in text
    assert replace_block(text) == text
    assert "`accelops-ingest-metrics` | `roles/bigquery.dataEditor` on table `requests`" in text
    assert "`roles/bigquery.dataEditor` on the metrics dataset" not in text


def test_bucket_uploads_reach_deploy_model_on_its_topic_for_the_upload_prefix():
    from shared.serving.convention import MODELS_PREFIX

    deploy = system.function("deploy_model")
    assert deploy.trigger_topic == Topics().model_uploads
    assert deploy.storage_trigger is not None
    assert deploy.storage_trigger.object_prefix == MODELS_PREFIX
    assert deploy.storage_trigger.notification_event == "OBJECT_FINALIZE"
    assert deploy.storage_trigger.event_type == "google.cloud.storage.object.v1.finalized"
    assert deploy.publishes_to == (Topics().model_rollouts,)
    # It never waits for pods: a minute is its whole budget.
    assert deploy.timeout_seconds <= 60
    assert deploy.concurrency == 1


def test_reconcile_models_runs_on_rollout_nudges_and_a_tick_every_minute():
    reconcile = system.function("reconcile_models")
    assert reconcile.trigger_topic == Topics().model_rollouts
    ticks = [j for j in system.SCHEDULER_JOBS if j.topic == Topics().model_rollouts]
    assert [(j.schedule, j.time_zone, j.attributes) for j in ticks] \
        == [("* * * * *", "Etc/UTC", {"trigger": "schedule"})]
    assert reconcile.vpc_egress, "it calls the Saxml HTTP proxy inside the VPC"
    assert "ACCELOPS_SAXML_PROXY" in reconcile.env


def test_every_kubernetes_resource_the_serving_code_names_is_granted_to_a_serving_function():
    import ast

    import shared.kube as kube

    granted = {(rule.api_group, resource)
               for name in ("deploy_model", "reconcile_models")
               for rule in system.function(name).kube_rules for resource in rule.resources}
    named = set()
    # `accelops models` (operator.py, cli.py) runs with the person's own access: finding
    # the Gateway for a load test is theirs, not a function's (operations/permissions.md).
    by_people = {"operator.py", "cli.py"}
    for path in (REPO / "shared" / "serving").glob("*.py"):
        if path.name in by_people:
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "shared.kube":
                for alias in node.names:
                    value = getattr(kube, alias.name, None)
                    if isinstance(value, kube.Resource):
                        named.add((value.group, value.plural))
    assert named, "the serving code reaches Kubernetes through shared.kube"
    assert named <= granted, f"not granted to deploy_model or reconcile_models: {named - granted}"


def test_the_serving_functions_run_in_the_sandboxs_serving_part():
    from sandbox.topology import ALL_PARTS, FUNCTION_PARTS, PARTS

    assert {f.name for f in system.FUNCTIONS if FUNCTION_PARTS[f.name] == "serving"} == {
        "deploy_model", "reconcile_models"}
    assert PARTS["serving"] == ("cluster", "storage", "saxml", "monitoring")
    assert "serving" in ALL_PARTS
    assert {FUNCTION_PARTS[f.name] for f in system.FUNCTIONS} <= set(PARTS)


def test_servers_identities_are_the_configs_default_accounts_in_the_serving_namespace():
    from shared.config import ServingConfig

    serving = ServingConfig()
    assert serving.namespace == system.SERVING_NAMESPACE
    accounts = {i.name: i.kubernetes_service_account for i in system.WORKLOAD_IDENTITIES}
    assert accounts == {"triton": serving.triton_service_account,
                        "saxml": serving.saxml_service_account,
                        "locust": serving.locust_service_account}
