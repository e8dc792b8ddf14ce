"""`accelops doctor` against a running sandbox: silent when the deployment matches the
definition, and one problem with its fix for each thing broken on purpose."""

from __future__ import annotations

import contextlib
import io
import urllib.request
from pathlib import Path

import pytest
from google.cloud import pubsub_v1

from sandbox.topology import PROJECT
from shared.bigquery import client as bigquery_client
from shared.cli import main
from shared.deployment import system
from shared.deployment.manifests import identity
from shared.kube import GATEWAYS, Resource, get_client, reset_client

pytestmark = pytest.mark.e2e

REQUESTS = Path(__file__).resolve().parents[2] / "sandbox" / "requests"

SANDBOX_PARTS = {"jobs", "reports"}


def doctor(sandbox) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["doctor", "--state-dir", str(sandbox.state_dir)])
    return code, out.getvalue()


def test_a_sandbox_provisioned_from_the_definition_has_no_problems(sandbox):
    code, report = doctor(sandbox)

    assert code == 0, report
    assert "no problems found" in report
    assert "submit_job (accelops-submit-job@accelops-local.iam.gserviceaccount.com) may do " \
           "what it needs and nothing more" in report
    assert "jobs_api (accelops-jobs-api@accelops-local.iam.gserviceaccount.com) may do " \
           "what it needs and nothing more" in report
    assert "subscription job-requests-submit-job delivers to submit_job" in report
    assert "LocalQueue research/research-queue exists" in report
    assert "Gateway serving/models is programmed at http://127.0.0.1:" in report


def test_each_function_did_only_what_its_identity_is_granted_and_used_every_rule(sandbox):
    """The functions run as their own users under RBAC: a job submitted and reconciled
    needs no request the definition does not grant, and each rule is exercised."""
    import json

    from google.cloud import pubsub_v1 as pubsub

    from shared.config import Topics, load_config
    from shared.deployment.access import Probe, allowed_by_definition
    from shared.kube import EVENTS, JOBSETS
    from tests.e2e.conftest import wait_for

    # The first pool ends in ERROR (a stockout), so reconcile_slices also reports a
    # failed create on the JobSet (annotation and Event) before creating it again.
    request = urllib.request.Request(f"{sandbox.gke_url}/sandbox/v1/pool-error", data=b"{}",
                                     method="POST", headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=10).close()
    publisher = pubsub.PublisherClient()
    data = (REQUESTS / "gemma-v4.json").read_bytes()
    publisher.publish(publisher.topic_path(PROJECT, Topics().job_requests), data).result(30)
    reset_client()
    kube = get_client()
    assert wait_for(lambda: kube.list(JOBSETS), timeout=60)
    assert wait_for(lambda: kube.find(Resource("", "v1", "configmaps"), "accelops-slices",
                                      "accelops-system"), timeout=60)
    assert wait_for(lambda: [e for e in kube.list(EVENTS, "research")
                             if e.get("reason") == "SliceCreateFailed"], timeout=60)

    config = load_config(str(sandbox.config))
    lines = [json.loads(line) for line in sandbox.access.access_log.read_text().splitlines()]
    # The functions of this sandbox's parts (the serving part's have their own test).
    ran = {f.target for f in sandbox.functions}
    for spec in system.FUNCTIONS:
        user = identity(spec, PROJECT)
        mine = [line for line in lines if line["user"] == user]
        if spec.name not in ran or not spec.kube_rules:
            assert mine == []
            continue
        assert mine, spec.name
        refused = [line for line in mine if not line["allowed"]]
        assert refused == []
        for line in mine:
            probe = Probe(line["verb"], line["apiGroup"], line["resource"],
                          line["namespace"], line["name"] or "")
            assert allowed_by_definition(spec, probe, config), line
        used = {(line["apiGroup"], line["resource"]) for line in mine}
        for rule in spec.kube_rules:
            assert {(rule.api_group, r) for r in rule.resources} & used, rule


def test_each_thing_broken_on_purpose_is_reported_with_its_fix(sandbox):
    reset_client()
    kube = get_client()
    kube.delete(Resource("kueue.x-k8s.io", "v1beta1", "localqueues"), "research-queue",
                "research")
    kube.create(Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings",
                         namespaced=False), {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "too-generous"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "accelops-reconcile-slices"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                      "name": identity(system.function("submit_job"), PROJECT)}]})
    subscriber = pubsub_v1.SubscriberClient()
    try:
        subscriber.delete_subscription(subscription=subscriber.subscription_path(
            PROJECT, system.function("submit_job").subscription))
    finally:
        subscriber.close()
    bigquery_client(PROJECT).delete_table(f"{PROJECT}.loadtest.rejections")
    kube.merge_patch(Resource("kueue.x-k8s.io", "v1beta1", "clusterqueues", namespaced=False),
                     "inference-cluster-queue", None,
                     {"spec": {"preemption": {"withinClusterQueue": "Never"}}})
    kube.delete(GATEWAYS, "models", "serving")

    code, report = doctor(sandbox)

    assert code == 1
    problems = [line.strip() for line in report.splitlines() if "PROBLEM" in line]
    assert "PROBLEM  LocalQueue research/research-queue is missing" in problems
    assert "PROBLEM  subscription job-requests-submit-job is missing" in problems
    assert "PROBLEM  table loadtest.rejections is missing" in problems
    assert ("PROBLEM  ClusterQueue inference-cluster-queue preempts within the queue Never, "
            "not LowerPriority: higher priorities will not preempt") in problems
    assert any("accelops-submit-job@accelops-local.iam.gserviceaccount.com may list pods "
               "cluster-wide, which submit_job does not need" in p for p in problems)
    assert "PROBLEM  Gateway serving/models is missing" in problems
    assert "fix: kubectl apply --server-side -k" in report
    assert "fix: terraform apply (modules/pubsub)" in report
