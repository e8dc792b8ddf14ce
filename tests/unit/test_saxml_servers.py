"""A serving Saxml version's model servers: the JobSet they run in, and what following
them records (crashes, losses) and decides (create them again)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.config import parse_config
from shared.serving.ledger import Ledger, Rollout
from shared.serving.saxml_rollout import MODEL_SERVER_BACKOFF_LIMIT, model_server_jobset
from shared.serving.servers import (
    MAX_CRASHES,
    Servers,
    follow,
    read_jobset,
    read_pods,
)

CONFIG = parse_config("""
teams:
  inference: {namespace: inference, queue: inference-queue}
serving: {saxml_team: inference}
""")
ROLLOUT = Rollout(id="r-1", key="gs://b/models/saxml/lm/v1/deploy.yaml#1", version="v1",
                  state="ready", spec={
                      "deployment": "lm", "accelerator": {"tpu": "v5litepod-4"},
                      "saxml": {"model_path": "a.B", "checkpoint": "ckpt", "replicas": 1,
                                "env": {"XLA_FLAGS": "--xla_dump_to=/tmp"}}})
T0 = 1_767_600_000.0  # 2026-01-05 08:00 UTC


def stamp(seconds: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(T0 + seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def jobset(uid: str = "js-1", *, created: float = 0.0, condition: str | None = None,
           deleting: bool = False, suspended: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "sax-lm-v1-abc", "uid": uid, "resourceVersion": "7",
                            "creationTimestamp": stamp(created)}
    if deleting:
        meta["deletionTimestamp"] = stamp(created + 1)
    status: dict[str, Any] = {"restarts": 0}
    if condition:
        status["conditions"] = [{"type": condition, "status": "True",
                                 "reason": "ReachedMaxRestarts",
                                 "message": "jobset failed due to reaching max number of "
                                            "restarts"}]
    return {"metadata": meta, "status": status,
            "spec": {"suspend": suspended, "replicatedJobs": [
                {"name": "slice", "replicas": 1, "template": {"spec": {"parallelism": 1}}}]}}


def pod(uid: str = "p-1", *, restarts: int = 0, created: float = 10.0, phase: str = "Running",
        exit_at: float = 100.0, message: str = "RuntimeError: TPU halted",
        disruption: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "conditions": [
        {"type": "Ready", "status": "True" if phase == "Running" else "False"}]}
    entry: dict[str, Any] = {"name": "main", "restartCount": restarts,
                             "state": {"running": {"startedAt": stamp(exit_at)}}}
    if restarts:
        entry["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error",
                                             "message": message, "finishedAt": stamp(exit_at)}}
    if phase == "Failed":
        entry["state"] = {"terminated": {"exitCode": 137, "reason": "Error",
                                         "finishedAt": stamp(exit_at)}}
    if disruption:
        status["conditions"].append({"type": "DisruptionTarget", "status": "True",
                                     "reason": disruption,
                                     "message": "Pod was terminated in response to "
                                                "imminent node shutdown.",
                                     "lastTransitionTime": stamp(exit_at)})
    status["containerStatuses"] = [entry]
    return {"metadata": {"name": f"sax-lm-v1-abc-slice-0-0-{uid}", "uid": uid,
                         "creationTimestamp": stamp(created),
                         "labels": {"jobset.sigs.k8s.io/jobset-name": "sax-lm-v1-abc"}},
            "status": status}


def look(record: Servers | None, js: dict[str, Any] | None, *pods: dict[str, Any],
         at: float = 200.0) -> Any:
    state = read_jobset(js) if js is not None else None
    seen = read_pods(pods, state) if state is not None else []
    return follow(record, "sax-lm-v1-abc", state, seen, T0 + at)


# ------------------------------------------------------------------- the JobSet itself
def test_model_servers_restart_in_place_with_a_budget_no_crash_loop_can_spend():
    rendered = model_server_jobset(CONFIG, ROLLOUT, "gs://state/sax-root")
    job = rendered["spec"]["replicatedJobs"][0]["template"]["spec"]
    restarts_a_year = 12 * 24 * 365  # one per 5 minutes: the kubelet's longest back-off

    assert job["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert job["backoffLimit"] == MODEL_SERVER_BACKOFF_LIMIT == 2**31 - 1
    assert job["backoffLimit"] / restarts_a_year > 10_000  # years of crash-looping


def test_model_servers_carry_no_pod_failure_policy_the_job_api_refuses_beside_on_failure():
    rendered = model_server_jobset(CONFIG, ROLLOUT, "gs://state/sax-root")
    job = rendered["spec"]["replicatedJobs"][0]["template"]["spec"]

    assert "podFailurePolicy" not in job
    assert "rules" not in rendered["spec"]["failurePolicy"]


def test_a_versions_environment_reaches_its_model_servers_beside_the_cells_root():
    rendered = model_server_jobset(CONFIG, ROLLOUT, "gs://state/sax-root")
    env = rendered["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"][0]["env"]

    assert {"name": "XLA_FLAGS", "value": "--xla_dump_to=/tmp"} in env
    assert {"name": "SAX_ROOT", "value": "gs://state/sax-root"} in env


# ------------------------------------------------------------------- crashes
def test_a_restart_is_one_crash_with_the_kubelets_exit_details_counted_once():
    first = look(None, jobset(), pod(restarts=1))
    again = look(first.servers, jobset(), pod(restarts=1), at=260.0)

    [crash] = first.crashes
    assert (crash.exit_code, crash.reason, crash.container) == (1, "Error", "main")
    assert crash.message == "RuntimeError: TPU halted"
    assert crash.at == T0 + 100.0
    assert first.servers.crashes == 1
    assert (again.crashes, again.servers.crashes) == ([], 1)
    assert again.servers == first.servers  # nothing new: nothing to write


def test_restarts_between_two_looks_are_one_entry_standing_for_all_of_them():
    before = look(None, jobset(), pod(restarts=1))
    after = look(before.servers, jobset(), pod(restarts=4, exit_at=900.0))

    [crash] = after.crashes
    assert crash.count == 3
    assert crash.at == T0 + 900.0
    assert after.servers.crashes == 4


def test_a_disrupted_pod_is_a_crash_named_after_the_disruption():
    seen = look(None, jobset(), pod(phase="Failed", disruption="TerminationByKubelet"))

    [crash] = seen.crashes
    assert crash.reason == "TerminationByKubelet"
    assert "node shutdown" in (crash.message or "")
    assert crash.exit_code == 137
    assert (seen.servers.running, seen.servers.expected) == (0, 1)
    assert not seen.lost  # the Job makes the pod again: the set is not lost


def test_pods_of_an_earlier_jobset_of_the_same_name_are_not_its_servers():
    seen = look(None, jobset(created=50.0), pod("old", restarts=3, created=10.0),
                pod("new", created=60.0))

    assert seen.crashes == []
    assert seen.servers.running == 1
    assert list(seen.servers.counted) == ["new"]


def test_history_is_bounded_and_totals_are_kept():
    record = None
    for restarts in range(1, 41):
        record = look(record, jobset(), pod(restarts=restarts, exit_at=restarts * 60.0),
                      at=restarts * 60.0 + 1).servers
    assert record is not None
    assert record.crashes == 40
    assert len(record.recent_crashes) == MAX_CRASHES
    ledger = Ledger(model="lm", server="saxml", rollouts=[
        ROLLOUT.model_copy(update={"servers": record})])
    assert len(ledger.model_dump_json()) < 10_000


# ------------------------------------------------------------------- losses
def test_a_failed_jobset_is_one_loss_then_deleted_and_made_again():
    running = look(None, jobset(), pod())
    failed = look(running.servers, jobset(condition="Failed"), pod(), at=300.0)
    still = look(failed.servers, jobset(condition="Failed"), at=360.0)
    gone = look(still.servers, None, at=420.0)
    back = look(gone.servers, jobset("js-2", created=430.0), pod("p-2", created=440.0),
                at=480.0)

    assert failed.loss is not None
    assert "ReachedMaxRestarts" in failed.loss.reason
    assert failed.lost
    assert failed.create
    assert failed.delete is not None
    assert failed.delete.resource_version == "7"
    assert (still.loss, still.create, still.delete is not None) == (None, True, True)
    assert (gone.loss, gone.create, gone.delete) == (None, True, None)
    assert back.loss is None
    assert not back.create
    assert not back.lost
    assert back.servers.losses == 1
    assert back.servers.recent_losses[0].recreated == T0 + 480.0
    assert not back.servers.lost
    assert (back.servers.running, back.servers.uid) == (1, "js-2")


def test_a_deleted_jobset_is_one_loss_however_often_it_is_seen_missing():
    running = look(None, jobset(), pod())
    gone = look(running.servers, None, at=300.0)
    again = look(gone.servers, None, at=360.0)

    assert gone.loss is not None
    assert "is gone" in gone.loss.reason
    assert gone.servers.lost
    assert (again.loss, again.create) == (None, True)
    assert again.servers.losses == 1


def test_servers_never_seen_are_lost_too():
    seen = look(None, None)

    assert seen.loss is not None
    assert seen.create


def test_a_jobset_being_deleted_is_lost_but_waited_for():
    seen = look(None, jobset(deleting=True))

    assert seen.loss is not None
    assert "being deleted" in seen.loss.reason
    assert (seen.create, seen.delete) == (False, None)


def test_a_jobset_replaced_unnoticed_is_a_loss_of_the_one_followed():
    running = look(None, jobset(), pod())
    replaced = look(running.servers, jobset("js-9", created=250.0), at=300.0)

    assert replaced.loss is not None
    assert "replaced" in replaced.loss.reason
    assert not replaced.create
    assert replaced.servers.uid == "js-9"


def test_a_suspended_jobset_waits_for_kueue_and_is_not_lost():
    seen = look(None, jobset(suspended=True))

    assert seen.servers.suspended
    assert (seen.loss, seen.create) == (None, False)


def test_a_manifest_may_not_set_the_deployments_own_environment():
    from shared.errors import PermanentError
    from shared.serving.convention import parse_object_name
    from shared.serving.manifest import read_manifest

    body = """
server: saxml
model: lm
version: v1
accelerator: {tpu: v5litepod-4}
files: [{path: ckpt/a, md5: 9e107d9d372bb6826bd81d3542a419d6}]
saxml: {model_path: a.B, checkpoint: ckpt, env: {SAX_ROOT: gs://elsewhere}}
"""
    upload = parse_object_name("models/saxml/lm/v1/deploy.yaml")
    assert upload is not None
    with pytest.raises(PermanentError) as refused:
        read_manifest(body.encode(), upload)
    assert refused.value.field == "saxml.env"
    assert "set by the deployment" in refused.value.message
