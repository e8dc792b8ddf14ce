"""submit_job under hostile input: for every input, no 5xx while the backends are
healthy; a valid request makes exactly its JobSet; an invalid one makes none and is
recorded on the rejections topic with the field it broke; a request id stands for one
request, whoever reuses it and however the deliveries race."""

from __future__ import annotations

import base64
import itertools
import json
import threading
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.fuzz.conftest import JobsWorld, budget
from tests.fuzz.strategies import (
    HOSTILE_HEADERS,
    REQUEST_ID,
    TEAMS,
    BadRequest,
    bad_request,
    encode,
    hostile_body,
    job_request,
)

pytestmark = pytest.mark.fuzz

_ids = itertools.count(1)
REQUEST_LIMIT = 256 * 1024  # docs/architecture/job-requests.md: a job request is at most 256 KiB
DEFAULTS = {"command": [], "args": [], "env": {}, "priority": "medium", "max_restarts": 0}


def next_message_id() -> str:
    return f"fz{next(_ids)}"


def envelope(data: bytes, message_id: str) -> dict[str, Any]:
    return {"message": {"data": base64.b64encode(data).decode(), "messageId": message_id,
                        "publishTime": "2026-11-23T10:00:00Z", "attributes": {"origin": "fuzz"}},
            "subscription": "projects/accelops-test/subscriptions/job-requests-submit-job"}


def post(world: JobsWorld, data: bytes, message_id: str, client: Any = None) -> Any:
    return (client or world.client).post("/", json=envelope(data, message_id))


def fresh(world: JobsWorld) -> None:
    """No JobSet and no unread rejection before an example: cleared, unless the last
    example proved there were none left (it marks the world clean as it passes)."""
    if not world.clean:
        world.clear_jobsets()
        world.rejections()
    world.clean = False


def container(jobset: dict[str, Any]) -> dict[str, Any]:
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    result: dict[str, Any] = pod["containers"][0]
    return result


def assert_is_the_jobset_of(jobset: dict[str, Any], request: dict[str, Any],
                            message_id: str) -> None:
    """The JobSet says what the request asked for (checked against the request and the
    team's configuration, not against the renderer)."""
    meta = jobset["metadata"]
    team = TEAMS[request["team"]]
    assert meta["namespace"] == team["namespace"]
    assert meta["labels"]["kueue.x-k8s.io/queue-name"] == team["queue"]
    assert meta["annotations"]["accelops.dev/request-id"] == request.get("request_id",
                                                                         message_id)
    main = container(jobset)
    assert main["image"] == request["image"]
    assert main.get("command", []) == request.get("command", [])
    assert main.get("args", []) == request.get("args", [])
    assert {e["name"]: e["value"] for e in main.get("env", [])} == request.get("env", {})
    assert jobset["spec"]["replicatedJobs"][0]["replicas"] == request["tpu"]["slices"]
    assert jobset["spec"]["failurePolicy"]["maxRestarts"] == request.get("max_restarts", 0)
    assert jobset["spec"]["suspend"] is True


@given(request=job_request(), ascii_only=st.booleans())
@budget(250)
def test_every_valid_request_creates_exactly_its_jobset_and_no_rejection(
    jobs_world: JobsWorld, request: dict[str, Any], ascii_only: bool
) -> None:
    fresh(jobs_world)
    message_id = next_message_id()

    response = post(jobs_world, encode(request, ascii_only), message_id)

    assert response.status_code == 200, response.get_data(as_text=True)
    [jobset] = jobs_world.jobsets()
    assert_is_the_jobset_of(jobset, request, message_id)
    assert jobs_world.rejections() == []


@given(bad=bad_request())
@budget(1500)
def test_every_invalid_request_is_acknowledged_recorded_with_its_field_and_creates_nothing(
    jobs_world: JobsWorld, bad: BadRequest
) -> None:
    fresh(jobs_world)
    message_id = next_message_id()

    response = post(jobs_world, bad.data, message_id)

    assert response.status_code == 200, response.get_data(as_text=True)
    assert jobs_world.jobsets() == []
    [rejection] = jobs_world.rejections()
    attributes = rejection.attributes
    assert attributes["source_message_id"] == message_id
    assert attributes["rejected_by"] == "submit_job"
    assert attributes["rejection_reason"]
    assert attributes["rejection_rule"]
    field = attributes["rejection_field"]
    assert (not bad.field or field == bad.field or field.startswith(bad.field + ".")
            or (bad.may_fail_whole and field == "data")), (bad.kind, field, bad.field)
    assert rejection.data == bad.data[:REQUEST_LIMIT]
    jobs_world.clean = True  # no JobSet was made, and its rejection, the only one, was read


CHANGEABLE = ["name", "team", "image", "command", "args", "env", "tpu.slices", "tpu.type",
              "priority", "max_restarts"]


def changed(first: dict[str, Any], other: dict[str, Any], what: str) -> dict[str, Any]:
    """``first`` with one field (or, for the team, what the team decides) from ``other``."""
    second = json.loads(json.dumps(first))
    if what == "team":
        second.update(team=other["team"], image=other["image"], tpu=other["tpu"])
        return second
    # What the team allows (image prefix, TPU types, slices) comes from the team.
    assume(what not in ("image", "tpu.type", "tpu.slices") or first["team"] == other["team"])
    if what.startswith("tpu."):
        second["tpu"][what.split(".")[1]] = other["tpu"][what.split(".")[1]]
    else:
        second[what] = other[what] if what in other else DEFAULTS[what]
    return second


def effective(request: dict[str, Any]) -> dict[str, Any]:
    return {**DEFAULTS, **request}


@given(first=job_request(), other=job_request(), what=st.sampled_from(CHANGEABLE),
       request_id=REQUEST_ID)
@budget(150)
def test_a_request_id_reused_with_any_field_changed_is_refused_naming_the_id_and_jobset(
    jobs_world: JobsWorld, first: dict[str, Any], other: dict[str, Any], what: str,
    request_id: str
) -> None:
    first = {**first, "request_id": request_id}
    second = changed(first, other, what)
    assume(effective(second) != effective(first))
    fresh(jobs_world)
    assert post(jobs_world, encode(first), next_message_id()).status_code == 200
    [original] = jobs_world.jobsets()

    reused = post(jobs_world, encode(second), next_message_id())
    again = post(jobs_world, encode(first), next_message_id())

    assert (reused.status_code, again.status_code) == (200, 200)
    [jobset] = jobs_world.jobsets()
    assert jobset["metadata"]["uid"] == original["metadata"]["uid"]
    assert_is_the_jobset_of(jobset, first, "")
    [rejection] = jobs_world.rejections()  # the reuse; the repeat is a duplicate
    meta = original["metadata"]
    assert rejection.attributes["rejection_field"] == "request_id"
    assert repr(request_id) in rejection.attributes["rejection_reason"]
    assert f"{meta['namespace']}/{meta['name']}" in rejection.attributes["rejection_reason"]


@given(first=job_request(), other=job_request(), request_id=REQUEST_ID)
@budget(40)
def test_two_different_requests_racing_under_one_id_leave_one_jobset_and_one_refusal(
    jobs_world: JobsWorld, first: dict[str, Any], other: dict[str, Any], request_id: str
) -> None:
    requests = [{**first, "request_id": request_id}, {**other, "request_id": request_id}]
    assume(effective(requests[0]) != effective(requests[1]))
    fresh(jobs_world)
    ids = [next_message_id(), next_message_id()]
    barrier = threading.Barrier(2)
    statuses: dict[int, int] = {}

    def deliver(index: int) -> None:
        client = jobs_world.client.application.test_client()
        barrier.wait()
        statuses[index] = post(jobs_world, encode(requests[index]), ids[index],
                               client).status_code

    threads = [threading.Thread(target=deliver, args=(i,)) for i in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert statuses == {0: 200, 1: 200}
    [jobset] = jobs_world.jobsets()
    [rejection] = jobs_world.rejections()
    loser = ids.index(rejection.attributes["source_message_id"])
    assert rejection.attributes["rejection_field"] == "request_id"
    assert_is_the_jobset_of(jobset, requests[1 - loser], "")


@given(body=hostile_body(), headers=HOSTILE_HEADERS)
@budget(400)
def test_no_request_body_makes_submit_job_answer_5xx_or_create_anything(
    jobs_world: JobsWorld, body: bytes, headers: dict[str, str]
) -> None:
    fresh(jobs_world)

    response = jobs_world.client.post("/", data=body, headers=headers)

    assert response.status_code < 500, response.get_data(as_text=True)
    assert jobs_world.jobsets() == []
