"""The metrics flags of a rendered Triton container, as the sandbox's launcher reads
them: kept when tritonserver would take them, refused with its words when not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sandbox.inference.tritonargs import server_arguments
from shared.config import ServingConfig
from shared.kube import DEPLOYMENTS
from shared.serving.triton import METRICS_FLAGS, render_triton

PORTS = {8000: 41000, 8001: 41001, 8002: 41002}
SPEC = {"deployment": "toy", "model": "toy-lm", "version": "1",
        "accelerator": {"gpu": {"type": "nvidia-l4", "count": 1}},
        "replicas": {"min": 1, "max": 2},
        "autoscaling": {"metric": "nv_inference_queue_duration_us", "target": 1}}


def _container(*extra: str) -> dict[str, Any]:
    objects = render_triton(SPEC, "gs://bucket/releases/toy/r-1", "r-1", ServingConfig(),
                            replicas=1)
    [deployment] = [body for resource, body in objects if resource == DEPLOYMENTS]
    container: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return {**container, "args": [*container["args"], *extra]}


def test_the_rendered_metrics_config_reaches_the_server_unchanged():
    flags = server_arguments(_container(), PORTS, backend_directory=Path("/b"))
    assert [f for f in flags if f.startswith("--metrics-config=")] == list(METRICS_FLAGS)


def test_a_setting_without_a_value_is_refused_as_tritonserver_refuses_it():
    with pytest.raises(ValueError, match=r"--metrics-config option format is "
                                         r"<setting>=<value>\. Got histogram_latencies"):
        server_arguments(_container("--metrics-config=histogram_latencies"), PORTS,
                         backend_directory=Path("/b"))


def test_a_setting_tritonserver_ignores_is_taken_like_the_server_takes_it():
    flags = server_arguments(_container("--metrics-config=future_setting=1"), PORTS,
                             backend_directory=Path("/b"))
    assert "--metrics-config=future_setting=1" in flags


def test_a_value_with_a_path_is_refused():
    with pytest.raises(ValueError, match="metrics-config"):
        server_arguments(_container("--metrics-config=summary_quantiles=/etc/passwd"), PORTS,
                         backend_directory=Path("/b"))
