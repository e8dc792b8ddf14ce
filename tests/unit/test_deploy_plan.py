"""`accelops deploy up|down` as plans (shared/deployment/up.py, down.py, steps.py): the
order a first deployment needs, the commands with their values, the Terraform names
and outputs they rely on, the shell script `--plan` prints, and where a rerun
resumes. Pure: nothing runs here (tests/functional/test_deploy_runner.py runs plans,
tests/e2e/test_deploy_up_sandbox.py the Kubernetes half on the sandbox)."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace

import pytest

from shared.deployment import system
from shared.deployment.down import BUCKETS, MANAGED_POOLS_FILTER, down_plan
from shared.deployment.steps import Join, Output, Plan, Step, fingerprint, script, start_index
from shared.deployment.up import (
    CONTROLLERS,
    WEBHOOKS_NOT_READY,
    Kubernetes,
    Site,
    sandbox_plan,
    up_plan,
)
from shared.errors import ConfigError
from tests.unit.test_terraform_modules import EXAMPLE, blocks, load

K8S = Kubernetes(".deploy/acme-ml/kubeconfig", ".deploy/acme-ml/overlay")
SITE = Site(
    project="acme-ml", config="terraform/envs/example/accelops.yaml",
    terraform_config="accelops.yaml", terraform_dir="terraform/envs/example",
    work_dir=".deploy/acme-ml", state_bucket="acme-ml-tfstate", state_location="US",
    kubernetes=K8S, revision="89015a3", auto_approve=True)
NAMESPACES = ["research", "open-team", "research"]

# What kube-apiserver answers while a webhook's pod is not ready (failurePolicy: Fail),
# and kubectl while a CRD is not established yet.
NO_ENDPOINTS = (
    'Error from server (InternalError): error when creating "overlay": Internal error '
    'occurred: failed calling webhook "vclusterqueue.kb.io": failed to call webhook: Post '
    '"https://kueue-webhook-service.kueue-system.svc:443/validate-kueue-x-k8s-io-v1beta1-'
    'clusterqueue?timeout=10s": no endpoints available for service "kueue-webhook-service"')
NO_CRD = ('error: resource mapping not found for name: "research-cluster-queue" namespace: '
          '"" from "overlay": no matches for kind "ClusterQueue" in version '
          '"kueue.x-k8s.io/v1beta1"\nensure CRDs are installed first')
NAMESPACE_NOT_YET = ('Error from server (NotFound): error when creating "overlay": '
                     'namespaces "research" not found')


def names(plan: Plan) -> list[str]:
    return plan.names()


def step(plan: Plan, name: str) -> Step:
    (found,) = [s for s in plan.steps if s.name == name]
    return found


def words(s: Step) -> list[str]:
    return [a for a in s.argv if isinstance(a, str)]


def test_nothing_is_pushed_into_a_repository_or_bucket_before_the_apply_that_creates_it():
    order = names(up_plan(SITE))
    assert order[:4] == ["state-bucket", "state-versioning", "init", "foundation"]
    pushes = [n for n in order if n.startswith("image-")]
    assert [f"image-{s.name}" for s in system.SERVICES] == pushes
    assert all(order.index("foundation") < order.index(n) < order.index("apply")
               for n in pushes)


def test_the_first_apply_targets_the_apis_the_image_repository_and_the_buckets():
    foundation = words(step(up_plan(SITE), "foundation"))
    targets = {w.removeprefix("-target=") for w in foundation if w.startswith("-target=")}
    assert targets == {"module.project_services", "module.artifact_registry",
                       "module.buckets"}
    # ... which are the names the example composes them under.
    modules = blocks(EXAMPLE, "module")
    assert {"project_services", "artifact_registry", "buckets"} <= modules.keys()


def test_every_terraform_output_a_step_reads_is_declared_with_those_keys():
    declared = blocks(EXAMPLE, "output")
    plans = [up_plan(SITE), up_plan(replace(SITE, builder="docker")),
             down_plan(SITE, NAMESPACES)]
    read = {ref for plan in plans for s in plan.steps for ref in s.outputs()}
    assert {ref.name for ref in read} <= declared.keys()
    for ref in read:
        value = declared[ref.name]["value"]
        if ref.name == "images":
            assert value == "${local.images}"
        elif ref.keys and ref.name != "topic_ids":
            assert ref.keys[0] in value, ref.label
    assert {ref.label for ref in read} >= {"buckets.function_source", "buckets.sax",
                                           "cluster.name", "cluster.location",
                                           "model_uploads.subscriptions.deploy_model"}


def test_images_are_built_from_each_services_dockerfile_by_cloud_build_unless_pushed():
    plan = up_plan(SITE)
    for service in system.SERVICES:
        build = step(plan, f"image-{service.name}")
        assert words(build)[:4] == ["gcloud", "builds", "submit", "--project=acme-ml"]
        assert "--config=services/cloudbuild.yaml" in build.argv
        (subs,) = [a for a in build.argv if isinstance(a, Join)]
        assert subs.parts == (f"_SERVICE={service.name},_REVISION=89015a3,_IMAGE=",
                              Output("images", (service.name,)))
        assert build.skip is not None
        assert build.skip.done_when == "succeeds"
        assert build.skip.argv[-1] == Output("images", (service.name,))


def test_cloud_build_builds_the_named_service_from_the_repository_root():
    import yaml

    from shared.deployment.cli import repo_root

    build = yaml.safe_load((repo_root() / "services" / "cloudbuild.yaml").read_text())
    (docker,) = build["steps"]
    assert docker["args"][:3] == ["build", "-f", "services/${_SERVICE}/Dockerfile"]
    assert docker["args"][-3:] == ["-t", "${_IMAGE}", "."]
    assert build["images"] == ["${_IMAGE}"]
    for service in system.SERVICES:
        assert (repo_root() / "services" / service.name / "Dockerfile").is_file()


def test_a_local_docker_logs_in_to_the_registry_then_builds_and_pushes_each_image():
    plan = up_plan(replace(SITE, builder="docker"))
    auth = step(plan, "registry-auth")
    assert auth.argv[:3] == ("gcloud", "auth", "configure-docker")
    assert auth.argv[3] == Output("image_repository", host=True)
    for service in system.SERVICES:
        build, push = step(plan, f"image-{service.name}"), step(plan, f"push-{service.name}")
        assert build.argv[:4] == ("docker", "build", "-f",
                                  f"services/{service.name}/Dockerfile")
        assert push.argv == ("docker", "push", Output("images", (service.name,)))
        assert names(plan).index(build.name) + 1 == names(plan).index(push.name)


def test_every_apply_and_destroy_names_the_project_and_config():
    up, down = up_plan(SITE), down_plan(SITE, NAMESPACES)
    expected = {"-var=project_id=acme-ml", "-var=config_file=accelops.yaml"}
    for s in (step(up, "foundation"), step(up, "apply"), step(down, "unprotect"),
              step(down, "destroy")):
        assert s.argv[:2] == ("terraform", "-chdir=terraform/envs/example")
        assert expected <= set(words(s)), s.name
        assert {"-input=false", "-auto-approve"} <= set(words(s))


def test_without_auto_approve_terraform_asks_before_it_applies_or_destroys():
    site = replace(SITE, auto_approve=False)
    changes = [s for plan in (up_plan(site), down_plan(site, NAMESPACES)) for s in plan.steps
               if s.argv[0] == "terraform" and {"apply", "destroy"} & set(s.argv)]
    assert [s.name for s in changes] == ["foundation", "apply", "unprotect", "destroy"]
    for s in changes:
        assert "-auto-approve" not in s.argv, s.name
        assert "-input=false" not in s.argv, s.name


def test_the_functions_source_is_built_by_terraform_in_the_full_apply_not_by_a_step():
    plan = up_plan(SITE)
    assert not [n for n in names(plan) if n.startswith("source-")]
    # modules/function_source builds the archive from the repository at plan time.
    assert "function_source" in blocks(EXAMPLE, "module")


def test_the_controllers_are_available_and_their_webhooks_answer_before_the_overlay():
    order = names(up_plan(SITE))
    assert order.index("apply") < order.index("credentials") < order.index("controllers")
    assert (order.index("controllers") < order.index("kueue-ready")
            < order.index("jobset-ready") < order.index("webhooks") < order.index("overlay"))
    assert order.index("overlay-render") < order.index("webhooks")
    assert order[-1] == "doctor"
    # The load generator's master and workers run the image its step built.
    assert order.index("image-loadgen") < order.index("overlay-render")
    render = step(up_plan(SITE), "overlay-render").argv
    assert render[render.index("--locust-image") + 1] == Output("images", ("loadgen",))
    # down renders what up applied, the load generator included, to delete it.
    render = step(down_plan(SITE, NAMESPACES), "overlay-render").argv
    assert render[render.index("--locust-image") + 1] == Output("images", ("loadgen",))
    plan = up_plan(SITE)
    for name, namespace, deployment in CONTROLLERS:
        assert step(plan, f"{name}-ready").argv == (
            "kubectl", "wait", "--for=condition=Available", "--timeout=300s",
            f"deployment/{deployment}", "-n", namespace)
    webhooks = step(plan, "webhooks")
    assert webhooks.argv == ("kubectl", "apply", "--server-side", "--dry-run=server", "-k",
                             K8S.overlay)
    assert webhooks.repeat is not None
    assert webhooks.repeat.attempts * \
        webhooks.repeat.interval_seconds == 300


def test_the_webhook_wait_repeats_on_webhook_and_crd_errors_only():
    pattern = re.compile(WEBHOOKS_NOT_READY)
    assert pattern.search(NO_ENDPOINTS)
    assert pattern.search(NO_CRD)
    assert not pattern.search(NAMESPACE_NOT_YET)
    assert not pattern.search('clusterqueue.kueue.x-k8s.io/research-cluster-queue '
                              'serverside-applied (server dry run)')


def test_every_kubernetes_step_uses_the_deployments_own_kubeconfig():
    for plan in (up_plan(SITE), down_plan(SITE, NAMESPACES)):
        for s in plan.steps:
            if s.argv[0] == "kubectl" or s.name in {"credentials", "doctor", "release-slices"}:
                assert ("KUBECONFIG", K8S.kubeconfig) in s.env, s.name


def test_eventarcs_subscription_gets_the_definitions_retry_policy_when_there_is_one():
    spec = system.function("deploy_model")
    eventarc = step(up_plan(SITE), "eventarc-deploy_model")
    r = spec.retry
    assert eventarc.argv[4] == Output("model_uploads", ("subscriptions", "deploy_model"))
    assert {f"--ack-deadline={r.ack_deadline_seconds}",
            f"--min-retry-delay={r.minimum_backoff_seconds}s",
            f"--max-retry-delay={r.maximum_backoff_seconds}s",
            f"--max-delivery-attempts={r.max_delivery_attempts}"} <= set(words(eventarc))
    assert Join(("--dead-letter-topic=", Output("topic_ids", (spec.dead_letter_topic,)))) \
        in eventarc.argv
    # On the pubsub route Terraform outputs no such subscription: nothing to do.
    assert eventarc.optional
    assert [f.name for f in system.FUNCTIONS if f.storage_trigger] == ["deploy_model"]


def test_terraforms_next_steps_wait_for_the_same_controllers_and_webhook_errors():
    outputs = load(EXAMPLE / "outputs.tf")
    text = repr(outputs)
    (locals_block,) = [b for b in outputs.get("locals", [])]
    assert locals_block["webhooks_not_ready"] == WEBHOOKS_NOT_READY
    for _, namespace, deployment in CONTROLLERS:
        assert f"deployment/{deployment} -n {namespace}" in text
    steps = blocks(EXAMPLE, "output")["next_steps"]["value"]
    assert steps.index("manifests/controllers") < steps.index("kubectl wait") \
        < steps.index("--dry-run=server") < steps.index("kubectl apply --server-side -k overlay")
    assert "accelops deploy up" in steps


def test_the_sandbox_plan_is_the_kubernetes_half_checked_with_the_sandbox_doctor():
    plan = sandbox_plan("/tmp/sb", "/tmp/sb/config.yaml", "accelops-local", K8S)
    assert names(plan) == ["kueue-ready", "jobset-ready", "overlay-render", "webhooks",
                           "overlay", "doctor"]
    assert plan.terraform_dir is None
    assert not [r for s in plan.steps for r in s.outputs()]
    assert step(plan, "doctor").argv == ("accelops", "doctor", "--state-dir", "/tmp/sb")
    assert step(plan, "overlay-render").argv == (
        "accelops", "manifests", "render", "--config", "/tmp/sb/config.yaml", "--project",
        "accelops-local", "--locust-image", "loadgen", "--out", K8S.overlay)


def test_down_removes_jobsets_and_their_pools_then_the_overlay_then_the_data_then_terraform():
    order = names(down_plan(SITE, NAMESPACES))
    assert order == [
        "init", "credentials", "jobsets-open-team", "jobsets-research", "release-slices",
        "slices-gone", "overlay-render", "overlay-delete", "unprotect",
        *(f"empty-{b}" for b in BUCKETS), "destroy"]
    assert "controllers-delete" in names(down_plan(SITE, NAMESPACES, controllers=True))


def test_down_waits_until_no_pool_accelops_created_is_left():
    plan = down_plan(SITE, NAMESPACES)
    cleanup = step(plan, "release-slices")
    assert cleanup.argv == ("accelops", "slices", "reconcile", "--cleanup-only")
    assert dict(cleanup.env)["ACCELOPS_CLUSTER"] == Output("cluster", ("name",))
    gone = step(plan, "slices-gone")
    assert f"--filter={MANAGED_POOLS_FILTER}" in gone.argv
    assert MANAGED_POOLS_FILTER == 'config.labels."accelops.dev/managed-by"=accelops'
    assert gone.repeat is not None
    assert re.search(gone.repeat.pattern, "tpu-pool-1 RUNNING")
    assert not re.search(gone.repeat.pattern, "")


def test_down_empties_only_the_buckets_terraform_created_and_lifts_table_protection():
    plan = down_plan(SITE, NAMESPACES)
    assert set(BUCKETS) == {"config", "function_source", "models", "sax"}
    for bucket in BUCKETS:
        empty = step(plan, f"empty-{bucket}")
        assert empty.argv[:4] == ("gcloud", "storage", "rm", "--all-versions")
        assert empty.skip is not None
        assert empty.skip.done_when == "fails"
    assert "-var=deletion_protection=false" in step(plan, "unprotect").argv
    assert "-target=module.bigquery" in step(plan, "unprotect").argv


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash checks the script's syntax")
@pytest.mark.parametrize("plan", [up_plan(SITE), up_plan(replace(SITE, builder="docker")),
                                  down_plan(SITE, NAMESPACES)],
                         ids=["up", "up-docker", "down"])
def test_the_printed_plan_is_a_script_bash_can_run(plan):
    text = script(plan)
    done = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True,
                          timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert text.count("\n# [") == len(plan.steps)
    assert "terraform -chdir=terraform/envs/example output" in text


def test_the_printed_plan_reads_outputs_the_way_a_person_would():
    text = script(up_plan(replace(SITE, builder="docker")))
    assert ('gcloud auth configure-docker "$(terraform -chdir=terraform/envs/example output '
            '-raw image_repository | cut -d/ -f1)" --quiet') in text
    # A key that is not an identifier is quoted for jq.
    assert """output -json topic_ids | jq -r '.["model-uploads-dead-letter"]'""" in script(
        up_plan(SITE))


# ----------------------------------------------------------------------- resuming
def test_a_rerun_starts_at_the_first_step_not_recorded_as_completed():
    plan = up_plan(SITE)
    done = {s.name: fingerprint(s) for s in plan.steps[:5]}
    assert start_index(plan, done) == 5
    assert start_index(plan, {}) == 0
    assert start_index(plan, {s.name: fingerprint(s) for s in plan.steps}) == len(plan.steps)


def test_a_step_that_would_run_something_else_now_runs_again():
    before = up_plan(SITE)
    done = {s.name: fingerprint(s) for s in before.steps}
    changed = up_plan(replace(SITE, terraform_config="other-teams.yaml"))
    # The foundation apply passes the other config file, so the run resumes there.
    assert names(changed)[start_index(changed, done)] == "foundation"


def test_from_and_restart_override_the_record_and_an_unknown_step_is_named():
    plan = up_plan(SITE)
    done = {s.name: fingerprint(s) for s in plan.steps}
    assert start_index(plan, done, from_step="credentials") == names(plan).index("credentials")
    assert start_index(plan, done, restart=True) == 0
    with pytest.raises(ConfigError, match="no step 'kueue' in deploy up; its steps: "
                                          "state-bucket, state-versioning, init"):
        start_index(plan, done, from_step="kueue")


def test_the_controllers_kustomization_says_to_wait_for_the_deployments_up_waits_for():
    from shared.deployment.cli import repo_root
    from shared.deployment.up import CONTROLLERS_DIR

    text = (repo_root() / CONTROLLERS_DIR / "kustomization.yaml").read_text()
    # The releases whose config/default name these Deployments (namePrefix + namespace).
    assert "kueue/releases/download/v0.10.1/manifests.yaml" in text
    assert "jobset/releases/download/v0.7.2/manifests.yaml" in text
    for _, namespace, deployment in CONTROLLERS:
        assert f"deployment/{deployment} -n {namespace}" in text
    assert "--dry-run=server" in text
