from __future__ import annotations

from typing import Any

import pytest

from shared.config import AccelopsConfig
from shared.errors import PermanentError
from shared.jobspec.policy import check_policy
from shared.jobspec.request import parse_job_request
from shared.jobspec.tpu import UnknownTpuTypeError


def _check(body: dict[str, Any], config: AccelopsConfig):
    return check_policy(parse_job_request(body), config)


def test_an_allowed_request_resolves_team_and_shape(request_body, config):
    admission = _check(request_body, config)
    assert admission.team.namespace == "research"
    assert admission.shape.vms == 4


def test_an_unknown_team_is_refused_and_the_known_teams_are_listed(request_body, config):
    request_body["team"] = "marketing"
    with pytest.raises(PermanentError) as caught:
        _check(request_body, config)
    assert caught.value.field == "team"
    assert "open, research" in caught.value.message


def test_an_unknown_tpu_type_is_refused(request_body, config):
    request_body["tpu"]["type"] = "v9-8"
    with pytest.raises(UnknownTpuTypeError) as caught:
        _check(request_body, config)
    assert caught.value.field == "tpu.type"


def test_a_tpu_type_outside_the_team_allow_list_is_refused(request_body, config):
    request_body["tpu"]["type"] = "v6e-16"
    with pytest.raises(PermanentError) as caught:
        _check(request_body, config)
    assert caught.value.field == "tpu.type"
    assert "v5litepod-16, v4-32, v5p-8" in caught.value.message


def test_too_many_slices_are_refused(request_body, config):
    request_body["tpu"]["slices"] = 5
    with pytest.raises(PermanentError) as caught:
        _check(request_body, config)
    assert caught.value.field == "tpu.slices"
    assert caught.value.rule == "must be at most 4"


def test_an_image_outside_the_team_prefixes_is_refused(request_body, config):
    request_body["image"] = "docker.io/evil/miner:latest"
    with pytest.raises(PermanentError) as caught:
        _check(request_body, config)
    assert caught.value.field == "image"


def test_a_team_without_allow_lists_accepts_any_known_type_and_image(request_body, config):
    request_body.update(team="open", image="docker.io/library/python:3.11",
                        tpu={"type": "v6e-256", "slices": 12})
    admission = _check(request_body, config)
    assert admission.shape.vms == 64
