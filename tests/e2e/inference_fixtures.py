"""``python -m sandbox.inference`` as a test target: started on free ports, awaited,
stopped. Shared by the tests of the target itself and the load generator's tests that
run against it (Triton's streaming model, the Saxml stand-in's published models)."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import requests

from sandbox.common.httpserver import free_port, port_open
from sandbox.common.startup import DEFAULT_START_TIMEOUT

REPO = Path(__file__).resolve().parents[2]
MODEL = "toy-lm"
STREAM_MODEL = "toy-lm-stream"
SAXML_MODEL = "/sax/test/toy"
# Waited for while it runs (an exit fails at once): a busy machine is slow, not broken.
STARTUP_TIMEOUT = DEFAULT_START_TIMEOUT


def _accepts(port: int) -> bool:
    return port_open(port, timeout=0.5)


class InferenceProcess:
    """The target process on ports chosen here, as a supervisor would run it."""

    def __init__(self, *options: str, ms_per_token: float = 1.0) -> None:
        self.triton_port, self.saxml_port = free_port(), free_port()
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                            os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sandbox.inference",
             "--triton-http-port", str(self.triton_port), "--saxml-port", str(self.saxml_port),
             "--model", MODEL, "--ms-per-token", str(ms_per_token),
             *options],
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
        Saxml port meanwhile: it may accept connections only once both models are ready."""
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
            try:
                model_ready = all(
                    requests.get(f"http://127.0.0.1:{self.triton_port}/v2/models/{name}/ready",
                                 timeout=5).status_code == 200
                    for name in (MODEL, STREAM_MODEL))
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

    def stop(self) -> None:
        """SIGTERM, then SIGKILL to the group if it does not exit in time."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


@contextlib.contextmanager
def inference_target(*options: str, ms_per_token: float = 1.0) -> Iterator[InferenceProcess]:
    """A ready target for the duration of the block."""
    process = InferenceProcess(*options, ms_per_token=ms_per_token)
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()
