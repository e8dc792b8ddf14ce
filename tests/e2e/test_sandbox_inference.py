"""``python -m sandbox.inference`` as a process: a real tritonserver and the Saxml stand-in."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from sandbox.inference import toy_lm
from tests.e2e.inference_fixtures import (
    MODEL,
    SAXML_MODEL,
    STREAM_MODEL,
    InferenceProcess,
    inference_target,
)

pytestmark = pytest.mark.e2e

OTHER_SAXML_MODEL = "/sax/prod/other"


@pytest.fixture(scope="module")
def target() -> Iterator[InferenceProcess]:
    with inference_target("--saxml-model", SAXML_MODEL, "--saxml-model", OTHER_SAXML_MODEL) \
            as process:
        yield process


def _infer(target: InferenceProcess, prompt: str, max_tokens: int) -> requests.Response:
    body = {"inputs": [
        {"name": "text_input", "shape": [1, 1], "datatype": "BYTES", "data": [prompt]},
        {"name": "max_tokens", "shape": [1, 1], "datatype": "INT32", "data": [max_tokens]},
    ]}
    return requests.post(f"{target.triton_url}/v2/models/{MODEL}/infer", json=body, timeout=10)


def _outputs(response: requests.Response) -> dict[str, Any]:
    return {output["name"]: output for output in response.json()["outputs"]}


def test_the_triton_model_reports_ready(target: InferenceProcess):
    response = requests.get(f"{target.triton_url}/v2/models/{MODEL}/ready", timeout=5)
    assert response.status_code == 200


def test_the_saxml_port_opened_only_once_both_triton_models_were_ready(target: InferenceProcess):
    assert target.saxml_probes > 0
    assert target.saxml_open_before_model_ready == 0
    assert target.triton_url == f"http://127.0.0.1:{target.triton_port}"
    assert target.saxml_url == f"http://127.0.0.1:{target.saxml_port}"


def test_triton_json_inference_answers_with_text_and_token_counts(target: InferenceProcess):
    response = _infer(target, "hello world", 8)
    assert response.status_code == 200, response.text
    outputs = _outputs(response)
    assert outputs["text_output"]["shape"] == [1, 1]
    assert outputs["text_output"]["data"] == [toy_lm.generate("hello world", 8).text]
    assert outputs["num_output_tokens"]["data"] == [8]
    assert outputs["num_input_tokens"]["data"] == [2]


def test_triton_clamps_max_tokens_and_defaults_it_when_absent(target: InferenceProcess):
    assert _outputs(_infer(target, "x", 1000))["num_output_tokens"]["data"] == [256]
    body = {"inputs": [{"name": "text_input", "shape": [1, 1], "datatype": "BYTES",
                        "data": ["x"]}]}
    response = requests.post(f"{target.triton_url}/v2/models/{MODEL}/infer", json=body,
                             timeout=10)
    assert _outputs(response)["num_output_tokens"]["data"] == [16]


def test_triton_rejects_a_prompt_without_the_batch_dimension(target: InferenceProcess):
    body = {"inputs": [{"name": "text_input", "shape": [1], "datatype": "BYTES",
                        "data": ["x"]}]}
    response = requests.post(f"{target.triton_url}/v2/models/{MODEL}/infer", json=body,
                             timeout=10)
    assert response.status_code == 400


def test_the_saxml_generate_answers_with_the_same_text_as_triton(target: InferenceProcess):
    body = {"model": "/sax/test/toy", "query": "hello world", "extra_inputs": {"max_tokens": 8}}
    response = requests.post(f"{target.saxml_url}/generate", json=body, timeout=10)
    assert response.status_code == 200, response.text
    assert response.json() == {
        "generate_response": [[toy_lm.generate("hello world", 8).text, -2.0]],
        "num_input_tokens": 2,
        "num_output_tokens": 8,
    }


def test_bad_saxml_json_is_a_400_with_the_proxys_error_body(target: InferenceProcess):
    response = requests.post(f"{target.saxml_url}/generate", data=b"{not json", timeout=10)
    assert response.status_code == 400
    assert "Error" in response.json()
    response = requests.post(f"{target.saxml_url}/generate", json={"model": "/sax/test/toy"},
                             timeout=10)
    assert response.status_code == 400
    assert "query" in response.json()["Error"]


def test_every_published_saxml_model_is_served_and_any_other_is_an_error(
        target: InferenceProcess):
    for model in (SAXML_MODEL, OTHER_SAXML_MODEL):
        body = {"model": model, "query": "hello world"}
        response = requests.post(f"{target.saxml_url}/generate", json=body, timeout=10)
        assert response.status_code == 200, response.text

    body = {"model": "/sax/test/unpublished", "query": "hello world"}
    response = requests.post(f"{target.saxml_url}/generate", json=body, timeout=10)
    assert response.status_code == 400
    assert response.json() == {"Error": "model /sax/test/unpublished not found: "
                                        "rpc error: code = NotFound desc = NotFound"}


def _events(response: requests.Response) -> list[dict[str, Any]]:
    return [json.loads(line.removeprefix(b"data: "))
            for line in response.iter_lines() if line.startswith(b"data: ")]


def test_triton_streams_one_event_per_token_from_the_decoupled_model(target: InferenceProcess):
    body = {"text_input": "hello world", "max_tokens": 6, "stream": True}
    with requests.post(f"{target.triton_url}/v2/models/{STREAM_MODEL}/generate_stream",
                       json=body, stream=True, timeout=10) as response:
        assert response.status_code == 200, response.text
        assert response.headers["Content-Type"].startswith("text/event-stream")
        events = _events(response)

    assert len(events) == 6
    assert "".join(e["text_output"] for e in events) == toy_lm.generate("hello world", 6).text
    assert [e["num_output_tokens"] for e in events] == [1, 2, 3, 4, 5, 6]
    assert {e["model_name"] for e in events} == {STREAM_MODEL}


def test_triton_answers_the_streaming_model_once_when_not_asked_to_stream(
        target: InferenceProcess):
    body = {"text_input": "hello world", "max_tokens": 6}
    response = requests.post(f"{target.triton_url}/v2/models/{STREAM_MODEL}/generate",
                             json=body, timeout=10)

    assert response.status_code == 200, response.text
    assert response.json()["text_output"] == toy_lm.generate("hello world", 6).text
    assert response.json()["num_output_tokens"] == 6


@pytest.fixture
def slow_target() -> Iterator[InferenceProcess]:
    """A target at 20 ms a token: a stream lasts long enough (2 s for 100 tokens) that
    threads started a busy machine's scheduling delay apart still overlap."""
    with inference_target(ms_per_token=20.0) as process:
        yield process


def test_concurrent_streams_advance_together_rather_than_one_after_another(
        slow_target: InferenceProcess):
    # 4 streams of 100 tokens at 20 ms each: interleaved they take ~2 s, queued ~8 s.
    # Only the order of events is checked: every stream has its first token before
    # any stream has its last. (At 1 ms a token a stream lasted 0.1 s, less than the
    # time a loaded machine took to start the four threads.)
    target = slow_target
    firsts: list[float] = []
    lasts: list[float] = []
    lock = threading.Lock()

    def stream() -> None:
        body = {"text_input": "interleave", "max_tokens": 100, "stream": True}
        with requests.post(f"{target.triton_url}/v2/models/{STREAM_MODEL}/generate_stream",
                           json=body, stream=True, timeout=10) as response:
            times = [time.monotonic() for line in response.iter_lines()
                     if line.startswith(b"data: ")]
        with lock:
            firsts.append(times[0])
            lasts.append(times[-1])

    threads = [threading.Thread(target=stream) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert len(firsts) == 4
    assert max(firsts) < min(lasts)


def test_infer_on_the_streaming_model_is_refused_as_triton_refuses_decoupled_models(
        target: InferenceProcess):
    body = {"inputs": [{"name": "text_input", "shape": [1], "datatype": "BYTES",
                        "data": ["x"]}]}
    response = requests.post(f"{target.triton_url}/v2/models/{STREAM_MODEL}/infer", json=body,
                             timeout=10)
    assert response.status_code == 501


# Runs last: it stops the module's process.
def test_sigterm_stops_everything_with_exit_code_0(target: InferenceProcess):
    target.process.send_signal(signal.SIGTERM)
    assert target.process.wait(timeout=60) == 0, target.log
    # tritonserver and its backend stub share the process group; none may outlive it.
    deadline = time.monotonic() + 30
    while True:
        try:
            os.killpg(target.process.pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "a child of sandbox.inference outlived it"
        time.sleep(0.1)


def test_a_start_past_its_deadline_exits_1_naming_the_setting_to_raise() -> None:
    process = InferenceProcess("--startup-timeout", "0.5")
    try:
        try:
            code = process.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            # Seen once under a full suite's load and not since: keep what the process
            # said, so the hang can be told apart from a slow start.
            pytest.fail(f"still running 120 s after a 0.5 s deadline; its log:\n"
                        f"{process.log[-4000:]}")
        assert code == 1, process.log
    finally:
        if process.process.poll() is None:
            process.process.kill()
    deadline = time.monotonic() + 10  # the reader thread has it all once the pipe closes
    while "not ready within" not in process.log and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (f"sandbox.inference: models {MODEL!r} and {STREAM_MODEL!r} were not ready within "
            "0.5 s (--startup-timeout); if the machine is busy, give it longer: `accelops "
            "sandbox up --start-timeout 600` (or ACCELOPS_SANDBOX_START_TIMEOUT=600; now "
            "0.5 s)") in process.log
