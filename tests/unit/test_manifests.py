"""manifests/: every directory builds with the real kustomize (kubectl kustomize),
built-in kinds validate strictly against Kubernetes 1.32, and a rendered overlay
gives every configured team its namespace and queues, the model servers their
namespace, accounts and Sax cell, and every function its roles."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from shared.cli import main as cli_main
from shared.config import MAX_TEAM_NAME, ServingConfig, Topics, load_config, parse_config
from shared.deployment import system
from shared.deployment.access import Probe, allowed_by_definition, probes
from shared.deployment.cli import repo_root, write_files
from shared.deployment.locust import (
    LOCUST_MASTER,
    LOCUST_WORKER,
    MASTER_PORT,
    WEB_PORT,
    LocustSite,
)
from shared.deployment.manifests import cluster_queue_name, identity, overlay_files
from shared.deployment.serving import (
    ADMIN_PORT,
    PROXY_PORT,
    SAXML_ADMIN,
    SAXML_CONFIG_MAP,
    SAXML_PROXY,
    SaxmlSite,
)
from shared.errors import ConfigError

REPO = repo_root()
SANDBOX_CONFIG = REPO / "sandbox" / "config.yaml"
KUBECTL = shutil.which("kubectl")
# Needs the network to fetch the pinned upstream releases: not built here.
REMOTE = {"controllers"}


def kustomize(directory: Path) -> list[dict]:
    assert KUBECTL, "kubectl (with kustomize) is installed on these machines"
    done = subprocess.run([KUBECTL, "kustomize", str(directory)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


LOCUST = LocustSite("example.com/loadgen:7", "triton", "toy-lm")


@pytest.fixture(scope="module")
def overlay(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("overlay")
    write_files(out, overlay_files(load_config(str(SANDBOX_CONFIG)), "acme-ml", out, REPO,
                                   locust=LOCUST), check=False)
    return out


def _kustomizations() -> list[Path]:
    return sorted(p.parent for p in (REPO / "manifests").rglob("kustomization.yaml")
                  if p.parent.name not in REMOTE)


@pytest.mark.parametrize("directory", _kustomizations(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_committed_kustomization_builds_offline(directory):
    assert kustomize(directory)


def test_a_rendered_overlay_builds_and_its_builtin_kinds_validate_strictly(overlay, tmp_path):
    objects = kustomize(overlay)
    builtin = [o for o in objects if "." not in o["apiVersion"].split("/")[0]
               or o["apiVersion"].startswith("rbac.authorization.k8s.io")]
    built = tmp_path / "builtin.yaml"
    built.write_text(yaml.safe_dump_all(builtin))
    # The tests' own environment's script: a worktree has no .venv of its own.
    done = subprocess.run([str(Path(shutil.which("kubernetes-validate") or
                                    Path(sys.executable).parent / "kubernetes-validate")),
                           "--strict", "-k", "1.32.0", str(built)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert {o["kind"] for o in builtin} >= {"Namespace", "ClusterRole", "Role",
                                             "ClusterRoleBinding", "RoleBinding",
                                             "ServiceAccount", "ConfigMap", "Deployment",
                                             "Service"}


def test_each_team_gets_a_namespace_with_pod_security_and_its_queues(overlay):
    objects = kustomize(overlay)
    config = load_config(str(SANDBOX_CONFIG))
    by_kind: dict[str, dict[str, dict]] = {}
    for o in objects:
        by_kind.setdefault(o["kind"], {})[o["metadata"]["name"]] = o
    flavors = set(by_kind["ResourceFlavor"])
    for team in config.teams.values():
        labels = by_kind["Namespace"][team.namespace]["metadata"]["labels"]
        assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
        local = by_kind["LocalQueue"][team.queue]
        assert local["metadata"]["namespace"] == team.namespace
        queue = by_kind["ClusterQueue"][local["spec"]["clusterQueue"]]
        [group] = queue["spec"]["resourceGroups"]
        assert group["coveredResources"] == ["google.com/tpu"]
        assert {f["name"] for f in group["flavors"]} <= flavors
        assert {r["nominalQuota"] for f in group["flavors"] for r in f["resources"]} == {
            team.tpu_chips}


def test_each_team_queue_admits_its_own_namespace_and_preempts_lower_priorities(overlay):
    objects = kustomize(overlay)
    config = load_config(str(SANDBOX_CONFIG))
    queues = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterQueue"}
    namespaces = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Namespace"}
    for name, team in config.teams.items():
        spec = queues[f"{name}-cluster-queue"]["spec"]
        # The CRD defaults withinClusterQueue to Never, under which nothing preempts.
        assert spec["preemption"] == {"withinClusterQueue": "LowerPriority"}
        selected = spec["namespaceSelector"]["matchLabels"]
        labels = namespaces[team.namespace]["metadata"]["labels"]
        assert selected.items() <= labels.items()
        others = [t.namespace for other, t in config.teams.items() if other != name]
        assert all(not selected.items() <= namespaces[ns]["metadata"]["labels"].items()
                   for ns in others)


def test_each_function_and_service_identity_is_bound_to_its_roles_by_its_email(overlay):
    objects = kustomize(overlay)
    subjects = {s["name"] for o in objects if o["kind"].endswith("Binding")
                for s in o["subjects"]}
    assert subjects == {identity(f, "acme-ml")
                        for f in (*system.FUNCTIONS, *system.SERVICES) if f.kube_rules}
    assert "accelops-submit-job@acme-ml.iam.gserviceaccount.com" in subjects
    assert "accelops-jobs-api@acme-ml.iam.gserviceaccount.com" in subjects


def test_the_jobs_api_reads_logs_and_deletes_jobsets_in_team_namespaces_only(overlay):
    objects = kustomize(overlay)
    user = "accelops-jobs-api@acme-ml.iam.gserviceaccount.com"
    bound = {(o["kind"], o["metadata"].get("namespace"), o["roleRef"]["name"])
             for o in objects if o["kind"].endswith("Binding")
             for s in o["subjects"] if s["name"] == user}
    roles = {o["metadata"]["name"]: o["rules"] for o in objects
             if o["kind"] in ("ClusterRole", "Role")}
    team_wide = {role for kind, namespace, role in bound if kind == "RoleBinding"
                 and namespace in ("research", "inference")}
    cluster_wide = {role for kind, _, role in bound if kind == "ClusterRoleBinding"}
    assert team_wide == {"accelops-jobs-api-team"}
    assert {r for rule in roles["accelops-jobs-api-team"] for r in rule["resources"]} == {
        "jobsets", "pods/log"}
    cluster_verbs = {(r, v) for role in cluster_wide for rule in roles[role]
                     for r in rule["resources"] for v in rule["verbs"]}
    assert ("pods/log", "get") not in cluster_verbs
    assert ("jobsets", "delete") not in cluster_verbs


def test_rendering_for_a_state_namespace_the_base_does_not_create_is_refused(tmp_path):
    config = parse_config("slices:\n  state_namespace: elsewhere\n", "test")
    with pytest.raises(ConfigError, match="state_namespace"):
        overlay_files(config, "acme-ml", tmp_path, REPO)


def test_submit_job_may_create_jobsets_only_in_team_namespaces_and_list_them_everywhere():
    config = load_config(str(SANDBOX_CONFIG))
    submit = system.function("submit_job")
    jobsets = ("jobset.x-k8s.io", "jobsets")

    assert allowed_by_definition(submit, Probe("create", *jobsets, "research"), config)
    assert not allowed_by_definition(submit, Probe("create", *jobsets, "accelops-system"), config)
    assert not allowed_by_definition(submit, Probe("create", *jobsets, ""), config)
    assert allowed_by_definition(submit, Probe("list", *jobsets, "inference"), config)
    assert not allowed_by_definition(submit, Probe("delete", *jobsets, "research"), config)


def test_reconcile_slices_may_read_and_update_only_its_own_configmap():
    config = load_config(str(SANDBOX_CONFIG))
    reconcile = system.function("reconcile_slices")
    named = Probe("update", "", "configmaps", "accelops-system", "accelops-slices")

    assert allowed_by_definition(reconcile, named, config)
    assert not allowed_by_definition(
        reconcile, Probe("update", "", "configmaps", "accelops-system", "other"), config)
    assert not allowed_by_definition(
        reconcile, Probe("get", "", "configmaps", "accelops-system"), config)
    assert named in probes(reconcile, config)


# --- model serving -------------------------------------------------------------------

SAXML_CONFIG = """
teams:
  research: {namespace: research, queue: research-queue}
  inference: {namespace: inference, queue: inference-queue}
serving:
  saxml_team: inference
"""


def _render(tmp_path, config, site=None) -> list[dict]:
    out = tmp_path / "overlay"
    write_files(out, overlay_files(config, "acme-ml", out, REPO, site), check=False)
    return kustomize(out)


def _by_kind(objects: list[dict]) -> dict[str, dict[tuple[str, str], dict]]:
    found: dict[str, dict[tuple[str, str], dict]] = {}
    for o in objects:
        meta = o["metadata"]
        found.setdefault(o["kind"], {})[(meta.get("namespace", ""), meta["name"])] = o
    return found


def test_the_model_servers_accounts_act_as_the_google_accounts_terraform_creates(overlay):
    accounts = _by_kind(kustomize(overlay))["ServiceAccount"]
    for spec in system.WORKLOAD_IDENTITIES:
        account = accounts[("serving", spec.kubernetes_service_account)]
        assert account["metadata"]["annotations"]["iam.gke.io/gcp-service-account"] == \
            f"{spec.service_account}@acme-ml.iam.gserviceaccount.com"
    # The sandbox's config names a Saxml team: its namespace gets the account too.
    assert set(accounts) == {("serving", "triton"), ("serving", "saxml"),
                             ("inference", "saxml"), ("serving", "locust")}


def test_the_sax_cell_keeps_its_state_in_the_sax_bucket_and_its_proxy_is_internal(tmp_path):
    site = SaxmlSite("acme-sax", "example.com/admin:1", "example.com/http:1")
    found = _by_kind(_render(tmp_path, load_config(str(SANDBOX_CONFIG)), site))
    cell = found["ConfigMap"][("serving", SAXML_CONFIG_MAP)]["data"]
    assert cell["SAX_ROOT"] == "gs://acme-sax/sax-root"
    assert cell["GSBUCKET"] == "acme-sax"
    assert cell["SAX_CELL"] == ServingConfig().saxml_cell
    admin = found["Deployment"][("serving", SAXML_ADMIN)]["spec"]
    proxy = found["Deployment"][("serving", SAXML_PROXY)]["spec"]
    assert admin["strategy"]["type"] == "Recreate", "never two admin servers on one root"
    for spec, image, port in ((admin, "example.com/admin:1", ADMIN_PORT),
                              (proxy, "example.com/http:1", PROXY_PORT)):
        pod = spec["template"]["spec"]
        assert pod["serviceAccountName"] == "saxml"
        [container] = pod["containers"]
        assert container["image"] == image
        assert container["ports"][0]["containerPort"] == port
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
    service = found["Service"][("serving", SAXML_PROXY)]
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["metadata"]["annotations"] == {
        "networking.gke.io/load-balancer-type": "Internal"}
    assert service["spec"]["ports"][0]["port"] == PROXY_PORT
    assert found["Service"][("serving", SAXML_ADMIN)]["spec"].get("type") is None


# --- the load generator on GKE ------------------------------------------------------

def test_the_locust_master_and_workers_run_the_loadgen_image_beside_the_model_servers(overlay):
    found = _by_kind(kustomize(overlay))
    config = load_config(str(SANDBOX_CONFIG))
    master = found["Deployment"][("serving", LOCUST_MASTER)]["spec"]
    worker = found["Deployment"][("serving", LOCUST_WORKER)]["spec"]
    assert master["replicas"] == 1
    assert master["strategy"]["type"] == "Recreate", "never two masters splitting workers"
    assert worker["replicas"] == config.serving.locust_workers
    pods = {name: spec["template"]["spec"] for name, spec in
            (("master", master), ("worker", worker))}
    for pod in pods.values():
        assert pod["serviceAccountName"] == config.serving.locust_service_account
        assert pod["automountServiceAccountToken"] is False
        [container] = pod["containers"]
        assert container["image"] == LOCUST.image
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env == {"GOOGLE_CLOUD_PROJECT": "acme-ml", "LOADGEN_SERVER": "triton",
                       "LOADGEN_MODEL": "toy-lm"}
        assert container["securityContext"]["runAsNonRoot"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
    [master_container] = pods["master"]["containers"]
    [worker_container] = pods["worker"]["containers"]
    assert master_container["args"][0] == "--master"
    assert "--headless" not in master_container["args"], "tests start from POST /swarm"
    assert worker_container["args"] == ["--worker", "--master-host", LOCUST_MASTER,
                                        "--master-port", str(MASTER_PORT)]
    # The workers find the master through its Service, which also serves the web UI
    # inside the cluster only.
    service = found["Service"][("serving", LOCUST_MASTER)]["spec"]
    assert service["type"] == "ClusterIP"
    assert {(p["port"], p["targetPort"]) for p in service["ports"]} == {
        (MASTER_PORT, MASTER_PORT), (WEB_PORT, WEB_PORT)}
    master_labels = master["template"]["metadata"]["labels"]
    assert all(master_labels[k] == v for k, v in service["selector"].items())
    worker_labels = worker["template"]["metadata"]["labels"]
    assert not all(worker_labels.get(k) == v for k, v in service["selector"].items())


def test_the_load_generator_may_only_publish_its_records_and_not_touch_the_cluster(overlay):
    objects = kustomize(overlay)
    account = load_config(str(SANDBOX_CONFIG)).serving.locust_service_account
    bound = [o["metadata"]["name"] for o in objects if o["kind"].endswith("RoleBinding")
             and any(s.get("name") == account for s in o.get("subjects") or [])]
    assert bound == []
    [spec] = [i for i in system.WORKLOAD_IDENTITIES if i.kubernetes_service_account == account]
    assert [(g.role, g.scope, g.target) for g in spec.grants] == [
        ("roles/pubsub.publisher", "topic", Topics().loadtest_metrics)]


def test_without_the_load_generators_image_the_overlay_has_no_locust(tmp_path):
    found = _by_kind(_render(tmp_path, load_config(str(SANDBOX_CONFIG))))
    assert ("serving", LOCUST_MASTER) not in found["Deployment"]
    assert ("serving", LOCUST_WORKER) not in found["Deployment"]


def test_the_saxml_team_gets_the_saxml_account_and_the_functions_rolebindings(tmp_path):
    found = _by_kind(_render(tmp_path, parse_config(SAXML_CONFIG, "test")))
    assert ("inference", "saxml") in found["ServiceAccount"]
    assert ("research", "saxml") not in found["ServiceAccount"]
    saxml_bindings = {key for key in found["RoleBinding"] if key[1].endswith("-saxml")}
    assert saxml_bindings == {("inference", "accelops-deploy-model-saxml"),
                              ("inference", "accelops-reconcile-models-saxml")}
    serving_bindings = {key for key in found["RoleBinding"] if key[1].endswith("-serving")}
    assert serving_bindings == {("serving", "accelops-deploy-model-serving"),
                                ("serving", "accelops-reconcile-models-serving")}


def test_without_a_saxml_team_no_function_may_touch_jobsets_for_saxml(tmp_path):
    config = parse_config(SAXML_CONFIG.replace("saxml_team: inference", "{}")
                          .replace("serving:\n  {}", "serving: {}"), "test")
    assert config.serving.saxml_team is None
    found = _by_kind(_render(tmp_path, config))
    assert not any(name.endswith("-saxml") for _, name in found["RoleBinding"])
    deploy = system.function("deploy_model")
    for team in config.teams.values():
        assert not allowed_by_definition(
            deploy, Probe("create", "jobset.x-k8s.io", "jobsets", team.namespace), config)


def test_deploy_model_applies_only_in_the_serving_namespace_and_jobsets_only_for_saxml():
    config = parse_config(SAXML_CONFIG, "test")
    deploy = system.function("deploy_model")
    reconcile = system.function("reconcile_models")
    deployments = ("apps", "deployments")

    for verb in ("get", "create", "patch"):
        assert allowed_by_definition(deploy, Probe(verb, *deployments, "serving"), config)
    assert not allowed_by_definition(deploy, Probe("delete", *deployments, "serving"), config)
    assert not allowed_by_definition(deploy, Probe("patch", *deployments, "research"), config)
    assert not allowed_by_definition(deploy, Probe("patch", *deployments, ""), config)
    jobsets = ("jobset.x-k8s.io", "jobsets")
    assert allowed_by_definition(deploy, Probe("create", *jobsets, "inference"), config)
    assert not allowed_by_definition(deploy, Probe("create", *jobsets, "research"), config)
    assert not allowed_by_definition(deploy, Probe("create", *jobsets, "serving"), config)
    assert not allowed_by_definition(deploy, Probe("delete", *jobsets, "inference"), config)
    assert allowed_by_definition(reconcile, Probe("delete", *jobsets, "inference"), config)
    # A serving Saxml version's lost model servers are created again, in their namespace only.
    assert allowed_by_definition(reconcile, Probe("create", *jobsets, "inference"), config)
    assert not allowed_by_definition(reconcile, Probe("create", *jobsets, "research"), config)
    assert not allowed_by_definition(reconcile, Probe("create", *jobsets, "serving"), config)
    # reconcile_models deletes retired releases' Deployments, in the serving namespace only.
    assert allowed_by_definition(reconcile, Probe("delete", *deployments, "serving"), config)
    assert not allowed_by_definition(reconcile, Probe("delete", *deployments, "research"),
                                     config)
    assert not allowed_by_definition(deploy, Probe("get", "", "secrets", "serving"), config)
    assert "serving" in {p.namespace for p in probes(deploy, config)}


@pytest.mark.parametrize(("text", "field"), [
    ("serving: {namespace: models}\n", "serving.namespace"),
    ("serving: {triton_service_account: tri}\n", "serving.triton_service_account"),
    ("serving: {saxml_team: nobody}\n", "serving.saxml_team"),
    ("teams: {a: {namespace: serving, queue: q}}\n", "serving.namespace"),
])
def test_a_serving_config_the_definition_cannot_deploy_is_refused(tmp_path, text, field):
    with pytest.raises(ConfigError) as caught:
        overlay_files(parse_config(text, "test"), "acme-ml", tmp_path, REPO)
    assert caught.value.field == field


def test_the_longest_team_name_gives_a_cluster_queue_name_local_queues_may_refer_to():
    # The LocalQueue CRD (Kueue v0.10.1) checks spec.clusterQueue against this pattern;
    # a label value (accelops.dev/team) is at most 63 characters.
    pattern = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    name = cluster_queue_name("a" * MAX_TEAM_NAME)
    assert pattern.match(name)
    assert len(name) <= 63


def test_rendering_a_config_with_a_team_name_kubernetes_refuses_fails_naming_the_key(
        tmp_path, capsys):
    config = tmp_path / "accelops.yaml"
    config.write_text("teams:\n  ml_research: {namespace: ml-research, queue: q}\n")
    code = cli_main(["manifests", "render", "--config", str(config), "--project", "p",
                     "--out", str(tmp_path / "overlay")])
    assert code != 0
    err = capsys.readouterr().err
    assert "teams.ml_research" in err
    assert not (tmp_path / "overlay").exists()
