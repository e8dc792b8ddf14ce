"""manifests/: every directory builds with the real kustomize (kubectl kustomize),
built-in kinds validate strictly against Kubernetes 1.32, and a rendered overlay
gives every configured team its namespace and queues and every function its roles."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from shared.config import load_config, parse_config
from shared.deployment import system
from shared.deployment.access import Probe, allowed_by_definition, probes
from shared.deployment.cli import repo_root, write_files
from shared.deployment.manifests import identity, overlay_files
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


@pytest.fixture(scope="module")
def overlay(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("overlay")
    write_files(out, overlay_files(load_config(str(SANDBOX_CONFIG)), "acme-ml", out, REPO),
                check=False)
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
    done = subprocess.run([str(Path(shutil.which("kubernetes-validate") or
                                    REPO / ".venv/bin/kubernetes-validate")),
                           "--strict", "-k", "1.32.0", str(built)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert {o["kind"] for o in builtin} >= {"Namespace", "ClusterRole", "Role",
                                             "ClusterRoleBinding", "RoleBinding"}


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


def test_each_function_identity_is_bound_to_its_roles_by_its_email(overlay):
    objects = kustomize(overlay)
    subjects = {s["name"] for o in objects if o["kind"].endswith("Binding")
                for s in o["subjects"]}
    assert subjects == {identity(f, "acme-ml") for f in system.FUNCTIONS if f.kube_rules}
    assert "accelops-submit-job@acme-ml.iam.gserviceaccount.com" in subjects


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
