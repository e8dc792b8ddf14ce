"""terraform/ consumes the one definition (terraform/generated/system.json) and copies
none of it: every function and service is deployed from it, every name, retry policy,
size and grant comes from it, and nothing grants more than the definition says."""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_terraform_modules import (
    EXAMPLE,
    GENERATED,
    MODULES,
    ROOT,
    blocks,
    evaluate,
    load,
    load_dir,
    resources,
    string_literals,
    tf_files,
    walk,
)

PRIMITIVE_ROLES = {"roles/owner", "roles/editor", "roles/viewer"}
CLUSTER_WIDE_ROLES = {"roles/container.admin", "roles/container.developer",
                      "roles/container.clusterAdmin"}

# Roles Terraform itself binds (not the definition's accounts), and the modules that may:
# the Pub/Sub service agent publishes dead letters, acks what it dead-letters and signs
# push tokens; log sink writers and the Cloud Storage service agent publish; the push
# and Eventarc identities and named members invoke; the Eventarc identity receives
# events; Kubernetes service accounts impersonate the workload identities; the GKE
# node service account holds GKE's minimum node role; the functions' build identity
# writes build logs, pushes images and reads the source archive.
INFRASTRUCTURE_ROLES = {
    "roles/pubsub.publisher": {"pubsub", "log_sink", "storage_events"},
    "roles/pubsub.subscriber": {"pubsub", "storage_events"},
    "roles/iam.serviceAccountTokenCreator": {"pubsub"},
    "roles/run.invoker": {"functions", "services", "storage_events"},
    "roles/eventarc.eventReceiver": {"storage_events"},
    "roles/iam.workloadIdentityUser": {"workload_identity"},
    "roles/container.defaultNodeServiceAccount": {"gke"},
    "roles/logging.logWriter": {"function_build"},
    "roles/artifactregistry.writer": {"function_build"},
    "roles/storage.objectViewer": {"function_build"},
}
# Project-level bindings Terraform makes for Google-managed identities, where the
# API offers nothing narrower (Eventarc's transport topic is not known in advance).
PROJECT_LEVEL_INFRASTRUCTURE = {"roles/eventarc.eventReceiver", "roles/pubsub.publisher"}


@cache
def system() -> dict[str, Any]:
    return json.loads((GENERATED / "system.json").read_text("utf-8"))  # type: ignore[no-any-return]


def exported_entry_points() -> list[str]:
    """functions/main.py's __all__, read without importing functions_framework."""
    tree = ast.parse((ROOT / "functions" / "main.py").read_text("utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError("functions/main.py has no __all__")


def example_module(name: str) -> dict[str, Any]:
    return blocks(EXAMPLE, "module")[name]  # type: ignore[no-any-return]


def literals_by_module() -> dict[Path, set[str]]:
    return {path: set(string_literals(path)) for path in tf_files()}


def identities() -> dict[str, Any]:
    return system()["serving"]["workload_identities"]  # type: ignore[no-any-return]


def accounts() -> list[dict[str, Any]]:
    """Every account the definition grants roles to: functions, services, identities."""
    return [*system()["functions"].values(), *system()["services"].values(),
            *identities().values()]


# --- deployed from the definition ------------------------------------------------------


def test_the_example_reads_system_json_once_and_hands_its_parts_down() -> None:
    (local_block, *_) = load_dir(EXAMPLE)["locals"]
    assert local_block["system"] == '${jsondecode(file("${local.generated_dir}/system.json"))}'
    assert local_block["generated_dir"] == "${path.module}/../../generated"
    reads = sum(path.read_text("utf-8").count('/system.json")') for path in tf_files())
    assert reads == 1, "system.json is read once, in envs/example, and handed down"


@pytest.mark.parametrize("entry_point", exported_entry_points())
def test_every_exported_entry_point_is_defined_and_deployed(entry_point: str) -> None:
    functions = system()["functions"]
    assert entry_point in {f["entry_point"] for f in functions.values()}, \
        f"{entry_point} is exported by functions/main.py but not in system.json"
    # The example hands the definition's functions to the functions and pubsub modules ...
    assert example_module("functions")["functions"] == "${local.system.functions}"
    assert example_module("pubsub")["functions"] == "${local.system.functions}"
    # ... which deploy one function, and one push subscription, per entry.
    function = resources(MODULES / "functions")["google_cloudfunctions2_function.function"]
    assert function["for_each"] == "${var.functions}"
    assert function["build_config"][0]["entry_point"] == "${each.value.entry_point}"
    assert "event_trigger" not in function, "delivery is by the push subscriptions"
    push = resources(MODULES / "pubsub")["google_pubsub_subscription.push"]
    assert push["for_each"] == "${var.functions}"


def test_every_function_of_the_definition_is_exported() -> None:
    assert sorted(f["entry_point"] for f in system()["functions"].values()) == \
        sorted(exported_entry_points())


@pytest.mark.parametrize("service", sorted(p.parent.name for p in
                                           (ROOT / "services").glob("*/Dockerfile")))
def test_every_service_with_a_dockerfile_is_defined_and_deployed(service: str) -> None:
    assert service in system()["services"], \
        f"services/{service} has a Dockerfile but is not in system.json"
    assert example_module("services")["services"] == "${local.system.services}"
    run = resources(MODULES / "services")["google_cloud_run_v2_service.service"]
    assert run["for_each"] == "${var.services}"
    assert run["template"][0]["containers"][0]["image"] == "${var.images[each.key]}"
    # Internal unless the definition opens the service (IAM still checks every caller).
    assert run["ingress"] == \
        '${each.value.ingress == "all" ? "INGRESS_TRAFFIC_ALL" : var.ingress}'
    ingress = blocks(MODULES / "services", "variable")["ingress"]
    assert ingress["default"] == "INGRESS_TRAFFIC_INTERNAL_ONLY"


def test_the_other_parts_of_the_definition_are_handed_down_whole() -> None:
    handed = {
        ("pubsub", "topics"): "${local.system.topics}",
        ("pubsub", "push_invoker_account_id"): "${local.system.push_invoker_account_id}",
        ("scheduler", "jobs"): "${local.system.scheduler_jobs}",
        ("log_sink", "sinks"): "${local.system.log_sinks}",
        ("iam", "custom_roles"): "${local.system.custom_roles}",
        ("bigquery", "dataset_id"): "${local.system.bigquery.dataset_id}",
        ("bigquery", "tables"): "${local.system.bigquery.tables}",
        ("bigquery", "views"): "${local.system.bigquery.views}",
    }
    for (module, argument), expression in handed.items():
        assert example_module(module)[argument] == expression, (module, argument)


def test_retry_policy_and_sizes_are_read_from_the_definition() -> None:
    push = resources(MODULES / "pubsub")["google_pubsub_subscription.push"]
    assert push["name"] == "${each.value.subscription}"
    assert push["topic"] == "${google_pubsub_topic.topic[each.value.trigger_topic].id}"
    assert push["ack_deadline_seconds"] == "${each.value.ack_deadline_seconds}"
    assert push["retry_policy"][0] == {"minimum_backoff": "${each.value.minimum_backoff_seconds}s",
                                       "maximum_backoff": "${each.value.maximum_backoff_seconds}s"}
    dead_letter = push["dead_letter_policy"][0]
    assert dead_letter["dead_letter_topic"] == \
        "${google_pubsub_topic.topic[each.value.dead_letter_topic].id}"
    assert dead_letter["max_delivery_attempts"] == "${each.value.max_delivery_attempts}"
    assert push["expiration_policy"][0]["ttl"] == ""
    oidc = push["push_config"][0]["oidc_token"][0]
    assert oidc["service_account_email"] == "${google_service_account.push_invoker.email}"

    service = resources(MODULES / "functions")["google_cloudfunctions2_function.function"][
        "service_config"][0]
    assert service == service | {
        "available_memory": "${each.value.memory}",
        "available_cpu": "${each.value.cpu}",
        "timeout_seconds": "${each.value.timeout_seconds}",
        "max_instance_request_concurrency": "${each.value.concurrency}",
        "max_instance_count": "${each.value.max_instances}",
        "ingress_settings": "ALLOW_INTERNAL_ONLY",
    }
    account = resources(MODULES / "functions")["google_service_account.function"]
    assert account["account_id"] == "${each.value.service_account_id}"


def test_no_retry_or_size_is_a_number_written_in_hcl() -> None:
    keys = {"ack_deadline_seconds", "max_delivery_attempts", "minimum_backoff", "maximum_backoff",
            "timeout_seconds", "available_memory", "available_cpu", "max_instance_count",
            "max_instance_request_concurrency"}
    literal = [(str(path.relative_to(ROOT)), ".".join(keys_))
               for path in tf_files() for keys_, leaf in walk(load(path))
               if keys_ and keys_[-1] in keys and not (isinstance(leaf, str) and "${" in leaf)]
    assert not literal, f"retry/size literals in HCL: {sorted(set(literal))}"


def test_no_name_from_the_definition_is_written_in_hcl() -> None:
    doc = system()
    names = set(doc["topics"]) | {doc["push_invoker_account_id"]} | set(doc["custom_roles"])
    names.add(doc["eventarc_invoker_account_id"])
    names.add(doc["function_build_account_id"])
    for spec in accounts():
        names.add(spec["service_account_id"])
    for spec in doc["functions"].values():
        names |= {spec["subscription"], spec["trigger_topic"], spec["dead_letter_topic"]}
    names |= set(doc["scheduler_jobs"]) | set(doc["log_sinks"])
    copies = sorted({(str(path.relative_to(ROOT)), name)
                     for path, literals in literals_by_module().items()
                     for literal in literals for name in names if name in literal})
    assert not copies, f"names from system.json copied into HCL: {copies}"
    # Short names that also occur inside ordinary words: compared whole.
    whole = {doc["bigquery"]["dataset_id"], *doc["bigquery"]["tables"],
             *(v["name"] for v in doc["bigquery"]["views"]), doc["serving"]["namespace"],
             *(i["kubernetes_service_account"] for i in identities().values()),
             *(t["object_prefix"] for t in doc["storage_triggers"].values()),
             *(t["event_type"] for t in doc["storage_triggers"].values()),
             *(t["notification_event"] for t in doc["storage_triggers"].values())}
    exact = sorted({(str(path.relative_to(ROOT)), literal)
                    for path, literals in literals_by_module().items()
                    for literal in literals if literal in whole})
    assert not exact, f"names from system.json copied into HCL: {exact}"


# --- least privilege -------------------------------------------------------------------


def test_no_primitive_or_cluster_wide_container_role_anywhere() -> None:
    forbidden = PRIMITIVE_ROLES | CLUSTER_WIDE_ROLES
    found = sorted({(str(path.relative_to(ROOT)), role)
                    for path in tf_files() for role in forbidden
                    if re.search(re.escape(role) + r"(?![\w.])", path.read_text("utf-8"))})
    assert not found, found
    in_definition = [g["role"] for spec in accounts() for g in spec["grants"]
                     if g["role"] in forbidden]
    assert not in_definition


def test_role_literals_are_only_the_infrastructure_roles_where_they_belong() -> None:
    for path, literals in literals_by_module().items():
        module = path.parent.name
        for literal in literals:
            if re.fullmatch(r"roles/[\w.]+", literal):
                assert module in INFRASTRUCTURE_ROLES.get(literal, set()), (
                    f"{path.relative_to(ROOT)} writes {literal}: "
                    "the definition's roles come from system.json")


def test_the_definitions_roles_are_never_written_as_literals_where_accounts_are_granted() -> None:
    roles = {g["role"] for spec in accounts() for g in spec["grants"]}
    for module in ("functions", "services", "grants", "iam", "workload_identity"):
        for path in (MODULES / module).glob("*.tf"):
            written = roles & set(string_literals(path))
            assert not written, f"{path.relative_to(ROOT)} copies roles {written}"
    for module in ("grants", "iam"):
        for address, body in resources(MODULES / module).items():
            if "role" in body:
                assert body["role"].startswith("${"), address


def test_every_grant_scope_of_the_definition_is_bound_somewhere() -> None:
    scopes = {g["scope"] for spec in accounts() for g in spec["grants"]}
    grants_main = (MODULES / "grants" / "main.tf").read_text("utf-8")
    iam_main = (MODULES / "iam" / "main.tf").read_text("utf-8")
    # modules/iam binds the cluster scopes once per cluster its `clusters` names
    # (modules/cluster_scope's `clusters`, keyed by scope).
    (scope_locals,) = load_dir(MODULES / "cluster_scope")["locals"]
    cluster_scopes = set(scope_locals["clusters"])
    for scope in scopes:
        # A scope is bound where the module selects it: `g.scope == "topic"`, or a bucket
        # scope as a key of the module's bucket map (`config_bucket = var.config_bucket`,
        # `releases_bucket = coalesce(var.releases_bucket, ...)`).
        bound_in = [name for name, text in (("grants", grants_main), ("iam", iam_main))
                    if f'g.scope == "{scope}"' in text
                    or re.search(rf"^\s*{scope}\s*=\s*(coalesce\()?var\.{scope}\b", text,
                                 re.M)]
        if scope in cluster_scopes and "lookup(var.clusters, g.scope, [])" in iam_main:
            bound_in.append("iam")
        assert bound_in, f"grants of scope {scope!r} are bound nowhere"
    # Grants are bound for the accounts of every kind.
    for module in ("functions", "services", "workload_identity"):
        call = blocks(MODULES / module, "module")["grants"]
        assert call["source"] == "../grants"
    iam = example_module("iam")
    assert "module.functions.service_account_members" in iam["members"]
    assert "module.services.service_account_members" in iam["members"]


def test_project_level_grants_are_only_bigquery_jobs_metric_reads_and_cluster_custom_roles(
) -> None:
    # Running BigQuery jobs and reading Managed Prometheus series (reconcile_models'
    # SLO gate) exist only at project level; everything else is held to a resource.
    custom = system()["custom_roles"]
    for spec in accounts():
        for g in spec["grants"]:
            if g["scope"] == "project":
                assert g["role"] in {"roles/bigquery.jobUser", "roles/monitoring.viewer"}, g
            if g["role"] == "roles/monitoring.viewer":
                assert spec.get("entry_point") == "reconcile_models", g
            if g["role"] in custom:
                assert g["scope"] in {"cluster", "scheduled_clusters"}, g
    for role in custom.values():
        assert all(p.startswith("container.clusters.") or p.startswith("container.operations.")
                   for p in role["permissions"]), role


def test_no_custom_role_holds_a_gke_permission_the_code_never_uses() -> None:
    # shared/gke.py calls get_cluster and list_node_pools (container.clusters.get), creates,
    # resizes, sets autoscaling of and deletes node pools (container.clusters.update) and
    # gets operations (container.operations.get); it never lists operations.
    gke = (ROOT / "shared" / "gke.py").read_text("utf-8")
    assert "container_client(settings).get_operation" in gke
    assert "list_operations" not in gke
    held = {p for role in system()["custom_roles"].values() for p in role["permissions"]}
    assert held == {"container.clusters.get", "container.clusters.update",
                    "container.operations.get"}
    # Only reconcile_slices follows operations.
    following = {name for name, spec in system()["functions"].items() for g in spec["grants"]
                 if "container.operations.get" in
                 system()["custom_roles"].get(g["role"], {}).get("permissions", [])}
    assert following == {"reconcile_slices"}


def test_roles_that_can_change_a_cluster_say_so_in_their_description() -> None:
    for role in system()["custom_roles"].values():
        if "container.clusters.update" in role["permissions"]:
            assert "every other change" in role["description"], role
            assert "no other cluster change" not in role["description"], role


def test_bigquery_writes_are_granted_per_table_and_never_on_the_dataset() -> None:
    for spec in accounts():
        for g in spec["grants"]:
            if g["role"].startswith("roles/bigquery.") and g["scope"] == "dataset":
                assert g["role"] in {"roles/bigquery.dataViewer",
                                     "roles/bigquery.metadataViewer"}, g
            if g["role"] == "roles/bigquery.dataEditor":
                assert g["scope"] == "table", g
                assert g["target"] in system()["bigquery"]["tables"], g


def test_ingest_metrics_may_write_exactly_the_tables_it_inserts_into() -> None:
    from shared.config import MetricsConfig
    from shared.metrics import ingest

    metrics = MetricsConfig()
    inserted = {getattr(metrics, key) for _, key in ingest._ROUTES.values()}
    inserted.add(metrics.rejections_table)
    grants = system()["functions"]["ingest_metrics"]["grants"]
    written = {g["target"] for g in grants if g["role"] == "roles/bigquery.dataEditor"}
    assert written == inserted
    on_dataset = {g["role"] for g in grants if g["scope"] == "dataset"}
    assert on_dataset == {"roles/bigquery.metadataViewer"}, \
        "no write role on the dataset: the views budgets read stay out of its reach"
    # The grants module binds table grants on the table, with the dataset's table ids.
    table = resources(MODULES / "grants")["google_bigquery_table_iam_member.table"]
    assert table["for_each"] == "${local.table_grants}"
    assert table["table_id"] == "${var.table_ids[each.value.target]}"
    assert example_module("functions")["table_ids"] == "${module.bigquery.table_ids}"


def test_the_node_pool_roles_are_bound_on_the_project_only_with_a_condition_on_the_cluster(
) -> None:
    iam = resources(MODULES / "iam")
    conditional = iam["google_project_iam_member.cluster_grant"]
    assert conditional["for_each"] == "${local.cluster_grants}"
    assert conditional["condition"][0] == {
        "title": "${var.conditions[each.value.cluster].title}",
        "description": "${var.conditions[each.value.cluster].description}",
        "expression": "${var.conditions[each.value.cluster].expression}",
    }
    # The unconditional binding takes the "project" scope only.
    (local_block,) = load_dir(MODULES / "iam")["locals"]
    assert 'if g.scope == "project"' in local_block["project_grants"]
    node_pool_roles = {g["role"] for spec in accounts() for g in spec["grants"]
                       if "container.clusters.update" in
                       system()["custom_roles"].get(g["role"], {}).get("permissions", [])}
    assert node_pool_roles == {"accelopsNodePoolOperator", "accelopsPoolScheduler"}
    iam_call = example_module("iam")
    assert iam_call["clusters"] == "${module.cluster_scope.clusters}"
    assert iam_call["conditions"] == "${module.cluster_scope.conditions}"


def test_the_grant_on_the_node_service_account_is_made_in_that_accounts_project(
        tmp_path: Path) -> None:
    (local_block,) = load_dir(MODULES / "grants")["locals"]
    expression = local_block["node_service_account_project"].replace(
        "var.node_service_account", "local.email").replace("var.project_id", "local.project")
    assert evaluate(tmp_path, expression, email="tpu@other-proj.iam.gserviceaccount.com",
                    project="p") == "other-proj"
    assert evaluate(tmp_path, expression, email="123-compute@developer.gserviceaccount.com",
                    project="p") == "p"
    binding = resources(MODULES / "grants")[
        "google_service_account_iam_member.node_service_account"]
    assert binding["service_account_id"] == \
        "projects/${local.node_service_account_project}/serviceAccounts/${var.node_service_account}"


def test_the_node_service_account_of_the_team_config_is_the_one_granted() -> None:
    scope = example_module("cluster_scope")
    assert scope["node_service_account"] == "${try(local.config.slices.node_service_account, null)}"
    assert example_module("functions")["node_service_account"] == \
        "${module.cluster_scope.node_service_account}"
    assert "node_service_account" not in blocks(EXAMPLE, "variable"), \
        "one source: the team config the functions read"
    (local_block, *_) = load_dir(EXAMPLE)["locals"]
    assert local_block["config"] == "${yamldecode(file(local.config_file))}"
    assert example_module("buckets")["config_file"] == "${local.config_file}"


def test_publish_is_granted_on_a_topic_only() -> None:
    for spec in accounts():
        for g in spec["grants"]:
            if g["role"].startswith("roles/pubsub."):
                assert g["scope"] == "topic", g
                assert g["target"] in system()["topics"], g


def test_services_refuse_public_invokers() -> None:
    invokers = blocks(MODULES / "services", "variable")["invokers"]
    condition = invokers["validation"][0]["condition"]
    assert '"allUsers"' in condition
    assert '"allAuthenticatedUsers"' in condition
    text = "\n".join(p.read_text("utf-8") for p in (MODULES / "services").glob("*.tf"))
    assert 'member   = "allUsers"' not in text


# --- model serving: bucket events, VPC reach, workload identities ---------------------


def test_the_serving_parts_of_the_definition_are_handed_down_whole() -> None:
    events = example_module("storage_events")
    assert events["storage_triggers"] == "${local.system.storage_triggers}"
    assert events["eventarc_invoker_account_id"] == \
        "${local.system.eventarc_invoker_account_id}"
    assert events["function_services"] == "${module.functions.service_names}"
    identity = example_module("workload_identity")
    assert identity["identities"] == "${local.system.serving.workload_identities}"
    assert identity["namespaces"]["serving_namespace"] == "${local.system.serving.namespace}"
    assert system()["storage_triggers"], "deploy_model is fed by bucket events"


def test_uploads_take_eventarc_by_default_or_the_buckets_pubsub_notifications() -> None:
    route = blocks(EXAMPLE, "variable")["model_upload_route"]
    assert route["default"] == "eventarc"
    assert '"pubsub"' in route["validation"][0]["condition"]
    assert example_module("storage_events")["route"] == "${var.model_upload_route}"

    found = resources(MODULES / "storage_events")
    trigger = found["google_eventarc_trigger.trigger"]
    assert trigger["for_each"] == "${local.eventarc}"
    criteria = {c["attribute"]: c["value"] for c in trigger["matching_criteria"]}
    assert criteria == {"type": "${each.value.event_type}",
                        "bucket": "${var.buckets[each.value.bucket]}"}
    destination = trigger["destination"][0]["cloud_run_service"][0]
    assert destination["service"] == "${var.function_services[each.key]}"
    assert trigger["service_account"] == "${google_service_account.eventarc[0].email}"

    notification = found["google_storage_notification.notification"]
    assert notification["for_each"] == "${local.notifications}"
    assert notification["event_types"] == ["${each.value.notification_event}"]
    assert notification["object_name_prefix"] == "${each.value.object_prefix}"
    assert notification["topic"] == "${var.topic_ids[each.value.topic]}"
    assert notification["payload_format"] == "JSON_API_V1"
    # Notifications go to the function's own trigger topic: its push subscription
    # delivers them with the definition's retry and dead-letter policy.
    for name, spec in system()["storage_triggers"].items():
        assert spec["topic"] == system()["functions"][name]["trigger_topic"]


def test_the_eventarc_identity_may_invoke_only_the_functions_its_triggers_feed() -> None:
    found = resources(MODULES / "storage_events")
    invoker = found["google_cloud_run_v2_service_iam_member.eventarc_invoker"]
    assert invoker["for_each"] == "${local.eventarc}"
    assert invoker["name"] == "${var.function_services[each.key]}"
    project_roles = {body["role"] for address, body in found.items()
                     if address.startswith("google_project_iam_member.")}
    assert project_roles == PROJECT_LEVEL_INFRASTRUCTURE
    for address, body in found.items():
        if address.startswith("google_project_iam_member."):
            assert body["count"] == "${length(local.eventarc) > 0 ? 1 : 0}", address


def test_eventarcs_own_retry_defaults_are_replaced_by_the_definitions() -> None:
    steps = blocks(EXAMPLE, "output")["next_steps"]["value"]
    for key in ("ack_deadline_seconds", "minimum_backoff_seconds", "maximum_backoff_seconds",
                "max_delivery_attempts", "dead_letter_topic"):
        assert f"local.system.functions[name].{key}" in steps, key
    assert "module.storage_events.eventarc_subscriptions" in steps
    # ... and the Pub/Sub service agent may acknowledge what it dead-letters there.
    subscriber = resources(MODULES / "storage_events")[
        "google_pubsub_subscription_iam_member.dead_letter_subscriber"]
    assert subscriber["role"] == "roles/pubsub.subscriber"


def test_only_functions_that_call_into_the_vpc_get_the_connector() -> None:
    service = resources(MODULES / "functions")["google_cloudfunctions2_function.function"][
        "service_config"][0]
    assert service["vpc_connector"] == "${each.value.vpc_egress ? var.vpc_connector : null}"
    egress = {name for name, spec in system()["functions"].items() if spec["vpc_egress"]}
    assert egress == {"reconcile_models"}
    assert example_module("functions")["vpc_connector"] == "${var.vpc_connector}"


def test_workload_identity_binds_each_servers_kubernetes_account_to_its_google_account() -> None:
    found = resources(MODULES / "workload_identity")
    binding = found["google_service_account_iam_member.workload_identity"]
    assert binding["role"] == "roles/iam.workloadIdentityUser"
    assert binding["member"] == \
        "serviceAccount:${local.workload_pool}[${each.value.namespace}/${each.value.ksa}]"
    (local_block,) = load_dir(MODULES / "workload_identity")["locals"]
    (gke_locals,) = load_dir(MODULES / "gke")["locals"]
    assert local_block["workload_pool"] == gke_locals["workload_pool"]
    account = found["google_service_account.identity"]
    assert account["account_id"] == "${each.value.service_account_id}"
    assert set(identities()) == {"triton", "saxml", "locust"}
    servers = {name: spec for name, spec in identities().items() if name != "locust"}
    for spec in servers.values():
        assert {g["role"] for g in spec["grants"]} <= {"roles/storage.objectViewer",
                                                       "roles/storage.objectAdmin"}
        # Servers never write releases: only the Sax cell's own bucket.
        for grant in spec["grants"]:
            if grant["role"] != "roles/storage.objectViewer":
                assert grant["scope"] == "sax_bucket", grant
    # The load generator publishes its records and does nothing else; its topic grant
    # needs the topic ids, which the example passes the module for the grants module.
    assert [(g["role"], g["scope"], g["target"]) for g in identities()["locust"]["grants"]] \
        == [("roles/pubsub.publisher", "topic", "loadtest-metrics")]
    grants_call = load_dir(MODULES / "workload_identity")["module"][0]["grants"]
    assert grants_call["topic_ids"] == "${var.topic_ids}"
    assert example_module("workload_identity")["topic_ids"] == "${module.pubsub.topic_ids}"


def test_every_bucket_is_private_versioned_and_the_sax_bucket_is_where_render_looks() -> None:
    from shared.deployment.serving import sax_bucket_name

    buckets = {k: v for k, v in resources(MODULES / "buckets").items()
               if k.startswith("google_storage_bucket.")}
    assert {"google_storage_bucket.models", "google_storage_bucket.sax"} <= set(buckets)
    for address, body in buckets.items():
        assert body["uniform_bucket_level_access"] is True, address
        assert body["public_access_prevention"] == "enforced", address
        assert body["versioning"][0]["enabled"] is True, address
    (local_block,) = load_dir(MODULES / "buckets")["locals"]
    assert local_block["prefix"] == '${coalesce(var.name_prefix, "${var.project_id}-accelops")}'
    assert buckets["google_storage_bucket.sax"]["name"] == "${local.prefix}-sax"
    assert sax_bucket_name("acme-ml") == "acme-ml-accelops-sax"


def test_deploy_model_never_holds_delete_on_releases() -> None:
    grants = system()["functions"]["deploy_model"]["grants"]
    on_releases = {g["role"] for g in grants if g["scope"] == "releases_bucket"}
    assert on_releases == {"roles/storage.objectViewer", "roles/storage.objectCreator"}
    assert not any(g["role"] in {"roles/storage.objectAdmin", "roles/storage.admin",
                                 "roles/storage.objectUser"} for g in grants)


def test_eventarc_delivers_to_the_functions_service_by_name_not_its_path(
        tmp_path: Path) -> None:
    # service_config.service is projects/P/locations/L/services/S; Eventarc wants S
    # (provider >= 6.21 sends the value as given).
    (local_block,) = load_dir(MODULES / "functions")["locals"]
    expression = local_block["service_names"].replace(
        "google_cloudfunctions2_function.function", "local.functions")
    functions = {"deploy_model": {"service_config": [
        {"service": "projects/p/locations/us-central1/services/accelops-deploy-model"}]}}
    assert evaluate(tmp_path, expression, functions=functions) == \
        {"deploy_model": "accelops-deploy-model"}
    outputs = blocks(MODULES / "functions", "output")
    assert outputs["service_names"]["value"] == "${local.service_names}"
    # storage_events refuses a path outright.
    services = blocks(MODULES / "storage_events", "variable")["function_services"]
    assert 'strcontains(service, "/")' in services["validation"][0]["condition"]


def test_eventarc_triggers_wait_for_the_grants_they_rely_on() -> None:
    found = resources(MODULES / "storage_events")
    wait = found["time_sleep.grants"]
    assert wait["create_duration"] == "${var.iam_propagation}"
    assert set(wait["triggers"]) == {"event_receiver", "gcs_publisher", "invokers"}
    assert "google_project_iam_member.event_receiver" in wait["triggers"]["event_receiver"]
    assert "google_project_iam_member.gcs_publisher" in wait["triggers"]["gcs_publisher"]
    assert "eventarc_invoker" in wait["triggers"]["invokers"]
    assert found["google_eventarc_trigger.trigger"]["depends_on"] == ["${time_sleep.grants}"]


def test_every_function_is_built_as_its_own_build_identity_into_its_own_repository() -> None:
    function = resources(MODULES / "functions")["google_cloudfunctions2_function.function"]
    build = function["build_config"][0]
    assert build["service_account"] == "${var.build_service_account}"
    assert build["docker_repository"] == "${var.build_repository}"
    call = example_module("functions")
    assert call["build_service_account"] == "${module.function_build.service_account}"
    assert call["build_repository"] == "${module.function_build.repository}"
    assert example_module("function_build")["build_account_id"] == \
        "${local.system.function_build_account_id}"


def test_the_build_identity_holds_exactly_what_a_function_build_uses_each_where_it_is_used(
) -> None:
    found = resources(MODULES / "function_build")
    bindings = {address: body for address, body in found.items() if "iam_member" in address}
    assert {(address.split(".")[0], body["role"]) for address, body in bindings.items()} == {
        ("google_project_iam_member", "roles/logging.logWriter"),
        ("google_artifact_registry_repository_iam_member", "roles/artifactregistry.writer"),
        ("google_storage_bucket_iam_member", "roles/storage.objectViewer"),
    }
    images = found["google_artifact_registry_repository_iam_member.build_images"]
    assert images["repository"] == "${google_artifact_registry_repository.builds.name}"
    source = found["google_storage_bucket_iam_member.build_source"]
    assert source["bucket"] == "${var.source_bucket}"
    assert example_module("function_build")["source_bucket"] == "${module.buckets.source_bucket}"
    for body in bindings.values():
        assert body["member"] == "${google_service_account.build.member}"
    # The functions see the identity only once its grants have had time to take effect.
    wait = found["time_sleep.grants"]
    outputs = blocks(MODULES / "function_build", "output")
    assert outputs["service_account"]["value"] == '${time_sleep.grants.triggers["service_account"]}'
    assert outputs["repository"]["value"] == '${time_sleep.grants.triggers["repository"]}'
    assert {"logs", "images", "source"} <= set(wait["triggers"])


def test_cloud_run_services_set_deletion_protection_explicitly_and_can_be_destroyed() -> None:
    service = resources(MODULES / "services")["google_cloud_run_v2_service.service"]
    assert service["deletion_protection"] == "${var.deletion_protection}"
    assert blocks(MODULES / "services", "variable")["deletion_protection"]["default"] is False
