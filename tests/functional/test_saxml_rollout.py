"""Saxml versions through deploy_model and reconcile_models, in process, against the
Kubernetes API stand-in, Cloud Storage and the Saxml proxy stand-in over sockets.

Nothing runs pods here: when a test needs the model servers up, it unsuspends their
JobSet as Kueue would and writes their pods as Running, as the kubelet would once the
slice exists; a crash is the kubelet's restart count and last termination, a failed
JobSet the JobSet controller's condition. Time is passed to reconcile_models
explicitly to cross the rollout deadline.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import functions_framework
import pytest
import yaml

from sandbox.inference.saxml import SaxmlApi, SaxmlHttpServer
from sandbox.kubeapi import KubeApiServer
from shared.kube import CONFIG_MAPS, JOBSETS, NAMESPACES
from shared.serving.ledger import load_ledger
from shared.serving.reconcile import reconcile_models
from shared.serving.saxml import SaxmlProxy
from tests.functional.conftest import SERVING_NAMESPACE as NAMESPACE
from tests.serving_fixtures import REPO, manifest_for, notification_envelope, upload_version

TEAM_NAMESPACE = "inference"
CHECKPOINT = {"checkpoint/params.msgpack": b"\x00weights", "checkpoint/meta.json": b"{}"}


@pytest.fixture
def proxy(serving_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
          tmp_path: Any) -> Iterator[SaxmlProxy]:
    server = SaxmlHttpServer(0, SaxmlApi(ms_per_token=0.0, load_seconds=0.0,
                                         pending_seconds=0.5))
    server.listen()
    serving_env["kube"].create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": TEAM_NAMESPACE}})
    serving_env["kube"].create(CONFIG_MAPS, {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "accelops-saxml", "namespace": NAMESPACE},
        "data": {"SAX_ROOT": "gs://sax-state/sax-root"}})
    monkeypatch.setenv("ACCELOPS_SAXML_PROXY", server.url)
    config_path = tmp_path / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["serving"]["saxml_team"] = "inference"
    config["serving"]["saxml_cell"] = "/sax/test"
    config_path.write_text(yaml.safe_dump(config))
    try:
        yield SaxmlProxy(server.url)
    finally:
        server.close()


@pytest.fixture(scope="module")
def app() -> Any:
    return functions_framework.create_app("deploy_model", str(REPO / "functions" / "main.py"),
                                          "cloudevent").test_client()


def deploy(app: Any, env: dict[str, Any], version: str, files: dict[str, bytes],
           model: str = "lm2b") -> str:
    manifest = manifest_for(model, version, files, server="saxml",
                            accelerator={"tpu": "v5litepod-4"},
                            saxml={"model_path": "saxml.server.lm.params.lm_cloud.LmCloudSpmd2B",
                                   "checkpoint": "checkpoint"})
    upload = upload_version(env["bucket"], model, version, files, server="saxml",
                            manifest=manifest)
    envelope = notification_envelope(upload.bucket, upload.name, upload.generation)
    assert app.post("/", json=envelope).status_code == 200
    return load_ledger(env["kube"], NAMESPACE, model).rollouts[-1].id


def ticks_until(done: Any, ticks: int = 20) -> bool:
    """Run reconcile_models ticks until ``done()`` (a loaded machine may need a few:
    a probe that times out is just "not servable yet")."""
    for _ in range(ticks):
        reconcile_models()
        if done():
            return True
        time.sleep(0.2)
    return False


def current_version(env: dict[str, Any]) -> str | None:
    ledger = load_ledger(env["kube"], NAMESPACE, "lm2b")
    rollout = ledger.find(ledger.current)
    return rollout.version if rollout else None


def servers_run(api: KubeApiServer, jobset: dict[str, Any]) -> None:
    """Kueue admits the JobSet (unsuspends it) and the model servers' pod runs, as the
    kubelet reports it once the slice is up."""
    name = jobset["metadata"]["name"]
    api.store.patch("jobset.x-k8s.io", "jobsets", name, {"spec": {"suspend": False}},
                    namespace=TEAM_NAMESPACE)
    api.store.create("", "pods", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{name}-slice-0-0", "namespace": TEAM_NAMESPACE,
                     "labels": {"jobset.sigs.k8s.io/jobset-name": name}},
        "spec": {"containers": [{"name": "c", "image": "sax-model-server"}]},
        "status": {"phase": "Running"}}, namespace=TEAM_NAMESPACE)


def test_a_saxml_version_gets_its_servers_through_kueue_then_is_published(
        app, serving_env, proxy, kube_api):
    v1 = deploy(app, serving_env, "v1", CHECKPOINT)
    [jobset] = serving_env["kube"].list(JOBSETS, TEAM_NAMESPACE)
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "inference-queue"
    assert jobset["spec"]["suspend"] is True  # queued: Kueue admits, slices follow
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "saxml"
    assert {"name": "SAX_ROOT", "value": "gs://sax-state/sax-root"} in \
        pod["containers"][0]["env"]

    reconcile_models()  # no servers yet: nothing is published
    assert proxy.model_status("/sax/test/lm2b-v1", probe=False) is None
    servers_run(kube_api, jobset)
    reconcile_models()  # publishes
    assert ticks_until(lambda: current_version(serving_env) == "v1")  # servable

    ledger = load_ledger(serving_env["kube"], NAMESPACE, "lm2b")
    assert (ledger.find(v1).state, ledger.current) == ("ready", v1)
    status = proxy.model_status("/sax/test/lm2b-v1")
    assert status is not None
    assert status.checkpoint.startswith(f"gs://{serving_env['bucket'].name}/releases/lm2b/")


def test_a_broken_saxml_version_is_unpublished_and_the_previous_one_keeps_serving(
        app, serving_env, proxy, kube_api):
    deploy(app, serving_env, "v1", CHECKPOINT)
    servers_run(kube_api, serving_env["kube"].list(JOBSETS, TEAM_NAMESPACE)[0])
    assert ticks_until(lambda: current_version(serving_env) == "v1")
    v2 = deploy(app, serving_env, "v2", {**CHECKPOINT, "checkpoint/BROKEN": b""})
    [new] = [j for j in serving_env["kube"].list(JOBSETS, TEAM_NAMESPACE)
             if j["metadata"]["annotations"]["accelops.dev/request-id"] == v2]
    servers_run(kube_api, new)
    reconcile_models()  # publishes v2, which never loads
    reconcile_models()
    assert load_ledger(serving_env["kube"], NAMESPACE, "lm2b").find(v2).state == "rolling-out"

    reconcile_models(now=time.time() + 3600)  # past the rollout deadline

    ledger = load_ledger(serving_env["kube"], NAMESPACE, "lm2b")
    assert ledger.find(v2).state == "rolled-back"
    assert ledger.find(ledger.current).version == "v1"
    assert proxy.model_status("/sax/test/lm2b-v2", probe=False) is None
    v1_status = proxy.model_status("/sax/test/lm2b-v1")
    assert v1_status is not None
    assert v1_status.servable
    remaining = [j["metadata"]["annotations"]["accelops.dev/request-id"]
                 for j in serving_env["kube"].list(JOBSETS, TEAM_NAMESPACE)]
    assert remaining == [ledger.current]  # v2's servers are gone, so is their slice


def test_a_new_saxml_version_retires_the_old_one_only_once_it_serves(
        app, serving_env, proxy, kube_api):
    deploy(app, serving_env, "v1", CHECKPOINT)
    servers_run(kube_api, serving_env["kube"].list(JOBSETS, TEAM_NAMESPACE)[0])
    assert ticks_until(lambda: current_version(serving_env) == "v1")
    v2 = deploy(app, serving_env, "v2", CHECKPOINT)
    assert proxy.model_status("/sax/test/lm2b-v1", probe=False) is not None

    [new] = [j for j in serving_env["kube"].list(JOBSETS, TEAM_NAMESPACE)
             if j["metadata"]["annotations"]["accelops.dev/request-id"] == v2]
    servers_run(kube_api, new)
    reconcile_models()
    assert proxy.model_status("/sax/test/lm2b-v1", probe=False) is not None  # still serving
    assert ticks_until(lambda: current_version(serving_env) == "v2")

    ledger = load_ledger(serving_env["kube"], NAMESPACE, "lm2b")
    assert ledger.find(ledger.current).version == "v2"
    assert proxy.model_status("/sax/test/lm2b-v1", probe=False) is None
    assert [j["metadata"]["name"] for j in
            serving_env["kube"].list(JOBSETS, TEAM_NAMESPACE)] == [new["metadata"]["name"]]


def test_an_unreachable_proxy_makes_the_tick_retry_and_changes_nothing(
        app, serving_env, proxy, kube_api, monkeypatch):
    from shared.errors import TransientError

    v1 = deploy(app, serving_env, "v1", CHECKPOINT)
    servers_run(kube_api, serving_env["kube"].list(JOBSETS, TEAM_NAMESPACE)[0])
    monkeypatch.setenv("ACCELOPS_SAXML_PROXY", "http://127.0.0.1:9")

    with pytest.raises(TransientError):
        reconcile_models()

    ledger = load_ledger(serving_env["kube"], NAMESPACE, "lm2b")
    assert ledger.find(v1).state == "rolling-out"


def test_the_checkpoint_is_the_snapshots_directory_even_when_the_model_name_contains_it(
        app, serving_env, proxy):
    rollout = deploy(app, serving_env, "v1", CHECKPOINT, model="checkpoint-lm")

    ledger = load_ledger(serving_env["kube"], NAMESPACE, "checkpoint-lm")
    assert ledger.find(rollout).spec["checkpoint"] == (
        f"gs://{serving_env['bucket'].name}/releases/checkpoint-lm/{rollout}/"
        f"checkpoint-lm/1/checkpoint")


# ------------------------------------------------------------ a version that serves
def serving_v1(app: Any, env: dict[str, Any], api: KubeApiServer) -> tuple[str, dict[str, Any]]:
    """v1 deployed, its servers running, current; its release id and JobSet."""
    v1 = deploy(app, env, "v1", CHECKPOINT)
    [jobset] = env["kube"].list(JOBSETS, TEAM_NAMESPACE)
    servers_run(api, jobset)
    assert ticks_until(lambda: current_version(env) == "v1")
    return v1, jobset


def crash(api: KubeApiServer, jobset: dict[str, Any], restarts: int, finished: str) -> None:
    """What the kubelet reports after the model server exited and was restarted in place
    (restartPolicy OnFailure): the restart count and the last termination."""
    name = f"{jobset['metadata']['name']}-slice-0-0"
    pod = api.store.get("", "pods", name, TEAM_NAMESPACE)
    pod["status"] = {"phase": "Running", "containerStatuses": [{
        "name": "c", "restartCount": restarts, "ready": True,
        "state": {"running": {"startedAt": finished}},
        "lastState": {"terminated": {
            "exitCode": 1, "reason": "Error", "finishedAt": finished,
            "message": f"F0105 jax: TPU initialization failed (crash {restarts})"}}}]}
    api.store.update_status("", "pods", pod, namespace=TEAM_NAMESPACE)


def servers_of(env: dict[str, Any], rollout: str) -> Any:
    servers = load_ledger(env["kube"], NAMESPACE, "lm2b").find(rollout).servers
    assert servers is not None
    return servers


def test_a_serving_versions_crashes_are_each_recorded_once_and_shown_by_models_status(
        app, serving_env, proxy, kube_api, capsys, caplog):
    from shared.cli import main as cli

    v1, jobset = serving_v1(app, serving_env, kube_api)
    for restarts in range(1, 6):
        crash(kube_api, jobset, restarts, f"2026-01-05T10:{restarts * 10:02d}:00Z")
        reconcile_models()
        reconcile_models()  # a tick that sees the same restart again counts nothing

    servers = servers_of(serving_env, v1)
    assert servers.crashes == 5
    assert [c.message for c in servers.recent_crashes] == [
        f"F0105 jax: TPU initialization failed (crash {n})" for n in range(1, 6)]
    assert sum("crashed" in r.message for r in caplog.records
               if r.levelname == "WARNING") == 5
    assert proxy.model_status("/sax/test/lm2b-v1") is not None  # still published
    capsys.readouterr()
    assert cli(["models", "status", "lm2b"]) == 0
    out = capsys.readouterr().out
    assert "servers     1/1 running" in out
    assert "crashes     5, the last 2026-01-05 10:50:00" in out
    assert "exited with code 1 (Error)" in out
    for minute in (10, 20, 30, 40, 50):
        assert f"2026-01-05 10:{minute}:00  1      {jobset['metadata']['name']}" in out


def test_a_serving_versions_failed_jobset_is_recorded_as_lost_and_its_servers_made_again(
        app, serving_env, proxy, kube_api, capsys, caplog):
    from shared.cli import main as cli

    v1, jobset = serving_v1(app, serving_env, kube_api)
    failed = kube_api.store.get("jobset.x-k8s.io", "jobsets", jobset["metadata"]["name"],
                                TEAM_NAMESPACE)
    failed["status"] = {"restarts": 3, "terminalState": "Failed", "conditions": [
        {"type": "Failed", "status": "True", "reason": "ReachedMaxRestarts",
         "message": "jobset failed due to reaching max number of restarts",
         "lastTransitionTime": "2026-01-05T10:00:00Z"}]}
    kube_api.store.update_status("jobset.x-k8s.io", "jobsets", failed,
                                 namespace=TEAM_NAMESPACE)

    reconcile_models()
    reconcile_models()  # seen again: the same loss, the same new JobSet

    [again] = serving_env["kube"].list(JOBSETS, TEAM_NAMESPACE)
    assert again["metadata"]["name"] == jobset["metadata"]["name"]
    assert again["metadata"]["uid"] != jobset["metadata"]["uid"]
    assert again["spec"] == jobset["spec"]  # the same version, snapshot and queue
    servers = servers_of(serving_env, v1)
    assert servers.losses == 1
    assert "ReachedMaxRestarts" in servers.recent_losses[0].reason
    assert any(r.levelname == "ERROR" and "lost its model servers" in r.message
               for r in caplog.records)

    # The garbage collector removes the old pods; the new servers start.
    kube_api.store.delete("", "pods", f"{jobset['metadata']['name']}-slice-0-0",
                          TEAM_NAMESPACE)
    servers_run(kube_api, again)
    reconcile_models()
    servers = servers_of(serving_env, v1)
    assert (servers.running, servers.losses, servers.lost) == (1, 1, False)
    assert servers.recent_losses[0].recreated is not None
    ledger = load_ledger(serving_env["kube"], NAMESPACE, "lm2b")
    assert (ledger.current, ledger.find(v1).state) == (v1, "ready")
    capsys.readouterr()
    assert cli(["models", "status", "lm2b"]) == 0
    out = capsys.readouterr().out
    assert "lost        1 time(s), the last" in out
    assert "ReachedMaxRestarts" in out
    assert "created again 20" in out
    assert cli(["models", "list"]) == 0
    assert "1/1 running, 1 loss" in capsys.readouterr().out


def test_a_run_whose_ledger_write_loses_does_not_make_the_servers_again(
        app, serving_env, proxy, kube_api):
    v1, jobset = serving_v1(app, serving_env, kube_api)
    serving_env["kube"].delete(JOBSETS, jobset["metadata"]["name"], TEAM_NAMESPACE)
    # Another run wrote the ledger between this run's read and its write.
    kube_api.faults.fail_next(1, code=409, method="PUT",
                              path_contains="/configmaps/accelops-model-lm2b")

    report = reconcile_models()

    assert report.deferred == ["lm2b"]
    assert serving_env["kube"].list(JOBSETS, TEAM_NAMESPACE) == []
    reconcile_models()
    reconcile_models()
    assert len(serving_env["kube"].list(JOBSETS, TEAM_NAMESPACE)) == 1
    assert servers_of(serving_env, v1).losses == 1
