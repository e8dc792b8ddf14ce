from __future__ import annotations

import copy
from typing import Any

import pytest

from shared.config import AccelopsConfig
from shared.errors import PermanentError
from shared.jobs.submit import judge
from shared.jobspec.policy import check_policy
from shared.jobspec.render import render_jobset
from shared.jobspec.request import parse_job_request

REQUEST_ID = "req-42"


def _render(body: dict[str, Any], config: AccelopsConfig,
            request_id: str = REQUEST_ID) -> dict[str, Any]:
    return render_jobset(check_policy(parse_job_request(body), config), request_id)


def _found(jobset: dict[str, Any], created: str) -> dict[str, Any]:
    """The JobSet as the cluster lists it once created."""
    listed = copy.deepcopy(jobset)
    listed["metadata"]["creationTimestamp"] = created
    return listed


def _ref(jobset: dict[str, Any]) -> tuple[str, str]:
    return jobset["metadata"]["namespace"], jobset["metadata"]["name"]


@pytest.fixture
def ours(request_body, config) -> dict[str, Any]:
    return _render(request_body, config)


@pytest.fixture
def other(request_body, config) -> dict[str, Any]:
    """A different request (another name) published under the same request id."""
    return _render({**request_body, "name": "other-job"}, config)


def test_a_request_id_nothing_holds_yet_has_no_owner(ours):
    verdict = judge(ours, [])

    assert verdict.owner is None
    assert verdict.ours is False


def test_finding_the_same_jobset_makes_the_request_a_duplicate(ours):
    listed = _found(ours, "2026-01-01T10:00:00Z")

    verdict = judge(ours, [listed])

    assert verdict.owner == listed
    assert verdict.ours is True


def test_a_request_id_held_by_another_jobset_is_refused_naming_the_holder(ours, other):
    verdict = judge(ours, [_found(other, "2026-01-01T10:00:00Z")])

    assert verdict.ours is False
    assert _ref(verdict.owner) == _ref(other)
    refusal = verdict.refusal(REQUEST_ID)
    assert isinstance(refusal, PermanentError)
    assert refusal.field == "request_id"
    assert "'req-42'" in refusal.message
    namespace, name = _ref(other)
    assert f"{namespace}/{name}" in refusal.message


def test_the_same_name_with_different_args_is_not_the_same_request(request_body, config,
                                                                   ours):
    changed = _render({**request_body, "args": ["--steps=2000"]}, config)
    assert _ref(changed) == _ref(ours)

    verdict = judge(ours, [_found(changed, "2026-01-01T10:00:00Z")])

    assert verdict.owner is not None
    assert verdict.ours is False
    assert verdict.refusal(REQUEST_ID).field == "request_id"


@pytest.mark.parametrize(
    ("ours_created", "other_created"),
    [
        ("2026-01-01T10:00:00Z", "2026-01-01T10:00:01Z"),
        ("2026-01-01T10:00:01Z", "2026-01-01T10:00:00Z"),
        ("2026-01-01T10:00:00Z", "2026-01-01T10:00:00Z"),  # same second: ties happen
    ],
)
def test_jobsets_already_sharing_an_id_are_judged_alike_by_every_request(ours, other, ours_created,
                                                             other_created):
    listed = [_found(ours, ours_created), _found(other, other_created)]

    verdicts = {_ref(mine): judge(mine, order)
                for mine in (ours, other) for order in (listed, listed[::-1])}

    owners = {_ref(v.owner) for v in verdicts.values()}
    assert len(owners) == 1
    [winner] = owners
    expected = min(((ours_created, *_ref(ours)), (other_created, *_ref(other))))[1:]
    assert winner == expected
    for mine, verdict in verdicts.items():
        assert verdict.ours is (mine == winner)


def test_a_team_racing_in_another_namespace_is_judged_by_namespace_then_name(
        request_body, config):
    research = _render(request_body, config)
    open_team = _render({**request_body, "team": "open",
                         "image": "ghcr.io/acme/train:1"}, config)
    assert _ref(research)[0] != _ref(open_team)[0]
    listed = [_found(research, "2026-01-01T10:00:00Z"),
              _found(open_team, "2026-01-01T10:00:00Z")]

    winner = min(_ref(research), _ref(open_team))
    for mine in (research, open_team):
        verdict = judge(mine, listed)
        assert _ref(verdict.owner) == winner
        assert verdict.ours is (_ref(mine) == winner)


def test_jobsets_of_another_request_id_sharing_the_label_are_ignored(request_body, config,
                                                                     ours):
    collision = _found(_render({**request_body, "name": "unrelated"}, config,
                               request_id="req-other"), "2000-01-01T00:00:00Z")
    # A label hash collision: the listing by label returns it as well.
    collision["metadata"]["labels"] = dict(ours["metadata"]["labels"])

    assert judge(ours, [collision]).owner is None
    listed = _found(ours, "2026-01-01T10:00:00Z")
    verdict = judge(ours, [collision, listed])
    assert verdict.owner == listed
    assert verdict.ours is True
