from __future__ import annotations

from typing import Any

import pytest

from shared.errors import PermanentError
from shared.jobspec.request import parse_job_request


def test_a_complete_request_parses_with_every_field(request_body: dict[str, Any]):
    request = parse_job_request(request_body)
    assert request.tpu.type == "v5litepod-16"
    assert request.tpu.slices == 2
    assert request.env == {"WANDB_MODE": "offline"}
    assert request.request_id is None


def test_defaults_fill_optional_fields():
    request = parse_job_request({"name": "a", "team": "t", "image": "img",
                                 "tpu": {"type": "v4-8"}})
    assert (request.tpu.slices, request.priority, request.max_restarts) == (1, "medium", 0)
    assert request.command == []
    assert request.env == {}


@pytest.mark.parametrize(
    "field",
    ["serviceAccountName", "securityContext", "volumes", "hostNetwork", "podSpec",
     "privileged", "hostPath", "nodeSelector"],
)
def test_pod_spec_fields_are_refused_by_name(request_body: dict[str, Any], field: str):
    request_body[field] = {"anything": True}
    with pytest.raises(PermanentError) as caught:
        parse_job_request(request_body)
    assert caught.value.field == field
    assert "not allowed" in str(caught.value.rule)


def test_pod_fields_nested_under_tpu_are_refused(request_body: dict[str, Any]):
    request_body["tpu"]["privileged"] = True
    with pytest.raises(PermanentError) as caught:
        parse_job_request(request_body)
    assert caught.value.field == "tpu.privileged"


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"tpu": {"type": "v5litepod-16", "slices": 0}}, "tpu.slices"),
        ({"image": "us-docker.pkg.dev/acme/x:1; rm -rf /"}, "image"),
        ({"image": ""}, "image"),
        ({"name": ""}, "name"),
        ({"name": "-leading-dash"}, "name"),
        ({"env": {"1BAD": "x"}}, "env.1BAD"),
        ({"priority": "urgent"}, "priority"),
        ({"max_restarts": -1}, "max_restarts"),
        ({"command": "python train.py"}, "command"),
        ({"request_id": "has spaces in it"}, "request_id"),
    ],
)
def test_invalid_values_name_the_field_and_the_rule(
    request_body: dict[str, Any], patch: dict[str, Any], field: str
):
    request_body.update(patch)
    with pytest.raises(PermanentError) as caught:
        parse_job_request(request_body)
    assert caught.value.field == field
    assert caught.value.rule
    assert field.split(".")[0] in caught.value.message


def test_missing_required_fields_are_all_listed():
    with pytest.raises(PermanentError) as caught:
        parse_job_request({"name": "x"})
    for field in ("team", "image", "tpu"):
        assert field in caught.value.message


def test_a_json_array_is_refused_as_not_an_object():
    with pytest.raises(PermanentError, match="JSON object"):
        parse_job_request([1, 2])


def test_content_hash_ignores_the_request_id_but_not_the_content(request_body: dict[str, Any]):
    first = parse_job_request({**request_body, "request_id": "a"})
    same = parse_job_request({**request_body, "request_id": "b"})
    other = parse_job_request({**request_body, "args": ["--steps=2"]})
    assert first.content_hash() == same.content_hash()
    assert first.content_hash() != other.content_hash()


def test_spot_and_a_reservation_together_are_refused(request_body):
    request_body["tpu"].update(spot=True, reservation="res-a")
    with pytest.raises(PermanentError, match="either spot or a reservation"):
        parse_job_request(request_body)
