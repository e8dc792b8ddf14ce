"""Triton pods as real ``tritonserver`` processes reading a release from Cloud Storage.

The toy model is uploaded with google-cloud-storage to fake-gcs-server the way a
release snapshot lays it out, and a container like the one ``deploy_model`` renders
is launched through ``TritonLauncher``. Three servers in all (a good release, a
broken one, one whose parent is killed): each costs a couple of seconds and ~85 MB.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
import requests

from sandbox.common.httpserver import free_port, port_open
from sandbox.inference import toy_lm
from sandbox.inference.toy_lm_model import model_files
from sandbox.inference.tritonserver import TritonLauncher, TritonProcess
from sandbox.storage import FakeGcs, create_bucket, storage_client

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(find_spec("pytriton") is None,
                       reason="needs nvidia-pytriton (pip install 'accelops[sandbox]')"),
]

REPO = Path(__file__).resolve().parents[2]
PROJECT = "sandbox-project"
BUCKET = "accelops-models"
GOOD = f"gs://{BUCKET}/releases/demo/r1"
BROKEN = f"gs://{BUCKET}/releases/demo/r2"
READY_SECONDS = 60.0
STOP_GRACE_SECONDS = 15.0


def _container(repository: str, *extra: str) -> dict[str, Any]:
    """The Triton container of a Deployment rendered by deploy_model."""
    return {
        "name": "triton",
        "image": "nvcr.io/nvidia/tritonserver:24.08-py3",
        "command": ["tritonserver"],
        "args": [f"--model-repository={repository}", "--model-control-mode=explicit",
                 "--load-model=toy-lm", "--strict-readiness=true", "--exit-on-error=true",
                 "--http-port=8000", "--grpc-port=8001", "--metrics-port=8002", *extra],
        "env": [{"name": "ACCELOPS_RELEASE", "value": "r1"}],
    }


def _pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "serving"}}


def _ports() -> dict[int, int]:
    return {8000: free_port(), 8001: free_port(), 8002: free_port()}


def _upload(client: Any, prefix: str, files: dict[str, bytes]) -> None:
    """A release snapshot: config beside the version directory, the rest in ``1/``."""
    bucket = client.bucket(BUCKET)
    for path, data in files.items():
        name = f"{prefix}/toy-lm/{path}" if path == "config.pbtxt" else \
            f"{prefix}/toy-lm/1/{path}"
        bucket.blob(name).upload_from_string(data)


@pytest.fixture(scope="module")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeGcs]:
    """The sandbox's Cloud Storage holding a good and a broken release of the toy LM."""
    log_dir = tmp_path_factory.mktemp("storage")
    with FakeGcs(free_port(), log_dir / "fake-gcs.log", PROJECT, None, None) as server:
        create_bucket(server.url, BUCKET, PROJECT)
        client = storage_client(server.url, PROJECT)
        try:
            _upload(client, "releases/demo/r1", model_files())
            _upload(client, "releases/demo/r2", model_files(broken=True, version_label="v2"))
        finally:
            client.close()
        yield server


@pytest.fixture(scope="module")
def launcher(gcs: FakeGcs, tmp_path_factory: pytest.TempPathFactory) -> TritonLauncher:
    return TritonLauncher(gcs.url, tmp_path_factory.mktemp("pod-logs"))


@dataclass
class Served:
    process: TritonProcess
    ports: dict[int, int]
    started_by: threading.Thread

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ports[8000]}"


def _wait_ready(process: TritonProcess, port: int) -> bool:
    give_up = time.monotonic() + READY_SECONDS
    while time.monotonic() < give_up and process.alive():
        try:
            if requests.get(f"http://127.0.0.1:{port}/v2/health/ready",
                            timeout=1).status_code == 200:
                return True
        except requests.ConnectionError:
            pass
        time.sleep(0.1)
    return False


@pytest.fixture(scope="module")
def served(launcher: TritonLauncher) -> Iterator[Served]:
    """The good release, launched from a thread that has ended before it is used."""
    ports = _ports()
    started: list[TritonProcess] = []
    thread = threading.Thread(
        target=lambda: started.append(launcher(_pod("toy-lm-7c9f-x2k4q"),
                                               _container(GOOD), ports)))
    thread.start()
    thread.join(timeout=30)
    [process] = started
    try:
        assert _wait_ready(process, ports[8000]), process.log_tail(40)
        yield Served(process, ports, thread)
    finally:
        process.stop(STOP_GRACE_SECONDS)


def test_a_pod_serves_the_toy_lm_from_its_release_in_cloud_storage(served: Served):
    body = {"inputs": [{"name": "text_input", "shape": [1, 1], "datatype": "BYTES",
                        "data": ["hello world"]}]}
    response = requests.post(f"{served.url}/v2/models/toy-lm/infer", json=body, timeout=10)
    assert response.status_code == 200, response.text
    outputs = {output["name"]: output["data"] for output in response.json()["outputs"]}
    assert outputs["text_output"] == [toy_lm.generate("hello world").text]
    assert outputs["num_input_tokens"] == [2]
    assert outputs["num_output_tokens"] == [16]


def test_the_server_outlives_the_thread_that_started_it(served: Served):
    assert not served.started_by.is_alive()
    assert served.process.alive()
    assert served.process.exit_code() is None


def test_the_pod_is_ready_only_with_its_model_loaded_from_the_release(served: Served):
    model = requests.get(f"{served.url}/v2/models/toy-lm", timeout=5).json()
    assert model["versions"] == ["1"]
    config = requests.get(f"{served.url}/v2/models/toy-lm/config", timeout=5).json()
    assert config["parameters"]["version_label"]["string_value"] == "v1"
    assert "successfully loaded 'toy-lm'" in served.process.log_tail(200)


def test_metrics_and_grpc_listen_on_the_host_ports_given_for_the_container_ports(
        served: Served):
    metrics = requests.get(f"http://127.0.0.1:{served.ports[8002]}/metrics", timeout=5)
    assert metrics.status_code == 200
    assert 'nv_inference_request_success{model="toy-lm",version="1"}' in metrics.text
    assert port_open(served.ports[8001])


def test_a_broken_release_exits_non_zero_and_the_log_says_why(launcher: TritonLauncher):
    process = launcher(_pod("../toy-lm broken/é"), _container(BROKEN), _ports())
    try:
        assert process.wait(READY_SECONDS) == 1, process.log_tail(40)
        tail = process.log_tail()
        assert "load failed for model 'toy-lm'" in tail
        assert "toy-lm v2 is broken on purpose" in tail
        assert process.log_file.parent == launcher.log_dir
        assert not process.alive()
    finally:
        process.stop(1.0)


def test_stopping_a_pod_ends_its_server_within_the_grace_period(served: Served):
    began = time.monotonic()
    served.process.stop(STOP_GRACE_SECONDS)
    assert time.monotonic() - began < STOP_GRACE_SECONDS
    assert not served.process.alive()
    assert served.process.exit_code() == 0
    served.process.stop(STOP_GRACE_SECONDS)  # idempotent


_ORPHAN = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from sandbox.inference.tritonserver import TritonLauncher
    launcher = TritonLauncher(sys.argv[1], Path(sys.argv[2]))
    container = {"command": ["tritonserver"], "args": [
        "--model-repository=" + sys.argv[3], "--model-control-mode=explicit",
        "--load-model=toy-lm", "--exit-timeout-secs=1"]}
    ports = {8000: int(sys.argv[4]), 8001: int(sys.argv[5]), 8002: int(sys.argv[6])}
    process = launcher({"metadata": {"name": "orphan"}}, container, ports)
    print(process.pid, flush=True)
    time.sleep(120)
""")


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_a_server_dies_with_the_process_that_launched_it(gcs: FakeGcs, tmp_path: Path):
    ports = _ports()
    parent = subprocess.Popen(
        [sys.executable, "-c", _ORPHAN, gcs.url, str(tmp_path), GOOD,
         *(str(ports[p]) for p in (8000, 8001, 8002))],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    server_pid = 0
    try:
        assert parent.stdout is not None
        server_pid = int(parent.stdout.readline())
        assert not _gone(server_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        # The kernel's SIGTERM can find the server still loading its model (on a busy
        # machine for tens of seconds): Triton's handler only sets the exit flag its main
        # loop reads once start-up returns, then it drains and exits.
        # So the bound is as generous as the wait for a server to become ready plus its
        # grace to stop, not a guess at how fast an idle machine does it.
        give_up = time.monotonic() + READY_SECONDS + STOP_GRACE_SECONDS
        while not _gone(server_pid) and time.monotonic() < give_up:
            time.sleep(0.1)
        assert _gone(server_pid), "\n".join(
            log.read_text(errors="replace")[-4000:] for log in tmp_path.rglob("*.log"))
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=10)
        if server_pid and not _gone(server_pid):
            os.killpg(server_pid, signal.SIGKILL)


def test_a_server_whose_launcher_died_before_asking_for_the_death_signal_does_not_start():
    # The race, made certain: the process that exec's the server is not (or no longer)
    # the child of the launcher it names, so no death signal would ever come.
    from sandbox.inference.tritonserver import _death_signal_prefix

    gone = _death_signal_prefix(parent=1)
    alive = _death_signal_prefix(parent=os.getpid())
    if not gone:
        pytest.skip("no setpriv with --pdeathsig here")

    assert subprocess.run([*gone, "sleep", "60"], timeout=30, check=False).returncode == 143
    assert subprocess.run([*alive, "true"], timeout=30, check=False).returncode == 0


@pytest.mark.parametrize(("container", "storage_url", "refusal"), [
    (_container(GOOD), None, "needs the sandbox's Cloud Storage"),
    (_container("/models"), "http://127.0.0.1:1", "only gs:// model repositories"),
    (_container(GOOD, "--log-file=/tmp/triton.log"), "http://127.0.0.1:1", "--log-file"),
    (_container(GOOD, "--http-port=9000"), "http://127.0.0.1:1",
     "no host port for container port 9000"),
    (_container(GOOD, "--backend-directory=/opt"), "http://127.0.0.1:1", "backend directory"),
    (_container(GOOD, "--allow-sagemaker=true"), "http://127.0.0.1:1", "--allow-sagemaker"),
    ({"command": ["sh", "-c", "tritonserver"]}, "http://127.0.0.1:1", "must run tritonserver"),
    ({**_container(GOOD), "env": [{"name": "LD_PRELOAD", "value": "/x.so"}]},
     "http://127.0.0.1:1", "LD_PRELOAD"),
])
def test_a_container_the_sandbox_cannot_run_safely_is_refused_before_starting(
        tmp_path: Path, container: dict[str, Any], storage_url: str | None, refusal: str):
    launcher = TritonLauncher(storage_url, tmp_path)
    with pytest.raises(ValueError, match=refusal.replace("(", r"\(")):
        launcher(_pod("refused"), container, _ports())
    assert not list(tmp_path.glob("*.log"))


def test_the_container_flags_become_a_loopback_server_on_the_host_ports(tmp_path: Path):
    ports = {8000: 41000, 8001: 41001, 8002: 41002}
    flags = TritonLauncher("http://127.0.0.1:1", tmp_path).arguments(
        _container(GOOD, "--exit-timeout-secs=30", "--cuda-memory-pool-byte-size=0:1"), ports)
    assert flags[:6] == [f"--model-repository={GOOD}", "--model-control-mode=explicit",
                         "--load-model=toy-lm", "--strict-readiness=true",
                         "--exit-on-error=true", "--exit-timeout-secs=30"]
    assert flags[6:12] == ["--http-address=127.0.0.1", "--http-port=41000",
                           "--grpc-address=127.0.0.1", "--grpc-port=41001",
                           "--metrics-address=127.0.0.1", "--metrics-port=41002"]
    assert flags[12].startswith(f"--backend-directory={tmp_path.resolve()}/")
    assert len(flags) == 13
