"""Shared fixtures for tests that drive a whole running sandbox (separate processes).

A module may set ``SANDBOX_SPEED`` (simulated seconds per real second) to run its
sandbox faster than the default, and ``SANDBOX_PARTS`` to start other parts than the
jobs part (Kubernetes, GKE and their functions). The sandbox runs on the Pub/Sub that
``ACCELOPS_SANDBOX_PUBSUB`` names (``standin``, the default, or ``emulator``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from sandbox.supervisor.runner import DEFAULT_SPEED, Sandbox
from tests.e2e.pubsub_fixtures import SANDBOX_PUBSUB


def wait_for(condition: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Poll until the condition is truthy or the timeout passes; returns its last value.

    Polls quickly at first, then every quarter second: a condition is often a call
    through several sandbox processes (~20 ms of CPU), and a test waiting on simulated
    minutes at a fixed 0.1 s spent a fifth of a core on asking."""
    deadline = time.monotonic() + timeout
    interval = 0.05
    while True:
        result = condition()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(interval)
        interval = min(interval * 1.5, 0.25)


@pytest.fixture(scope="module")
def sandbox(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    speed = getattr(request.module, "SANDBOX_SPEED", DEFAULT_SPEED)
    parts = getattr(request.module, "SANDBOX_PARTS", {"jobs"})
    running = Sandbox(tmp_path_factory.mktemp("sandbox"), speed=speed,
                      parts=parts, pubsub=SANDBOX_PUBSUB).start(progress=False)
    try:
        with running.client_env():
            yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def core(sandbox: Sandbox) -> Iterator[k8s.CoreV1Api]:
    """The kubernetes client's CoreV1Api, from the sandbox's kubeconfig."""
    api_client = k8s_config.new_client_from_config(config_file=str(sandbox.kubeconfig))
    try:
        yield k8s.CoreV1Api(api_client)
    finally:
        api_client.close()


@pytest.fixture(scope="module")
def custom(sandbox: Sandbox) -> Iterator[k8s.CustomObjectsApi]:
    """The kubernetes client's CustomObjectsApi, from the sandbox's kubeconfig."""
    api_client = k8s_config.new_client_from_config(config_file=str(sandbox.kubeconfig))
    try:
        yield k8s.CustomObjectsApi(api_client)
    finally:
        api_client.close()
