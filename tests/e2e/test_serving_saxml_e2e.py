"""A Saxml version uploaded on the whole sandbox: its model servers queue through
Kueue, reconcile_slices makes their TPU slice, reconcile_models publishes it through
the proxy stand-in and retires the previous version only once the new one serves.
Once it serves, its model servers are followed: they crash and restart in place as
often as they like, and when the whole set is lost it is made again.

The model servers' pods are run by the sandbox's kubelet stand-in; a version's
``saxml.env`` reaches their container, so ``ACCELOPS_SANDBOX_RUN_SECONDS`` and
``ACCELOPS_SANDBOX_OUTCOME=fail`` make one exit with code 1 every so many simulated
seconds (this module's sandbox clock runs 120 times faster than the wall clock).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from sandbox.supervisor.runner import Sandbox
from shared import kube, storage
from shared.kube import JOBSETS, PODS
from shared.serving.ledger import Ledger, load_ledger
from shared.serving.saxml import SaxmlProxy
from tests.e2e.conftest import wait_for
from tests.serving_fixtures import manifest_for, upload_version

SANDBOX_PARTS = {"jobs", "serving"}
# Simulated seconds per wall-clock second: the crashing server's hour takes half a minute.
SANDBOX_SPEED = 120.0
NAMESPACE = "serving"
TEAM_NAMESPACE = "inference"
CHECKPOINT = {"checkpoint/params.msgpack": b"\x00weights", "checkpoint/meta.json": b"{}"}
# A model server that runs ten simulated minutes, then exits with code 1: five crashes
# in its first hour.
CRASH_EVERY_SECONDS = 600
CRASH_MESSAGE = "F0105 tpu_runtime: TPU chip halted (simulated)"


@pytest.fixture(scope="module")
def cluster(sandbox: Sandbox) -> Any:
    kube.reset_client()
    storage.reset_client()
    return kube.get_client()


def upload(sandbox: Sandbox, version: str, files: dict[str, bytes], model: str = "lm2b",
           env: dict[str, str] | None = None) -> None:
    saxml: dict[str, Any] = {"model_path": "saxml.server.lm.params.lm_cloud.LmCloudSpmd2B",
                             "checkpoint": "checkpoint"}
    if env:
        saxml["env"] = env
    manifest = manifest_for(model, version, files, server="saxml",
                            accelerator={"tpu": "v5litepod-4"}, saxml=saxml)
    upload_version(sandbox.models_bucket, model, version, files, server="saxml",
                   manifest=manifest)


def settled(cluster: Any, version: str, timeout: float = 120.0, model: str = "lm2b") -> Any:
    def done() -> Any:
        ledger = load_ledger(cluster, NAMESPACE, model)
        mine = [r for r in ledger.rollouts if r.version == version]
        return ledger if mine and not mine[-1].active else None
    return wait_for(done, timeout)


def servers(cluster: Any, model: str) -> Any:
    ledger = load_ledger(cluster, NAMESPACE, model)
    current = ledger.find(ledger.current)
    return current.servers if current is not None else None


def models_status(sandbox: Sandbox, model: str) -> str:
    """``accelops models status MODEL``, as a user runs it against the sandbox."""
    done = subprocess.run([sys.executable, "-m", "shared.cli", "models", "status", model],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, **sandbox.env()})
    assert done.returncode == 0, done.stderr
    return done.stdout


def model_server_pods(cluster: Any, ledger: Ledger) -> list[dict[str, Any]]:
    current = ledger.find(ledger.current)
    assert current is not None
    [jobset] = [j for j in cluster.list(JOBSETS, TEAM_NAMESPACE)
                if j["metadata"]["annotations"]["accelops.dev/request-id"] == current.id]
    return [p for p in cluster.list(PODS, TEAM_NAMESPACE, label_selector=(
        f"jobset.sigs.k8s.io/jobset-name={jobset['metadata']['name']}"))
        if not p["metadata"].get("deletionTimestamp")]


def test_a_saxml_version_serves_on_a_slice_and_replaces_the_previous_one(sandbox, cluster):
    proxy = SaxmlProxy(sandbox.saxml_proxy_url)
    upload(sandbox, "v1", CHECKPOINT)
    v1 = settled(cluster, "v1")
    assert v1 is not None, load_ledger(cluster, NAMESPACE, "lm2b").model_dump_json(indent=1)
    assert v1.find(v1.current).version == "v1"
    status = proxy.model_status(v1.find(v1.current).serving)
    assert status is not None
    assert status.servable

    upload(sandbox, "v2", CHECKPOINT)
    v2 = settled(cluster, "v2")

    assert v2 is not None
    assert v2.find(v2.current).version == "v2"
    assert proxy.model_status(v1.find(v1.current).serving, probe=False) is None
    remaining = {j["metadata"]["annotations"]["accelops.dev/request-id"]
                 for j in cluster.list(JOBSETS, "inference")}
    assert remaining == {v2.current}


def test_a_model_server_crashing_five_times_in_an_hour_still_serves_and_each_crash_shows(
        sandbox, cluster):
    proxy = SaxmlProxy(sandbox.saxml_proxy_url)
    upload(sandbox, "v1", CHECKPOINT, model="crashy-lm", env={
        "ACCELOPS_SANDBOX_RUN_SECONDS": str(CRASH_EVERY_SECONDS),
        "ACCELOPS_SANDBOX_OUTCOME": "fail", "ACCELOPS_SANDBOX_MESSAGE": CRASH_MESSAGE})
    ledger = settled(cluster, "v1", model="crashy-lm")
    assert ledger is not None
    assert ledger.find(ledger.current).version == "v1"

    # Five crashes take 50 simulated minutes, half a minute of wall clock.
    def five_crashes() -> bool:
        record = servers(cluster, "crashy-lm")
        return record is not None and record.crashes >= 5

    assert wait_for(five_crashes, 180.0), servers(cluster, "crashy-lm")
    record = servers(cluster, "crashy-lm")
    assert record.losses == 0
    [jobset] = [j for j in cluster.list(JOBSETS, TEAM_NAMESPACE)
                if j["metadata"]["annotations"]["accelops.dev/request-id"] == ledger.current]
    assert not [c for c in jobset.get("status", {}).get("conditions", [])
                if c["type"] in ("Failed", "Completed") and c["status"] == "True"]
    assert jobset["status"].get("restarts", 0) == 0  # restarted in place, not recreated
    [pod] = model_server_pods(cluster, ledger)
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["containerStatuses"][0]["restartCount"] >= 5
    status = proxy.model_status(ledger.find(ledger.current).serving)
    assert status is not None
    assert status.servable
    out = models_status(sandbox, "crashy-lm")
    assert "servers     1/1 running" in out
    assert f"exited with code 1 (Error): {CRASH_MESSAGE}" in out
    rows = [line for line in out.splitlines()
            if CRASH_MESSAGE in line and line.split()[2] == "1"]  # one crash per row
    assert len(rows) >= 5, out


def test_a_serving_version_whose_servers_are_lost_gets_them_again_and_shows_it(
        sandbox, cluster):
    upload(sandbox, "v1", CHECKPOINT, model="lost-lm")
    ledger = settled(cluster, "v1", model="lost-lm")
    assert ledger is not None
    assert wait_for(lambda: getattr(servers(cluster, "lost-lm"), "running", 0) == 1, 60.0)
    [jobset] = [j for j in cluster.list(JOBSETS, TEAM_NAMESPACE)
                if j["metadata"]["annotations"]["accelops.dev/request-id"] == ledger.current]

    cluster.delete(JOBSETS, jobset["metadata"]["name"], TEAM_NAMESPACE)  # the servers go

    def back() -> bool:
        record = servers(cluster, "lost-lm")
        return bool(record and record.losses == 1 and not record.lost and record.running == 1
                    and record.uid != jobset["metadata"]["uid"])
    assert wait_for(back, 120.0), servers(cluster, "lost-lm")
    again = [j for j in cluster.list(JOBSETS, TEAM_NAMESPACE)
             if j["metadata"]["annotations"]["accelops.dev/request-id"] == ledger.current]
    assert [j["metadata"]["name"] for j in again] == [jobset["metadata"]["name"]]
    ledger = load_ledger(cluster, NAMESPACE, "lost-lm")
    assert ledger.find(ledger.current).version == "v1"
    assert [p["status"]["phase"] for p in model_server_pods(cluster, ledger)] == ["Running"]
    out = models_status(sandbox, "lost-lm")
    assert "servers     1/1 running" in out
    assert "lost        1 time(s), the last" in out
    assert "is gone (deleted); created again" in out
