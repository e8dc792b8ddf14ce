"""Saxml versions through deploy_model and reconcile_models, in process, against the
Kubernetes API stand-in, Cloud Storage and the Saxml proxy stand-in over sockets.

Nothing runs pods here: when a test needs the model servers up, it writes their pods
as Running, as the kubelet would once the slice exists. Time is passed to
reconcile_models explicitly to cross the rollout deadline.
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
    """The model servers' pod, Running, as the kubelet reports it once the slice is up."""
    name = jobset["metadata"]["name"]
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
