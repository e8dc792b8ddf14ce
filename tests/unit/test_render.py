from __future__ import annotations

from typing import Any

import pytest

from shared.config import AccelopsConfig
from shared.jobspec.policy import check_policy
from shared.jobspec.render import render_jobset
from shared.jobspec.request import parse_job_request


def _render(body: dict[str, Any], config: AccelopsConfig, request_id: str = "m-1"):
    return render_jobset(check_policy(parse_job_request(body), config), request_id)


def _pod(jobset: dict[str, Any]) -> dict[str, Any]:
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def test_a_multi_slice_request_becomes_one_replicated_job_with_a_replica_per_slice(
    request_body, config
):
    jobset = _render(request_body, config)
    assert jobset["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    [replicated] = jobset["spec"]["replicatedJobs"]
    assert replicated["replicas"] == 2
    job = replicated["template"]["spec"]
    assert job["parallelism"] == job["completions"] == 4
    assert job["completionMode"] == "Indexed"


@pytest.mark.parametrize(
    ("tpu_type", "accelerator", "topology", "vms", "chips"),
    [
        ("v5litepod-16", "tpu-v5-lite-podslice", "4x4", 4, "4"),
        ("v5litepod-8", "tpu-v5-lite-podslice", "2x4", 1, "8"),
        ("v4-32", "tpu-v4-podslice", "2x2x4", 4, "4"),
        ("v5p-128", "tpu-v5p-slice", "4x4x4", 16, "4"),
        ("v6e-1", "tpu-v6e-slice", "1x1", 1, "1"),
    ],
)
def test_pods_follow_gke_tpu_conventions(request_body, config, tpu_type, accelerator,
                                         topology, vms, chips):
    request_body.update(team="open", tpu={"type": tpu_type, "slices": 1})
    jobset = _render(request_body, config)
    job = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]
    pod = _pod(jobset)
    assert job["parallelism"] == vms
    assert pod["nodeSelector"]["cloud.google.com/gke-tpu-accelerator"] == accelerator
    assert pod["nodeSelector"]["cloud.google.com/gke-tpu-topology"] == topology
    resources = pod["containers"][0]["resources"]
    assert resources["limits"] == resources["requests"] == {"google.com/tpu": chips}


def test_the_jobset_is_queued_in_the_team_namespace_and_local_queue(request_body, config):
    jobset = _render(request_body, config, request_id="req-42")
    meta = jobset["metadata"]
    assert meta["namespace"] == "research"
    assert meta["labels"]["kueue.x-k8s.io/queue-name"] == "research-queue"
    assert meta["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"] == (
        "cloud.google.com/gke-nodepool")
    assert meta["annotations"]["accelops.dev/request-id"] == "req-42"
    assert jobset["spec"]["suspend"] is True
    assert jobset["spec"]["failurePolicy"]["maxRestarts"] == 1


def test_a_disrupted_host_fails_its_job_by_pod_failure_policy_and_restarts_the_jobset_uncounted(
    request_body, config
):
    jobset = _render(request_body, config)
    job = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]

    assert job["backoffLimit"] == 0
    assert job["podFailurePolicy"] == {"rules": [{
        "action": "FailJob",
        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}
    assert _pod(jobset)["restartPolicy"] == "Never"  # the Job API's condition for the policy
    assert jobset["spec"]["failurePolicy"] == {
        "maxRestarts": 1,
        "rules": [{"name": "restartOnHostDisruption",
                   "action": "RestartJobSetAndIgnoreMaxRestarts",
                   "onJobFailureReasons": ["PodFailurePolicy"]}]}


def test_the_failure_policy_rule_passes_the_jobset_webhooks_name_and_reason_checks(
    request_body, config
):
    # jobset v0.7.2 pkg/webhooks/jobset_webhook.go: ruleNameFmt, validOnJobFailureReasons.
    import re

    valid_reasons = {"BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes",
                     "MaxFailedIndexesExceeded", "PodFailurePolicy"}
    [rule] = _render(request_body, config)["spec"]["failurePolicy"]["rules"]

    assert re.fullmatch(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?", rule["name"])
    assert 1 <= len(rule["name"]) <= 128
    assert set(rule["onJobFailureReasons"]) <= valid_reasons
    assert rule["action"] in {"FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"}


def test_pods_restarted_in_place_get_no_pod_failure_policy_which_the_job_api_would_refuse(
    request_body, config
):
    jobset = render_jobset(check_policy(parse_job_request(request_body), config), "m-1",
                           restart_policy="OnFailure")
    job = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]

    assert _pod(jobset)["restartPolicy"] == "OnFailure"
    assert "podFailurePolicy" not in job
    assert jobset["spec"]["failurePolicy"] == {"maxRestarts": 1}


def test_the_container_carries_only_what_the_request_allows(request_body, config):
    container = _pod(_render(request_body, config))["containers"][0]
    assert container["image"] == request_body["image"]
    assert container["command"] == ["python", "train.py"]
    assert container["args"] == ["--steps=1000"]
    assert container["env"] == [{"name": "WANDB_MODE", "value": "offline"}]
    assert container["securityContext"]["privileged"] is False
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert "volumeMounts" not in container


def test_the_pod_never_gets_a_service_account_host_access_or_volumes(request_body, config):
    pod = _pod(_render(request_body, config))
    for forbidden in ("serviceAccountName", "hostNetwork", "hostPID", "hostIPC", "volumes"):
        assert forbidden not in pod
    assert pod["automountServiceAccountToken"] is False


def test_rendering_is_deterministic(request_body, config):
    assert _render(request_body, config) == _render(request_body, config)


def test_pods_are_pinned_to_the_pools_provisioned_for_their_jobset(request_body, config):
    jobset = _render(request_body, config)
    selector = _pod(jobset)["nodeSelector"]
    assert selector["accelops.dev/jobset"] == jobset["metadata"]["name"]
    assert selector["accelops.dev/jobset-namespace"] == "research"


def test_without_slice_provisioning_pods_are_not_pinned(request_body):
    from shared.config import parse_config
    from tests.unit.conftest import CONFIG_YAML

    config = parse_config(CONFIG_YAML + "slices:\n  enabled: false\n")
    selector = _pod(_render(request_body, config))["nodeSelector"]
    assert "accelops.dev/jobset" not in selector


@pytest.mark.parametrize(
    ("tpu", "defaults", "expected"),
    [
        ({}, "", "on-demand"),
        ({}, "slices:\n  spot: true\n", "spot"),
        ({}, "slices:\n  reservation: tpu-res\n", "reservation/tpu-res"),
        ({"spot": False}, "slices:\n  spot: true\n", "on-demand"),
        ({"reservation": "mine"}, "slices:\n  spot: true\n", "reservation/mine"),
    ],
)
def test_capacity_comes_from_the_request_else_the_configuration(request_body, tpu, defaults,
                                                                 expected):
    from shared.config import parse_config
    from tests.unit.conftest import CONFIG_YAML

    request_body["tpu"].update(tpu)
    jobset = _render(request_body, parse_config(CONFIG_YAML + defaults))
    assert jobset["metadata"]["annotations"]["accelops.dev/capacity"] == expected
