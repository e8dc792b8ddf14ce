"""How the sandbox's Job and JobSet controllers handle failures, as kubernetes v1.32's
Job controller and jobset v0.7.2's controller do: podFailurePolicy, backoffLimit under
OnFailure, FailureTarget before Failed, and JobSet failurePolicy rules.

The controllers run on an in-process ObjectStore; pods are moved along by patching
their status, the way a kubelet reports it, so each rule is seen in isolation.
"""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.cluster.failurepolicy import decide_failure
from sandbox.cluster.jobs import JobController
from sandbox.cluster.jobset import JobSetController
from sandbox.cluster.podfailure import match_pod_failure_policy, past_backoff_limit_on_failure
from sandbox.common.clock import SimClock
from sandbox.kubeapi import ApiError, ObjectStore
from tests.unit import test_sandbox_cluster as cluster_tests
from tests.unit.test_sandbox_cluster import NAMESPACE

JOBS = ("batch", "jobs")
JOBSETS = ("jobset.x-k8s.io", "jobsets")
DISRUPTION_RULE: dict[str, Any] = {
    "action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}


# test_sandbox_cluster.py's fixtures: a clock that moves only when a test advances it,
# a store with the team's namespace.
clock, store = cluster_tests.clock, cluster_tests.store


@pytest.fixture
def jobs(store: ObjectStore, clock: SimClock) -> JobController:
    return JobController(store, clock)


def job_body(name: str, *, completions: int = 2, backoff_limit: int = 0,
             restart_policy: str = "Never",
             rules: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "parallelism": completions, "completions": completions, "completionMode": "Indexed",
        "backoffLimit": backoff_limit,
        "template": {"spec": {"restartPolicy": restart_policy, "containers": [
            {"name": "main", "image": "us-docker.pkg.dev/acme/train:1"}]}},
    }
    if rules is not None:
        spec["podFailurePolicy"] = {"rules": rules}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}


def pods_of(store: ObjectStore, job: str) -> list[dict[str, Any]]:
    return sorted(store.list("", "pods", NAMESPACE,
                             label_selector=f"batch.kubernetes.io/job-name={job}"),
                  key=lambda p: p["metadata"]["name"])


def get_job(store: ObjectStore, name: str) -> dict[str, Any]:
    return store.get(*JOBS, name, NAMESPACE)


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c["type"] == kind and c["status"] == "True"), None)


def set_status(store: ObjectStore, pod: dict[str, Any], status: dict[str, Any]) -> None:
    store.patch("", "pods", pod["metadata"]["name"], {"status": status},
                namespace=NAMESPACE, subresource="status")


def run(store: ObjectStore, pod: dict[str, Any], restarts: int = 0) -> None:
    set_status(store, pod, {"phase": "Running", "containerStatuses": [{
        "name": "main", "ready": True, "restartCount": restarts,
        "state": {"running": {"startedAt": "2026-11-21T08:00:00Z"}}}]})


def fail(store: ObjectStore, pod: dict[str, Any], *, exit_code: int = 1,
         disrupted: bool = False) -> None:
    conditions = [{"type": "DisruptionTarget", "status": "True",
                   "reason": "TerminationByKubelet",
                   "message": "Pod was terminated in response to imminent node shutdown."}] \
        if disrupted else []
    set_status(store, pod, {"phase": "Failed", "conditions": conditions,
                            "containerStatuses": [{"name": "main", "restartCount": 0,
                                                   "state": {"terminated": {
                                                       "exitCode": exit_code,
                                                       "reason": "Error"}}}]})


def started(store: ObjectStore, jobs: JobController, body: dict[str, Any]) -> list[Any]:
    store.create(*JOBS, body)
    jobs.reconcile()
    created = pods_of(store, body["metadata"]["name"])
    for pod in created:
        run(store, pod)
    return created


# ----------------------------------------------------------------------------- Job: policy


def test_a_pod_failed_by_a_disruption_fails_its_job_by_pod_failure_policy(store, jobs):
    first, second = started(store, jobs, job_body("slice-0", rules=[DISRUPTION_RULE]))
    fail(store, first, exit_code=143, disrupted=True)

    jobs.reconcile()

    job = get_job(store, "slice-0")
    target = condition(job, "FailureTarget")
    assert target is not None
    assert target["reason"] == "PodFailurePolicy"
    assert target["message"] == (f"Pod research/{first['metadata']['name']} has condition "
                                 f"DisruptionTarget matching FailJob rule at index 0")
    assert condition(job, "Failed") is None, "Failed waits until no pod is terminating"
    assert [p["metadata"]["name"] for p in pods_of(store, "slice-0")] \
        == [first["metadata"]["name"]], "the other, active pod is deleted"

    jobs.reconcile()

    failed = condition(get_job(store, "slice-0"), "Failed")
    assert failed is not None
    assert (failed["reason"], failed["message"]) == (target["reason"], target["message"])
    event = [e for e in store.list("", "events", NAMESPACE)
             if e["involvedObject"]["name"] == "slice-0"]
    assert [(e["type"], e["reason"], e["message"]) for e in event] \
        == [("Warning", "PodFailurePolicy", target["message"])]
    assert second["metadata"]["name"] not in {p["metadata"]["name"]
                                              for p in pods_of(store, "slice-0")}


def test_an_exit_code_rule_names_the_container_and_its_code(store, jobs):
    rules = [{"action": "FailJob",
              "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}]
    pod, _ = started(store, jobs, job_body("exits", rules=rules, backoff_limit=6))
    fail(store, pod, exit_code=42)

    jobs.reconcile()

    target = condition(get_job(store, "exits"), "FailureTarget")
    assert target is not None
    assert target["message"] == (f"Container main for pod research/{pod['metadata']['name']} "
                                 f"failed with exit code 42 matching FailJob rule at index 0")


def test_a_pod_failure_an_ignore_rule_matches_does_not_count_and_the_pod_is_replaced(
    store, jobs
):
    rules = [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
    pod, _ = started(store, jobs, job_body("ignored", rules=rules, backoff_limit=0))
    fail(store, pod, disrupted=True)

    jobs.reconcile()

    job = get_job(store, "ignored")
    assert condition(job, "FailureTarget") is None
    assert condition(job, "Failed") is None
    assert job["status"]["failed"] == 0
    index0 = [p for p in pods_of(store, "ignored")
              if p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "0"]
    assert len(index0) == 2, "index 0 gets a new pod next to the failed one"


def test_without_a_policy_a_disrupted_pod_counts_against_the_backoff_limit(store, jobs):
    pod, _ = started(store, jobs, job_body("plain", backoff_limit=0))
    fail(store, pod, disrupted=True)

    jobs.reconcile()
    jobs.reconcile()

    failed = condition(get_job(store, "plain"), "Failed")
    assert failed is not None
    assert failed["reason"] == "BackoffLimitExceeded"
    assert failed["message"] == "Job has reached the specified backoff limit"


def test_an_exit_code_no_rule_matches_is_counted_as_usual(store, jobs):
    pod, _ = started(store, jobs, job_body("crash", rules=[DISRUPTION_RULE]))
    fail(store, pod, exit_code=1)

    jobs.reconcile()
    jobs.reconcile()

    job = get_job(store, "crash")
    assert condition(job, "Failed")["reason"] == "BackoffLimitExceeded"  # type: ignore[index]
    assert job["status"]["failed"] == 1


# ----------------------------------------------------------------------------- Job: OnFailure


def test_under_on_failure_the_first_container_restart_fails_a_job_with_backoff_limit_0(
    store, jobs
):
    pod, _ = started(store, jobs, job_body("server", restart_policy="OnFailure"))
    jobs.reconcile()
    assert condition(get_job(store, "server"), "FailureTarget") is None

    run(store, pod, restarts=1)
    jobs.reconcile()

    job = get_job(store, "server")
    assert condition(job, "FailureTarget")["reason"] == "BackoffLimitExceeded"  # type: ignore[index]
    assert pods_of(store, "server") == [], "the real controller deletes the Job's pods"
    jobs.reconcile()
    assert condition(get_job(store, "server"), "Failed") is not None


def test_under_on_failure_restarts_across_pods_add_up_to_the_backoff_limit(store, jobs):
    first, second = started(store, jobs, job_body("servers", restart_policy="OnFailure",
                                                  backoff_limit=3))
    run(store, first, restarts=1)
    run(store, second, restarts=1)
    jobs.reconcile()
    assert condition(get_job(store, "servers"), "FailureTarget") is None

    run(store, second, restarts=2)
    jobs.reconcile()

    assert condition(get_job(store, "servers"), "FailureTarget") is not None


def test_past_backoff_limit_on_failure_ignores_pods_that_are_no_longer_pending_or_running():
    spec = {"template": {"spec": {"restartPolicy": "OnFailure"}}}
    done = {"status": {"phase": "Succeeded",
                       "containerStatuses": [{"name": "main", "restartCount": 5}]}}
    running = {"status": {"phase": "Running",
                          "containerStatuses": [{"name": "main", "restartCount": 1}]}}

    assert not past_backoff_limit_on_failure(spec, 0, [done])
    assert past_backoff_limit_on_failure(spec, 0, [done, running])
    assert not past_backoff_limit_on_failure(
        {"template": {"spec": {"restartPolicy": "Never"}}}, 0, [running])


# ----------------------------------------------------------------------------- Job: replacement


def test_with_a_policy_a_terminating_pod_is_replaced_only_once_it_is_terminal(store, jobs):
    rules = [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
    pod, _ = started(store, jobs, job_body("held", rules=rules, backoff_limit=6))
    store.patch("", "pods", pod["metadata"]["name"],
                {"metadata": {"finalizers": ["example.com/hold"]}}, namespace=NAMESPACE)
    store.delete("", "pods", pod["metadata"]["name"], NAMESPACE)

    jobs.reconcile()

    job = get_job(store, "held")
    assert job["status"]["terminating"] == 1
    assert job["status"]["failed"] == 0
    assert len(pods_of(store, "held")) == 2, "no replacement while it terminates"

    fail(store, pod, disrupted=True)
    jobs.reconcile()

    assert len(pods_of(store, "held")) == 3


def test_without_a_policy_a_terminating_pod_counts_as_failed_and_is_replaced_at_once(
    store, jobs
):
    pod, _ = started(store, jobs, job_body("eager", backoff_limit=6))
    store.patch("", "pods", pod["metadata"]["name"],
                {"metadata": {"finalizers": ["example.com/hold"]}}, namespace=NAMESPACE)
    store.delete("", "pods", pod["metadata"]["name"], NAMESPACE)

    jobs.reconcile()

    job = get_job(store, "eager")
    assert job["status"]["failed"] == 1
    assert len(pods_of(store, "eager")) == 3


def test_the_first_matching_rule_decides_and_unknown_actions_are_skipped():
    pod = {"metadata": {"name": "p", "namespace": "ns"},
           "status": {"phase": "Failed",
                      "conditions": [{"type": "DisruptionTarget", "status": "True"}],
                      "containerStatuses": [{"name": "main",
                                             "state": {"terminated": {"exitCode": 3}}}]}}
    policy = {"rules": [
        {"action": "Evict", "onPodConditions": [{"type": "DisruptionTarget"}]},
        {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [1, 2]}},
        DISRUPTION_RULE,
    ]}

    match = match_pod_failure_policy(policy, pod)

    assert (match.action, match.counts, match.message) == ("Count", True, None)
    assert match_pod_failure_policy({"rules": [DISRUPTION_RULE]}, pod).message \
        == "Pod ns/p has condition DisruptionTarget matching FailJob rule at index 0"
    assert match_pod_failure_policy(
        {"rules": [{"action": "FailJob", "onPodConditions": [
            {"type": "DisruptionTarget", "status": "False"}]}]}, pod).action is None


# ----------------------------------------------------------------------------- JobSet


def jobset_body(name: str, *, max_restarts: int = 1,
                rules: list[dict[str, Any]] | None = None,
                policy: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicatedJobs": [
        {"name": name_, "replicas": 1, "template": {"spec": {
            "parallelism": 1, "completions": 1, "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "main", "image": "us-docker.pkg.dev/acme/train:1"}]}}}}}
        for name_ in ("leader", "workers")]}
    if policy:
        spec["failurePolicy"] = {"maxRestarts": max_restarts}
        if rules is not None:
            spec["failurePolicy"]["rules"] = rules
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}


def fail_job(store: ObjectStore, name: str, reason: str, at: str = "2026-11-21T08:05:00Z"
             ) -> None:
    store.patch(*JOBS, name, {"status": {"conditions": [
        {"type": "Failed", "status": "True", "reason": reason, "message": "m",
         "lastTransitionTime": at}]}}, namespace=NAMESPACE, subresource="status")


def jobset_events(store: ObjectStore, name: str) -> list[tuple[str, str, str]]:
    return [(e["type"], e["reason"], e["message"]) for e in store.list("", "events", NAMESPACE)
            if e["involvedObject"]["name"] == name]


IGNORE_DISRUPTIONS = [{"name": "restartOnHostDisruption",
                       "action": "RestartJobSetAndIgnoreMaxRestarts",
                       "onJobFailureReasons": ["PodFailurePolicy"]}]


def test_a_job_failed_by_pod_failure_policy_restarts_the_jobset_without_counting(
    store, clock
):
    controller = JobSetController(store, clock)
    store.create(*JOBSETS, jobset_body("train", max_restarts=0, rules=IGNORE_DISRUPTIONS))
    controller.reconcile()
    fail_job(store, "train-workers-0", "PodFailurePolicy")

    controller.reconcile()

    status = store.get(*JOBSETS, "train", NAMESPACE)["status"]
    assert status["restarts"] == 1
    assert "restartsCountTowardsMax" not in status  # omitempty: 0
    assert not condition(store.get(*JOBSETS, "train", NAMESPACE), "Failed")
    assert jobset_events(store, "train") == [(
        "Warning", "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction",
        "applying RestartJobSetAndIgnoreMaxRestarts failure policy action "
        "(first failed job: train-workers-0)")]

    controller.reconcile()

    attempts = {j["metadata"]["name"]: j["metadata"]["labels"][
        "jobset.sigs.k8s.io/restart-attempt"] for j in store.list(*JOBS, NAMESPACE)}
    assert attempts == {"train-leader-0": "1", "train-workers-0": "1"}


def test_a_real_failure_is_counted_and_fails_the_jobset_once_max_restarts_are_used(
    store, clock
):
    controller = JobSetController(store, clock)
    store.create(*JOBSETS, jobset_body("flaky", max_restarts=1, rules=IGNORE_DISRUPTIONS))
    controller.reconcile()
    fail_job(store, "flaky-leader-0", "BackoffLimitExceeded")

    controller.reconcile()
    restarted = store.get(*JOBSETS, "flaky", NAMESPACE)["status"]
    assert (restarted["restarts"], restarted["restartsCountTowardsMax"]) == (1, 1)

    controller.reconcile()  # the next attempt's Jobs
    fail_job(store, "flaky-leader-0", "BackoffLimitExceeded")
    controller.reconcile()

    jobset = store.get(*JOBSETS, "flaky", NAMESPACE)
    failed = condition(jobset, "Failed")
    assert failed is not None
    assert failed["reason"] == "ReachedMaxRestarts"
    assert failed["message"] == ("jobset failed due to reaching max number of restarts "
                                 "(first failed job: flaky-leader-0)")
    assert jobset["status"]["terminalState"] == "Failed"
    assert ("Warning", "RestartJobSetFailurePolicyAction",
            "applying RestartJobSet failure policy action (first failed job: flaky-leader-0)"
            ) in jobset_events(store, "flaky")
    assert ("Warning", "ReachedMaxRestarts", failed["message"]) \
        in jobset_events(store, "flaky")


def test_disruptions_do_not_use_up_max_restarts_left_for_a_real_failure(store, clock):
    controller = JobSetController(store, clock)
    store.create(*JOBSETS, jobset_body("mixed", max_restarts=1, rules=IGNORE_DISRUPTIONS))
    for _ in range(3):
        controller.reconcile()
        fail_job(store, "mixed-workers-0", "PodFailurePolicy")
        controller.reconcile()
    controller.reconcile()
    fail_job(store, "mixed-leader-0", "BackoffLimitExceeded")

    controller.reconcile()

    jobset = store.get(*JOBSETS, "mixed", NAMESPACE)
    assert (jobset["status"]["restarts"], jobset["status"]["restartsCountTowardsMax"]) \
        == (4, 1)
    assert condition(jobset, "Failed") is None


def test_a_fail_jobset_rule_for_one_replicated_job_fails_at_once(store, clock):
    controller = JobSetController(store, clock)
    rules = [{"name": "leaderFails", "action": "FailJobSet",
              "targetReplicatedJobs": ["leader"]}]
    store.create(*JOBSETS, jobset_body("strict", max_restarts=5, rules=rules))
    controller.reconcile()
    fail_job(store, "strict-leader-0", "BackoffLimitExceeded")

    controller.reconcile()

    failed = condition(store.get(*JOBSETS, "strict", NAMESPACE), "Failed")
    assert failed is not None
    assert (failed["reason"], failed["message"]) == (
        "FailJobSetFailurePolicyAction",
        "applying FailJobSet failure policy action (first failed job: strict-leader-0)")


def test_without_a_failure_policy_a_failed_job_fails_the_jobset(store, clock):
    controller = JobSetController(store, clock)
    store.create(*JOBSETS, jobset_body("bare", policy=False))
    controller.reconcile()
    fail_job(store, "bare-workers-0", "BackoffLimitExceeded")

    controller.reconcile()

    failed = condition(store.get(*JOBSETS, "bare", NAMESPACE), "Failed")
    assert failed is not None
    assert (failed["reason"], failed["message"]) == (
        "FailedJobs", "jobset failed due to one or more job failures "
                      "(first failed job: bare-workers-0)")


def failed_job(name: str, replicated: str | None, reason: str, at: str) -> dict[str, Any]:
    labels = {"jobset.sigs.k8s.io/replicatedjob-name": replicated} if replicated else {}
    return {"metadata": {"name": name, "labels": labels}, "status": {"conditions": [
        {"type": "Failed", "status": "True", "reason": reason, "lastTransitionTime": at}]}}


def test_the_first_rule_applying_to_any_failed_job_wins_with_the_earliest_such_job():
    jobset = {"spec": {"failurePolicy": {"maxRestarts": 3, "rules": [
        {"name": "a", "action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"]},
        {"name": "b", "action": "RestartJobSetAndIgnoreMaxRestarts",
         "targetReplicatedJobs": ["workers"]},
    ]}}}
    failed = [failed_job("js-leader-0", "leader", "BackoffLimitExceeded", "2026-11-21T08:00:01Z"),
              failed_job("js-workers-1", "workers", "PodFailurePolicy", "2026-11-21T08:00:03Z"),
              failed_job("js-workers-0", "workers", "BackoffLimitExceeded",
                         "2026-11-21T08:00:02Z")]

    decision = decide_failure(jobset, failed)

    assert decision is not None
    assert (decision.job, decision.fail, decision.counted) == ("js-workers-0", False, False)
    assert decision.reason == "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction"


def test_a_failed_job_without_its_replicated_job_label_matches_no_rule():
    jobset = {"spec": {"failurePolicy": {"maxRestarts": 0, "rules": [
        {"name": "free", "action": "RestartJobSetAndIgnoreMaxRestarts"}]}}}

    decision = decide_failure(jobset, [failed_job("orphan", None, "PodFailurePolicy",
                                                  "2026-11-21T08:00:00Z")])

    assert decision is not None
    assert (decision.fail, decision.reason) == (True, "ReachedMaxRestarts")


def test_a_replicated_job_is_active_while_its_jobs_have_active_pods_even_when_suspended(
    store, clock
):
    # jobset v0.7.2 counts a Job "active" by its pods (status.active > 0): Kueue
    # waits for that to reach 0 before it releases an evicted JobSet's quota.
    controller = JobSetController(store, clock)
    store.create(*JOBSETS, jobset_body("train"))
    controller.reconcile()

    def statuses() -> dict[str, dict[str, int]]:
        js = store.get(*JOBSETS, "train", NAMESPACE)
        return {r["name"]: r for r in js["status"]["replicatedJobsStatus"]}

    assert statuses()["workers"]["active"] == 0  # created: no pod yet
    store.patch(*JOBS, "train-workers-0", {"status": {"active": 1}}, namespace=NAMESPACE,
                subresource="status")
    store.patch(*JOBS, "train-workers-0", {"spec": {"suspend": True}}, namespace=NAMESPACE)
    controller.reconcile()

    assert (statuses()["workers"]["active"], statuses()["workers"]["suspended"]) == (1, 1)
    assert statuses()["leader"]["active"] == 0


# ------------------------------------------------------------- what the Job API refuses
@pytest.mark.parametrize(("restart_policy", "rules", "message"), [
    ("OnFailure", [DISRUPTION_RULE],
     'spec.template.spec.restartPolicy: Invalid value: "OnFailure": only "Never" is '
     "supported when podFailurePolicy is specified"),
    ("Always", None,
     'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"'),
    ("Sometimes", None,
     'spec.template.spec.restartPolicy: Unsupported value: "Sometimes": supported values: '
     '"OnFailure", "Never"'),
])
def test_the_api_refuses_a_job_whose_restart_policy_the_job_api_refuses(
    store, restart_policy, rules, message
):
    with pytest.raises(ApiError) as refused:
        store.create(*JOBS, job_body("bad", restart_policy=restart_policy, rules=rules))

    assert refused.value.code == 422
    assert refused.value.message == f'Job.batch "bad" is invalid: {message}'


def test_a_jobset_whose_jobs_the_api_refuses_never_starts_and_the_controller_logs_why(
    store, clock, caplog
):
    body = jobset_body("serve")
    for rjob in body["spec"]["replicatedJobs"]:
        job_spec = rjob["template"]["spec"]
        job_spec["template"]["spec"]["restartPolicy"] = "OnFailure"
        job_spec["podFailurePolicy"] = {"rules": [DISRUPTION_RULE]}
    store.create(*JOBSETS, body)
    controller = JobSetController(store, clock)

    controller.reconcile()
    controller.reconcile()

    assert store.list(*JOBS, NAMESPACE) == []
    refusals = [r.getMessage() for r in caplog.records if "creation failed" in r.getMessage()]
    assert len(refusals) == 2  # once per Job, not once per pass
    assert 'only "Never" is supported when podFailurePolicy is specified' in refusals[0]
