"""Who may act for which team through the jobs API, from the configuration."""

from __future__ import annotations

from shared.config import parse_config
from shared.jobs.callers import caller

CONFIG = parse_config("""
teams:
  research:
    {namespace: research, queue: rq, members: [Alice@Example.com, ci@p.iam.gserviceaccount.com]}
  inference: {namespace: inference, queue: iq, members: [alice@example.com, bob@example.com]}
  vision: {namespace: vision, queue: vq}
jobs_api:
  admins: [ops@example.com]
""")


def test_a_member_acts_for_each_team_that_lists_them_whatever_the_case_of_the_email():
    alice = caller("ALICE@example.com", CONFIG)

    assert alice.teams == {"research", "inference"}
    assert not alice.admin
    assert alice.may_act_for("inference")
    assert not alice.may_act_for("vision")
    assert alice.restricted_to == {"research", "inference"}


def test_an_admin_acts_for_every_team_even_one_named_wrongly():
    ops = caller("ops@example.com", CONFIG)

    assert ops.admin
    assert ops.teams == {"research", "inference", "vision"}
    assert ops.may_act_for("vision")
    # The policy check then refuses an unknown team with its field and rule.
    assert ops.may_act_for("no-such-team")
    assert ops.restricted_to is None


def test_an_identity_no_team_lists_may_act_for_none():
    stranger = caller("mallory@example.com", CONFIG)

    assert stranger.teams == frozenset()
    assert not stranger.may_act_for("research")
    assert stranger.restricted_to == frozenset()
