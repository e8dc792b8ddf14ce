from __future__ import annotations

from typing import Any

import pytest

from shared.config import AccelopsConfig, parse_config

CONFIG_YAML = """
teams:
  research:
    namespace: research
    queue: research-queue
    tpu_types: [v5litepod-16, v4-32, v5p-8]
    max_slices: 4
    image_prefixes: ["us-docker.pkg.dev/acme/"]
  open:
    namespace: open-team
    queue: open-queue
"""


@pytest.fixture
def config() -> AccelopsConfig:
    return parse_config(CONFIG_YAML)


@pytest.fixture
def request_body() -> dict[str, Any]:
    return {
        "name": "llama-pretrain",
        "team": "research",
        "image": "us-docker.pkg.dev/acme/train/llama:1.4",
        "command": ["python", "train.py"],
        "args": ["--steps=1000"],
        "env": {"WANDB_MODE": "offline"},
        "tpu": {"type": "v5litepod-16", "slices": 2},
        "priority": "medium",
        "max_restarts": 1,
    }
