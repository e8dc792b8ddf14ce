"""Installing Kueue and JobSet on the sandbox Kubernetes API, as on a new cluster.

Custom kinds are served only once their CRDs are applied; the controllers' webhooks
refuse every write they intercept until the controller Deployments are ready, with
kube-apiserver's error; ``kubectl wait`` and a server-side dry run tell when they
answer. Driven by the real kubectl and the kubernetes client over sockets.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from sandbox.kubeapi import install_crds, start_kube_api
from sandbox.kubeapi.crdfiles import CRD_DIRECTORY, load_crd
from sandbox.supervisor.provision import KubectlError, install_controllers, wait_for_controllers
from tests.e2e.admission_fixtures import KUEUE, ControllersCluster, cluster_queue
from tests.e2e.kubeapi_auth_fixtures import KUBECTL, needs_kubectl

pytestmark = [pytest.mark.e2e, needs_kubectl]

WEBHOOK_DOWN = (
    'Internal error occurred: failed calling webhook "mclusterqueue.kb.io": failed to call '
    'webhook: Post "https://kueue-webhook-service.kueue-system.svc:443/mutate-kueue-x-k8s-io-'
    'v1beta1-clusterqueue?timeout=10s": no endpoints available for service '
    '"kueue-webhook-service"')


def kubectl(kubeconfig: Path, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    done = subprocess.run([KUBECTL, f"--kubeconfig={kubeconfig}",
                           f"--cache-dir={kubeconfig.parent / 'kubectl-cache'}", *args],
                          capture_output=True, text=True, timeout=60, check=False,
                          stdin=subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed:\n{done.stderr}")
    return done


def write(path: Path, *documents: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump_all(list(documents), sort_keys=False))
    return path


@pytest.fixture
def bare(tmp_path: Path) -> Iterator[ControllersCluster]:
    """A new cluster: nothing of Kueue or JobSet installed yet."""
    cluster = ControllersCluster(tmp_path, install=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def installed(tmp_path: Path) -> Iterator[ControllersCluster]:
    """Kueue and JobSet installed, their controllers not started yet."""
    cluster = ControllersCluster(tmp_path)
    try:
        yield cluster
    finally:
        cluster.stop()


# ---------------------------------------------------------------- CRD registration

def test_a_custom_resource_without_its_crd_is_404_with_the_not_found_handlers_body(
        bare: ControllersCluster) -> None:
    with pytest.raises(client.ApiException) as caught:
        bare.create_cluster_object("clusterqueues", cluster_queue("research"))

    assert caught.value.status == 404
    assert caught.value.body == "404 page not found\n"


def test_kubectl_finds_no_matches_for_a_kind_whose_crd_is_not_installed(
        bare: ControllersCluster, tmp_path: Path) -> None:
    manifest = write(tmp_path / "queue.yaml", cluster_queue("research"))

    done = kubectl(bare.kubeconfig, "apply", "--server-side", "-f", str(manifest))

    assert done.returncode != 0
    assert ('no matches for kind "ClusterQueue" in version "kueue.x-k8s.io/v1beta1"'
            in done.stderr)
    assert "ensure CRDs are installed first" in done.stderr


def test_discovery_lists_kueue_kinds_only_once_their_crds_are_installed(
        bare: ControllersCluster) -> None:
    def kueue_resources() -> str:
        return kubectl(bare.kubeconfig, "api-resources", "--api-group=kueue.x-k8s.io",
                       "-o", "name", check=True).stdout

    before = kueue_resources()
    install_crds(bare.store, [CRD_DIRECTORY / "kueue.x-k8s.io_clusterqueues.yaml"])

    assert before == ""
    assert kueue_resources().split() == ["clusterqueues.kueue.x-k8s.io"]


def test_a_crd_serves_its_kind_with_the_scope_and_short_names_it_declares(
        bare: ControllersCluster) -> None:
    install_crds(bare.store, [CRD_DIRECTORY / "kueue.x-k8s.io_localqueues.yaml"])
    bare.namespace()

    resources = client.CustomObjectsApi(bare.api).get_api_resources(*KUEUE).resources
    local = next(r for r in resources if r.name == "localqueues")

    assert (local.kind, local.namespaced) == ("LocalQueue", True)
    assert set(local.short_names) == {"queue", "queues", "lq"}


def test_a_crd_not_named_plural_dot_group_is_refused_as_apiextensions_refuses_it(
        bare: ControllersCluster) -> None:
    crd = load_crd(CRD_DIRECTORY / "kueue.x-k8s.io_clusterqueues.yaml")
    crd["metadata"]["name"] = "queues.kueue.x-k8s.io"

    with pytest.raises(client.ApiException) as caught:
        client.ApiextensionsV1Api(bare.api).create_custom_resource_definition(crd)

    body = json.loads(caught.value.body)
    assert caught.value.status == 422
    assert body["message"] == (
        'CustomResourceDefinition.apiextensions.k8s.io "queues.kueue.x-k8s.io" is invalid: '
        'metadata.name: Invalid value: "queues.kueue.x-k8s.io": must be '
        'spec.names.plural+"."+spec.group')


def test_a_crd_created_through_the_api_is_established(bare: ControllersCluster) -> None:
    crd = load_crd(CRD_DIRECTORY / "kueue.x-k8s.io_resourceflavors.yaml")

    created = client.ApiextensionsV1Api(bare.api).create_custom_resource_definition(crd)

    conditions = {c.type: c.status for c in created.status.conditions}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert created.status.stored_versions == ["v1beta1"]


def test_deleting_a_crd_deletes_its_custom_resources(installed: ControllersCluster) -> None:
    installed.start_controllers()
    installed.namespace()
    installed.custom.create_namespaced_custom_object(*KUEUE, "research", "localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
        "metadata": {"name": "research-queue"}, "spec": {"clusterQueue": "research"}})

    client.ApiextensionsV1Api(installed.api).delete_custom_resource_definition(
        "localqueues.kueue.x-k8s.io")

    assert installed.store.list("kueue.x-k8s.io", "localqueues") == []
    with pytest.raises(client.ApiException) as caught:
        installed.custom.list_namespaced_custom_object(*KUEUE, "research", "localqueues")
    assert caught.value.status == 404


# ---------------------------------------------------------------- webhook readiness

def test_a_cluster_queue_applied_before_the_controllers_are_ready_is_refused_then_accepted(
        bare: ControllersCluster, tmp_path: Path) -> None:
    install_controllers(bare.kubeconfig, tmp_path / "controllers")
    bare.managers.hold()
    bare.managers.reconcile()
    manifest = write(tmp_path / "queue.yaml", cluster_queue("research"))

    refused = kubectl(bare.kubeconfig, "apply", "--server-side", "-f", str(manifest))
    bare.managers.release()
    bare.start_controllers()
    accepted = kubectl(bare.kubeconfig, "apply", "--server-side", "-f", str(manifest))

    assert refused.returncode != 0
    assert f"Error from server (InternalError): {WEBHOOK_DOWN}" in refused.stderr
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stdout.strip() == "clusterqueue.kueue.x-k8s.io/research serverside-applied"


def test_the_client_gets_a_500_internal_error_naming_the_webhook_and_its_service(
        installed: ControllersCluster) -> None:
    with pytest.raises(client.ApiException) as caught:
        installed.create_cluster_object("clusterqueues", cluster_queue("research"))

    body = json.loads(caught.value.body)
    assert caught.value.status == 500
    assert (body["reason"], body["message"]) == ("InternalError", WEBHOOK_DOWN)
    assert body["details"]["causes"] == [
        {"message": WEBHOOK_DOWN.removeprefix("Internal error occurred: ")}]


def test_an_update_the_validating_webhook_intercepts_fails_while_it_has_no_endpoints(
        installed: ControllersCluster) -> None:
    installed.start_controllers()
    created = installed.create_cluster_object("clusterqueues", cluster_queue("research"))
    installed.store.delete("", "endpoints", "kueue-webhook-service", "kueue-system")

    created["spec"]["cohort"] = "all"
    with pytest.raises(client.ApiException) as caught:
        installed.custom.replace_cluster_custom_object(*KUEUE, "clusterqueues", "research",
                                                      created)

    message = json.loads(caught.value.body)["message"]
    assert caught.value.status == 500
    assert message.startswith('Internal error occurred: failed calling webhook '
                              '"vclusterqueue.kb.io": failed to call webhook: Post ')
    assert message.endswith('/validate-kueue-x-k8s-io-v1beta1-clusterqueue?timeout=10s": no '
                            'endpoints available for service "kueue-webhook-service"')


def test_a_webhook_service_that_does_not_exist_fails_the_call_with_service_not_found(
        installed: ControllersCluster) -> None:
    installed.start_controllers()
    installed.store.delete("", "services", "kueue-webhook-service", "kueue-system")

    with pytest.raises(client.ApiException) as caught:
        installed.create_cluster_object("clusterqueues", cluster_queue("research"))

    assert caught.value.status == 500
    assert json.loads(caught.value.body)["message"].endswith(
        'mutate-kueue-x-k8s-io-v1beta1-clusterqueue?timeout=10s": service '
        '"kueue-webhook-service" not found')


def test_a_webhook_that_ignores_failures_is_skipped_while_it_does_not_answer(
        installed: ControllersCluster) -> None:
    for kind, name in (("mutatingwebhookconfigurations", "kueue-mutating-webhook-configuration"),
                       ("validatingwebhookconfigurations",
                        "kueue-validating-webhook-configuration")):
        configuration = installed.store.get("admissionregistration.k8s.io", kind, name)
        for hook in configuration["webhooks"]:
            hook["failurePolicy"] = "Ignore"
        installed.store.replace("admissionregistration.k8s.io", kind, configuration)

    created = installed.create_cluster_object("clusterqueues", cluster_queue("research"))

    assert "finalizers" not in created["metadata"]  # the defaulting webhook was not called


def test_objects_no_webhook_intercepts_are_written_while_the_controllers_start(
        installed: ControllersCluster) -> None:
    installed.namespace()
    installed.custom.create_namespaced_custom_object(*KUEUE, "research", "localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
        "metadata": {"name": "research-queue"}, "spec": {"clusterQueue": "research"}})

    assert installed.store.try_get("kueue.x-k8s.io", "localqueues", "research-queue",
                                   "research") is not None


def test_kubectl_wait_returns_once_the_controller_deployments_are_available(
        bare: ControllersCluster, tmp_path: Path) -> None:
    install_controllers(bare.kubeconfig, tmp_path / "controllers")
    bare.managers.hold()
    bare.managers.reconcile()
    assert KUBECTL is not None
    waiting = subprocess.Popen(
        [KUBECTL, f"--kubeconfig={bare.kubeconfig}", "wait", "--for=condition=Available",
         "--timeout=30s", "-n", "kueue-system", "deployment/kueue-controller-manager"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        unready = kubectl(bare.kubeconfig, "wait", "--for=condition=Available", "--timeout=0",
                          "-n", "kueue-system", "deployment/kueue-controller-manager")
        bare.managers.release()
        bare.start_controllers()
        out, err = waiting.communicate(timeout=40)
    finally:
        waiting.kill()

    assert unready.returncode != 0
    assert waiting.returncode == 0, err
    assert out.strip() == "deployment.apps/kueue-controller-manager condition met"
    assert "Failed to watch" not in err


def test_the_controller_deployments_report_their_start_in_their_status(
        installed: ControllersCluster) -> None:
    apps = client.AppsV1Api(installed.api)
    before = apps.read_namespaced_deployment_status("jobset-controller-manager", "jobset-system")
    installed.start_controllers()
    after = apps.read_namespaced_deployment_status("jobset-controller-manager", "jobset-system")

    def available(deployment: Any) -> tuple[str, str]:
        condition = next(c for c in deployment.status.conditions if c.type == "Available")
        return condition.status, condition.reason

    assert available(before) == ("False", "MinimumReplicasUnavailable")
    assert before.status.unavailable_replicas == 1
    assert available(after) == ("True", "MinimumReplicasAvailable")
    assert (after.status.ready_replicas, after.status.available_replicas) == (1, 1)


# ---------------------------------------------------------------- dry run

def test_a_server_side_dry_run_apply_runs_the_webhooks_and_stores_nothing(
        installed: ControllersCluster, tmp_path: Path) -> None:
    installed.start_controllers()
    manifest = write(tmp_path / "queue.yaml", cluster_queue("research"))

    done = kubectl(installed.kubeconfig, "apply", "--server-side", "--dry-run=server",
                   "-f", str(manifest), "-o", "json", check=True)
    shown = json.loads(done.stdout)
    after = kubectl(installed.kubeconfig, "get", "clusterqueue", "research")

    assert shown["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    assert "resourceVersion" not in shown["metadata"]
    assert after.returncode != 0
    assert 'clusterqueues.kueue.x-k8s.io "research" not found' in after.stderr


def test_a_dry_run_is_refused_like_the_write_while_the_webhooks_do_not_answer(
        installed: ControllersCluster) -> None:
    with pytest.raises(client.ApiException) as caught:
        installed.create_cluster_object("clusterqueues", cluster_queue("research"),
                                        dry_run="All")

    assert caught.value.status == 500
    assert "no endpoints available for service" in caught.value.body


def test_a_dry_run_update_answers_the_object_as_it_would_be_and_changes_nothing(
        installed: ControllersCluster) -> None:
    installed.start_controllers()
    created = installed.create_cluster_object("clusterqueues", cluster_queue("research"))

    created["spec"]["cohort"] = "all"
    answered = installed.custom.replace_cluster_custom_object(
        *KUEUE, "clusterqueues", "research", created, dry_run="All")
    stored = installed.custom.get_cluster_custom_object(*KUEUE, "clusterqueues", "research")

    assert answered["spec"]["cohort"] == "all"
    assert answered["metadata"]["generation"] == 2
    assert "cohort" not in stored["spec"]
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_a_dry_run_delete_keeps_the_object(installed: ControllersCluster) -> None:
    installed.start_controllers()
    installed.create_cluster_object("clusterqueues", cluster_queue("research"))

    installed.custom.delete_cluster_custom_object(*KUEUE, "clusterqueues", "research",
                                                  dry_run="All")

    stored = installed.custom.get_cluster_custom_object(*KUEUE, "clusterqueues", "research")
    assert "deletionTimestamp" not in stored["metadata"]


def test_a_dry_run_value_other_than_all_is_refused(installed: ControllersCluster) -> None:
    with pytest.raises(client.ApiException) as caught:
        installed.create_cluster_object("clusterqueues", cluster_queue("research"),
                                        dry_run="Some")

    assert caught.value.status == 422
    assert json.loads(caught.value.body)["message"] == (
        'dryRun: Unsupported value: []string{"Some"}: supported values: "All"')


# ---------------------------------------------------------------- the sandbox's wait

def test_the_wait_for_the_controllers_says_what_it_waits_for_and_how_long_it_took(
        bare: ControllersCluster, tmp_path: Path) -> None:
    install_controllers(bare.kubeconfig, tmp_path / "controllers")
    bare.start_controllers()
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    write(overlay / "queue.yaml", cluster_queue("research"))
    (overlay / "kustomization.yaml").write_text("resources: [queue.yaml]\n")
    lines: list[str] = []

    wait_for_controllers(bare.kubeconfig, overlay, timeout=30, progress=lines.append)

    assert lines[0].startswith("waiting up to 30s for the Kueue and JobSet controllers "
                               "(Deployments kueue-system/kueue-controller-manager, "
                               "jobset-system/jobset-controller-manager Available)")
    assert lines[-1].startswith("webhooks answer after ")
    assert bare.store.try_get("kueue.x-k8s.io", "clusterqueues", "research") is None


def test_the_wait_gives_up_after_its_timeout_saying_what_to_do(
        bare: ControllersCluster, tmp_path: Path) -> None:
    install_controllers(bare.kubeconfig, tmp_path / "controllers")
    bare.managers.hold()
    bare.managers.reconcile()

    with pytest.raises(KubectlError) as caught:
        wait_for_controllers(bare.kubeconfig, None, timeout=1)

    message = str(caught.value)
    assert "did not become Available within 1s" in message
    assert "accelops sandbox down" in message
    assert "`accelops sandbox up --start-timeout 600` (or ACCELOPS_SANDBOX_START_TIMEOUT" in message


def test_a_bare_api_server_serves_no_kueue_group() -> None:
    server = start_kube_api()
    try:
        api = client.ApiClient(client.Configuration(host=server.url))
        groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    finally:
        server.stop()

    assert "kueue.x-k8s.io" not in groups
    assert "jobset.x-k8s.io" not in groups
    assert "apps" in groups


def deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {"metadata": {"name": name}, "spec": {
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels},
                     "spec": {"containers": [{"name": "main", "image": "busybox"}]}}}}


def test_kueues_deployment_webhook_skips_kube_system_and_kueue_system_by_namespace_label(
        installed: ControllersCluster) -> None:
    apps = client.AppsV1Api(installed.api)
    installed.namespace("kube-system")
    team = installed.namespace("research")

    apps.create_namespaced_deployment("kube-system", deployment("dns"))
    with pytest.raises(client.ApiException) as caught:
        apps.create_namespaced_deployment(team, deployment("triton"))

    namespace = installed.core.read_namespace(team)
    assert namespace.metadata.labels == {"kubernetes.io/metadata.name": "research"}
    assert caught.value.status == 500
    assert 'failed calling webhook "mdeployment.kb.io"' in json.loads(
        caught.value.body)["message"]
