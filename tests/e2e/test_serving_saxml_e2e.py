"""A Saxml version uploaded on the whole sandbox: its model servers queue through
Kueue, reconcile_slices makes their TPU slice, reconcile_models publishes it through
the proxy stand-in and retires the previous version only once the new one serves."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.runner import Sandbox
from shared import kube, storage
from shared.kube import JOBSETS
from shared.serving.ledger import load_ledger
from shared.serving.saxml import SaxmlProxy
from tests.e2e.conftest import wait_for
from tests.serving_fixtures import manifest_for, upload_version

SANDBOX_PARTS = {"jobs", "serving"}
NAMESPACE = "serving"
CHECKPOINT = {"checkpoint/params.msgpack": b"\x00weights", "checkpoint/meta.json": b"{}"}


@pytest.fixture(scope="module")
def cluster(sandbox: Sandbox) -> Any:
    kube.reset_client()
    storage.reset_client()
    return kube.get_client()


def upload(sandbox: Sandbox, version: str, files: dict[str, bytes]) -> None:
    manifest = manifest_for("lm2b", version, files, server="saxml",
                            accelerator={"tpu": "v5litepod-4"},
                            saxml={"model_path": "saxml.server.lm.params.lm_cloud.LmCloudSpmd2B",
                                   "checkpoint": "checkpoint"})
    upload_version(sandbox.models_bucket, "lm2b", version, files, server="saxml", manifest=manifest)


def settled(cluster: Any, version: str, timeout: float = 120.0) -> Any:
    def done() -> Any:
        ledger = load_ledger(cluster, NAMESPACE, "lm2b")
        mine = [r for r in ledger.rollouts if r.version == version]
        return ledger if mine and not mine[-1].active else None
    return wait_for(done, timeout)


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
