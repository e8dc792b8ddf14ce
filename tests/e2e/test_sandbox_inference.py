"""``python -m sandbox.inference`` as a process: a real tritonserver and the Saxml stand-in."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from sandbox.httpserver import free_port, port_open
from sandbox.inference import toy_lm

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
MODEL = "toy-lm"
STARTUP_TIMEOUT = 60.0


def _accepts(port: int) -> bool:
    return port_open(port, timeout=0.5)


class InferenceProcess:
    """The target process on ports chosen here, as a supervisor would run it."""

    def __init__(self) -> None:
        self.triton_port, self.saxml_port = free_port(), free_port()
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                            os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sandbox.inference",
             "--triton-http-port", str(self.triton_port), "--saxml-port", str(self.saxml_port),
             "--model", MODEL, "--ms-per-token", "1.0", "--startup-timeout", "45"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True)
        self.output: list[str] = []
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.triton_url = self.saxml_url = ""
        # Startup probes of the Saxml port, and how many found it open too early.
        self.saxml_probes = self.saxml_open_before_model_ready = 0

    def wait_ready(self) -> None:
        """Wait (bounded) for the lines printed once both servers are ready, probing the
        Saxml port meanwhile: it may accept connections only once the model is ready."""
        urls: dict[str, str] = {}
        give_up = time.monotonic() + STARTUP_TIMEOUT
        while "saxml" not in urls:
            assert time.monotonic() < give_up, "sandbox.inference did not start:\n" + self.log
            try:
                line = self._lines.get(timeout=0.05)
            except queue.Empty:
                assert self.process.poll() is None, "sandbox.inference exited:\n" + self.log
                self._probe_saxml()
                continue
            word, _, rest = line.strip().partition(" ")
            if word in ("triton", "saxml") and rest.startswith("http://127.0.0.1:"):
                urls[word] = rest
        self.triton_url, self.saxml_url = urls["triton"], urls["saxml"]

    def _probe_saxml(self) -> None:
        self.saxml_probes += 1
        if _accepts(self.saxml_port):
            ready = f"http://127.0.0.1:{self.triton_port}/v2/models/{MODEL}/ready"
            try:
                model_ready = requests.get(ready, timeout=5).status_code == 200
            except requests.ConnectionError:
                model_ready = False
            if not model_ready:
                self.saxml_open_before_model_ready += 1

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)
            self._lines.put(line)

    @property
    def log(self) -> str:
        return "".join(self.output)

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def target() -> Iterator[InferenceProcess]:
    process = InferenceProcess()
    try:
        process.wait_ready()
        yield process
    finally:
        if process.process.poll() is None:
            process.process.terminate()
            try:
                process.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()


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


def test_the_saxml_port_opened_only_once_the_model_was_ready(target: InferenceProcess):
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


def test_bad_saxml_json_is_a_400_with_a_json_error(target: InferenceProcess):
    response = requests.post(f"{target.saxml_url}/generate", data=b"{not json", timeout=10)
    assert response.status_code == 400
    assert "error" in response.json()
    response = requests.post(f"{target.saxml_url}/generate", json={"model": "/sax/test/toy"},
                             timeout=10)
    assert response.status_code == 400
    assert "query" in response.json()["error"]


# Runs last: it stops the module's process.
def test_sigterm_stops_everything_with_exit_code_0(target: InferenceProcess):
    target.process.send_signal(signal.SIGTERM)
    assert target.process.wait(timeout=15) == 0, target.log
    # tritonserver and its backend stub share the process group; none may outlive it.
    deadline = time.monotonic() + 5
    while True:
        try:
            os.killpg(target.process.pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "a child of sandbox.inference outlived it"
        time.sleep(0.1)
