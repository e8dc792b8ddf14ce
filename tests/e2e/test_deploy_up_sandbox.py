"""`accelops deploy up --sandbox`: the Kubernetes half of a first deployment, for real,
on the sandbox — the real kubectl waits for the controllers' Deployments to be
Available, repeats a server-side dry run of the overlay until the webhooks admit it,
applies the overlay, and `accelops doctor` checks the result.

`manifests/controllers` cannot be applied here (kustomize fetches the upstream
release manifests from the network): the sandbox installs its own stand-in of it when
it starts (sandbox/supervisor/provision.py), Deployments, webhooks and all. To hold a controller
back, its Deployment is annotated ``sandbox.accelops.dev/unready`` (the sandbox's
controller managers keep its pod unready: not Available, its webhooks not
answering) until that is undone.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.cluster.managers import ANNOTATION_UNREADY
from sandbox.cluster.objects import loopback_url
from sandbox.supervisor.provision import kubectl
from shared.config import ServingConfig
from shared.deployment.up import CONTROLLERS
from shared.jobs.lookup import LOCAL_QUEUES
from shared.kube import DEPLOYMENTS, GATEWAYS, get_client, reset_client
from shared.serving.gateway import LISTENER
from tests.e2e.conftest import wait_for

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def controllers(sandbox) -> None:
    """The controllers' Deployments, as the sandbox installed them."""
    reset_client()
    kube = get_client()
    for _, namespace, name in CONTROLLERS:
        assert kube.find(DEPLOYMENTS, name, namespace) is not None


@contextlib.contextmanager
def held(sandbox, namespace: str, name: str) -> Iterator[None]:
    """A controller's pod held unready (not Available, its webhooks not answering);
    released afterwards."""
    def annotate(value: str | None) -> None:
        kubectl(sandbox.kubeconfig, "patch", "deployment", name, "-n", namespace,
                "--type=merge", "-p", json.dumps(
                    {"metadata": {"annotations": {ANNOTATION_UNREADY: value}}}))

    annotate("true")
    try:
        yield
    finally:
        annotate(None)


def available(deployment: dict[str, Any] | None) -> bool:
    conditions = ((deployment or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions)


def deploy_up(sandbox, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shared.cli", "deploy", "up", "--sandbox",
         str(sandbox.state_dir), *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_deploy_up_waits_for_the_controllers_then_applies_the_overlay_and_checks_it(
        sandbox, controllers):
    reset_client()
    kube = get_client()
    kube.delete(LOCAL_QUEUES, "research-queue", "research")

    done = deploy_up(sandbox, "--controllers-timeout", "60")

    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for number, name in enumerate(["kueue-ready", "jobset-ready", "overlay-render",
                                   "webhooks", "overlay", "doctor"], 1):
        assert f"[{number}/6] {name}:" in out
    for _, _, deployment in CONTROLLERS:
        assert f"deployment.apps/{deployment} condition met" in out
    assert "localqueue.kueue.x-k8s.io/research-queue serverside-applied" in out
    assert "no problems found" in out
    assert kube.find(LOCAL_QUEUES, "research-queue", "research") is not None
    # The serving Gateway of the overlay is programmed by the cluster's GKE Gateway
    # controller, and listens where a client on the host reaches it.
    serving = ServingConfig()
    assert f"gateway.gateway.networking.k8s.io/{serving.gateway} serverside-applied" in out

    def programmed() -> dict[str, Any] | None:
        gateway = kube.find(GATEWAYS, serving.gateway, serving.namespace)
        conditions = ((gateway or {}).get("status") or {}).get("conditions") or []
        return gateway if any(c["type"] == "Programmed" and c["status"] == "True"
                              for c in conditions) else None

    gateway = wait_for(programmed, 10)
    assert gateway, kube.find(GATEWAYS, serving.gateway, serving.namespace)
    assert loopback_url(gateway, LISTENER).startswith("http://127.0.0.1:")


def test_deploy_up_stops_at_a_controller_not_yet_available_and_resumes_there(
        sandbox, controllers):
    _, namespace, name = CONTROLLERS[1]
    with held(sandbox, namespace, name):
        stopped = deploy_up(sandbox, "--restart", "--controllers-timeout", "3")

    assert stopped.returncode == 1, stopped.stdout + stopped.stderr
    assert "[1/6] kueue-ready:" in stopped.stdout
    assert f"timed out waiting for the condition on deployments/{name}" in stopped.stdout
    assert "deploy up stopped at step 2/6 jobset-ready: it exited 1." in stopped.stderr
    assert f"run `accelops deploy up --sandbox {sandbox.state_dir}` again: it resumes at " \
           "jobset-ready" in stopped.stderr

    reset_client()
    assert wait_for(lambda: available(get_client().find(DEPLOYMENTS, name, namespace)), 60)
    # The same command (another timeout would be another step, run again from there).
    resumed = deploy_up(sandbox, "--controllers-timeout", "3")

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resuming at step 2/6 jobset-ready (the steps before it completed)" in resumed.stdout
    assert "[1/6]" not in resumed.stdout
    assert "no problems found" in resumed.stdout
