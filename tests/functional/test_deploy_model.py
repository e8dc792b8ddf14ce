"""deploy_model in process, against Cloud Storage (fake-gcs-server), the Kubernetes
API stand-in and Pub/Sub over sockets, with events in both shapes it accepts."""

from __future__ import annotations

from typing import Any

import functions_framework
import pytest

from shared import kube, storage
from shared.kube import CONFIG_MAPS, DEPLOYMENTS
from shared.serving.ledger import load_ledger
from shared.serving.triton import release_name
from tests.serving_fixtures import (
    REPO,
    TOY_CONFIG,
    TOY_MODEL,
    eventarc_event,
    manifest_for,
    notification_envelope,
    upload_version,
)

NAMESPACE = "serving"
FILES = {"config.pbtxt": TOY_CONFIG, "model.py": TOY_MODEL}


@pytest.fixture(scope="module")
def app() -> Any:
    return functions_framework.create_app("deploy_model", str(REPO / "functions" / "main.py"),
                                          "cloudevent").test_client()


@pytest.fixture
def env(serving_env: dict[str, Any]) -> dict[str, Any]:
    return serving_env


def deliver(app: Any, bucket: str, name: str, generation: int, **kwargs: Any) -> int:
    response = app.post("/", json=notification_envelope(bucket, name, generation, **kwargs))
    return int(response.status_code)


def ledger_of(client: kube.KubeClient, model: str = "toy-lm") -> Any:
    return load_ledger(client, NAMESPACE, model)


def deployments(client: kube.KubeClient) -> list[dict[str, Any]]:
    """Every Triton Deployment of toy-lm, whatever its release."""
    return client.list(DEPLOYMENTS, NAMESPACE, label_selector="app.kubernetes.io/instance=toy-lm")


def test_a_manifest_rolls_out_an_immutable_release_pinned_to_its_version(app, env):
    upload = upload_version(env["bucket"], "toy-lm", "v1", FILES)

    assert deliver(app, env["bucket"].name, upload.name, upload.generation) == 200

    ledger = ledger_of(env["kube"])
    [rollout] = ledger.rollouts
    assert (rollout.version, rollout.state) == ("v1", "rolling-out")
    [deployment] = deployments(env["kube"])
    assert deployment["metadata"]["name"] == release_name("toy-lm", rollout.id)
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    repository = f"gs://{env['bucket'].name}/releases/toy-lm/{rollout.id}/"
    assert f"--model-repository={repository}" in args
    assert "--load-model=toy-lm" in args
    assert deployment["spec"]["replicas"] == 1
    # Read back with another client: the snapshot is a complete, pinned repository.
    snapshot = {b.name: b.download_as_bytes()
                for b in env["bucket"].list_blobs(prefix=f"releases/toy-lm/{rollout.id}/")}
    prefix = f"releases/toy-lm/{rollout.id}/toy-lm/"
    assert snapshot[prefix + "1/model.py"] == TOY_MODEL
    config = snapshot[prefix + "config.pbtxt"].decode()
    assert 'name: "toy-lm"' in config
    assert "versions: [ 1 ]" in config.replace("[1]", "[ 1 ]")


def test_a_duplicate_delivery_changes_nothing(app, env):
    upload = upload_version(env["bucket"], "toy-lm", "v1", FILES)
    assert deliver(app, env["bucket"].name, upload.name, upload.generation) == 200
    [before] = [d["metadata"]["resourceVersion"] for d in deployments(env["kube"])]

    assert deliver(app, env["bucket"].name, upload.name, upload.generation,
                   message_id="1002") == 200

    assert len(ledger_of(env["kube"]).rollouts) == 1
    assert [d["metadata"]["resourceVersion"] for d in deployments(env["kube"])] == [before]


def test_the_eventarc_event_of_the_same_upload_is_a_duplicate_of_the_notification(app, env):
    upload = upload_version(env["bucket"], "toy-lm", "v1", FILES)
    assert deliver(app, env["bucket"].name, upload.name, upload.generation) == 200

    headers, body = eventarc_event(env["bucket"].name, upload.name, upload.generation)
    assert app.post("/", headers=headers, data=body).status_code == 200

    assert len(ledger_of(env["kube"]).rollouts) == 1


def test_an_eventarc_event_alone_starts_the_rollout(app, env):
    upload = upload_version(env["bucket"], "toy-lm", "v1", FILES)
    headers, body = eventarc_event(env["bucket"].name, upload.name, upload.generation)

    assert app.post("/", headers=headers, data=body).status_code == 200

    assert ledger_of(env["kube"]).rollouts[0].state == "rolling-out"


def test_artifact_events_are_acknowledged_without_effect(app, env):
    bucket = env["bucket"]
    blob = bucket.blob("models/triton/toy-lm/v1/model.py")
    blob.upload_from_string(TOY_MODEL)

    assert deliver(app, bucket.name, blob.name, int(blob.generation)) == 200
    assert deliver(app, bucket.name, "releases/x/r-1/toy-lm/config.pbtxt", 1) == 200
    assert deliver(app, bucket.name, "models/triton/toy-lm/v1/deploy.yaml", 7,
                   event_type="OBJECT_DELETE") == 200

    assert env["kube"].list(CONFIG_MAPS, NAMESPACE) == []


def test_a_manifest_whose_file_is_missing_deploys_nothing_and_names_the_file(app, env):
    upload = upload_version(env["bucket"], "toy-lm", "v1", FILES, skip=("model.py",))

    assert deliver(app, env["bucket"].name, upload.name, upload.generation) == 200

    [rollout] = ledger_of(env["kube"]).rollouts
    assert rollout.state == "rejected"
    assert "model.py" in (rollout.reason or "")
    assert rollout.field == "files[1].path"
    assert deployments(env["kube"]) == []


def test_a_checksum_mismatch_deploys_nothing_and_names_the_file(app, env):
    manifest = manifest_for("toy-lm", "v1", {**FILES, "model.py": b"something else"})
    upload = upload_version(env["bucket"], "toy-lm", "v1", FILES, manifest=manifest)

    assert deliver(app, env["bucket"].name, upload.name, upload.generation) == 200

    [rollout] = ledger_of(env["kube"]).rollouts
    assert rollout.state == "rejected"
    assert rollout.field == "files[1].md5"
    assert "model.py" in (rollout.reason or "")
    assert deployments(env["kube"]) == []


def test_a_bad_config_pbtxt_deploys_nothing_and_says_why(app, env):
    files = {**FILES, "config.pbtxt": b'name: "toy-lm"\nbackend: "python"\ninput [ {\n'}
    upload = upload_version(env["bucket"], "toy-lm", "v1", files)

    assert deliver(app, env["bucket"].name, upload.name, upload.generation) == 200

    [rollout] = ledger_of(env["kube"]).rollouts
    assert rollout.state == "rejected"
    assert "config.pbtxt" in (rollout.reason or "")
    assert deployments(env["kube"]) == []


def test_a_manifest_that_contradicts_its_path_is_refused_with_the_field(app, env):
    manifest = manifest_for("toy-lm", "v2", FILES)
    upload = upload_version(env["bucket"], "toy-lm", "v1", FILES, manifest=manifest)

    assert deliver(app, env["bucket"].name, upload.name, upload.generation) == 200

    [rollout] = ledger_of(env["kube"]).rollouts
    assert (rollout.state, rollout.field) == ("rejected", "version")


@pytest.mark.parametrize("name", [
    "models/triton/../../etc/deploy.yaml",
    "models/triton/toy-lm/v1/../../deploy.yaml",
    "models/triton/Toy LM/v1/deploy.yaml",
    "models/triton/toy-lm/v1/\x1b[31mdeploy.yaml",
    "models/onnx/toy-lm/v1/deploy.yaml",
    "models/triton/toy-lm/latest/deploy.yaml",
    "models/triton/toy-lm/v1//deploy.yaml",
    "models/triton/" + "a" * 600 + "/v1/deploy.yaml",
])
def test_hostile_object_names_are_acknowledged_and_create_nothing(app, env, name):
    assert deliver(app, env["bucket"].name, name, 5) == 200

    assert env["kube"].list(CONFIG_MAPS, NAMESPACE) == []
    assert deployments(env["kube"]) == []


def test_an_overwritten_manifest_is_a_new_request_and_its_old_event_is_stale(app, env):
    first = upload_version(env["bucket"], "toy-lm", "v1", FILES)
    second = upload_version(env["bucket"], "toy-lm", "v1", FILES)
    assert second.generation > first.generation

    # Out of order: the newer generation's event comes first.
    assert deliver(app, env["bucket"].name, second.name, second.generation) == 200
    assert deliver(app, env["bucket"].name, first.name, first.generation) == 200

    [rollout] = ledger_of(env["kube"]).rollouts
    assert rollout.generation == second.generation


def test_an_unreachable_bucket_makes_the_delivery_retry(app, env, monkeypatch):
    upload = upload_version(env["bucket"], "toy-lm", "v1", FILES)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")
    storage.reset_client()

    assert deliver(app, env["bucket"].name, upload.name, upload.generation) == 500

    assert env["kube"].list(CONFIG_MAPS, NAMESPACE) == []


def test_an_unreachable_cluster_makes_the_delivery_retry(app, env, kube_api):
    upload = upload_version(env["bucket"], "toy-lm", "v1", FILES)
    kube_api.stop()

    assert deliver(app, env["bucket"].name, upload.name, upload.generation) == 500


def test_an_older_version_delivered_after_a_newer_one_is_stale(app, env):
    v1 = upload_version(env["bucket"], "toy-lm", "v1", FILES)
    v2 = upload_version(env["bucket"], "toy-lm", "v2", FILES)

    assert deliver(app, env["bucket"].name, v2.name, v2.generation) == 200
    assert deliver(app, env["bucket"].name, v1.name, v1.generation) == 200

    [rollout] = ledger_of(env["kube"]).rollouts
    assert rollout.version == "v2"
