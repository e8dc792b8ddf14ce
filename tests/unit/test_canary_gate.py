"""The canary's gate: hold, advance, promote or roll back, on a step's figures."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from shared.config import CanaryPolicy, ServingConfig
from shared.serving.canary import CanaryState, GateRecord, ReleaseFigures, judge_step
from shared.serving.manifest import CanaryOverride

POLICY = CanaryPolicy(steps=(5, 25, 50, 100), min_seconds=60, min_requests=100,
                      max_error_rate_increase=0.01, max_p99_ratio=1.5, p99_slack_ms=10)
SERVING = ReleaseFigures(requests=2000, failures=2, error_rate=0.001, p99_ms=100.0)


def figures(requests: float, failures: float = 0, p99: float | None = 100.0) -> ReleaseFigures:
    return ReleaseFigures(requests=requests, failures=failures,
                          error_rate=failures / requests if requests else None,
                          p99_ms=p99 if requests else None)


def judge(step: int, age: float, new: ReleaseFigures,
          current: ReleaseFigures | None = SERVING, policy: CanaryPolicy = POLICY):
    return judge_step(policy, step, age, new, current, timeout_seconds=900)


def test_a_step_is_held_until_both_its_time_and_its_requests_have_passed():
    assert judge(0, 30, figures(500)).action == "hold"
    assert judge(0, 90, figures(50)).action == "hold"
    held = judge(0, 90, figures(50))
    assert "50 of 100 requests" in held.reason


def test_a_healthy_step_moves_on_and_the_last_gated_step_promotes():
    advance = judge(0, 60, figures(100, p99=110))
    assert advance.action == "advance"
    assert "on to 25%" in advance.reason
    assert judge(1, 61, figures(400)).action == "advance"
    assert judge(2, 61, figures(800)).action == "promote"


def test_a_slower_release_is_rolled_back_on_p99_as_soon_as_it_has_enough_requests():
    gate = judge(0, 10, figures(100, p99=300))
    assert gate.action == "roll back"
    assert "p99 300 ms against 100 ms (at most 1.5x + 10 ms = 160 ms)" in gate.reason


def test_p99_within_the_ratio_plus_the_slack_passes_and_just_beyond_it_fails():
    assert judge(0, 60, figures(100, p99=160)).action == "advance"
    assert judge(0, 60, figures(100, p99=160.5)).action == "roll back"


def test_more_errors_than_the_serving_release_plus_the_allowance_roll_it_back():
    gate = judge(0, 10, figures(200, failures=3))  # 1.5% against 0.1% + 1%
    assert gate.action == "roll back"
    assert "error rate 1.50% against 0.10%" in gate.reason
    assert judge(0, 60, figures(200, failures=2)).action == "advance"  # 1.0% ≤ 1.1%


def test_without_serving_traffic_only_the_absolute_bounds_apply():
    idle = ReleaseFigures(requests=0, failures=0)
    assert judge(0, 60, figures(100, p99=5000), current=idle).action == "advance"
    bounded = POLICY.model_copy(update={"max_p99_ms": 1000.0})
    gate = judge(0, 60, figures(100, p99=5000), current=idle, policy=bounded)
    assert (gate.action, gate.reason) == ("roll back",
                                          "at 5%: p99 5000 ms over the bound of 1000 ms")
    assert judge(0, 60, figures(100, failures=2), current=idle).action == "roll back"


def test_a_step_that_never_gets_enough_requests_is_rolled_back_at_the_timeout():
    gate = judge(1, 901, figures(12))
    assert gate.action == "roll back"
    assert "only 12 of 100 requests in 901 s" in gate.reason


def test_policy_steps_must_rise_and_end_at_100():
    with pytest.raises(ValidationError, match="steps must end at 100"):
        CanaryPolicy(steps=(5, 50))
    with pytest.raises(ValidationError, match="steps must rise"):
        CanaryPolicy(steps=(50, 25, 100))
    with pytest.raises(ValidationError):
        CanaryPolicy(steps=(0, 100))


def test_a_manifest_section_overrides_only_what_it_names():
    policy = CanaryOverride(steps=(10, 100), max_p99_ratio=1.2).over(ServingConfig().canary)
    assert policy.steps == (10, 100)
    assert policy.max_p99_ratio == 1.2
    assert policy.min_requests == ServingConfig().canary.min_requests


def test_the_state_keeps_every_decision_that_moved_it_and_only_the_last_hold():
    state = CanaryState(policy=POLICY, against="r-1")
    for at, action in enumerate(["hold", "hold", "advance", "hold", "roll back"]):
        state.note(GateRecord(at=at, step=0, weight=5, action=action, reason=action))
    assert [r.action for r in state.decisions] == ["advance", "roll back"]
    assert state.last is not None
    assert state.last.at == 4


def test_a_slower_model_is_caught_on_compute_time_when_its_light_load_hides_it():
    # At 5% the canary barely queues: its request p99 looks like the loaded release's,
    # but the model itself runs three times longer.
    serving = SERVING.model_copy(update={"p99_ms": 70.0, "compute_p99_ms": 33.0})
    canary = ReleaseFigures(requests=100, failures=0, error_rate=0.0, p99_ms=98.0,
                            compute_p99_ms=97.0)
    gate = judge(0, 10, canary, current=serving)
    assert gate.action == "roll back"
    assert "compute p99 97 ms against 33 ms (at most 1.5x + 10 ms = 60 ms)" in gate.reason
    same_speed = canary.model_copy(update={"compute_p99_ms": 40.0})
    assert judge(0, 60, same_speed, current=serving).action == "advance"


def test_a_decision_says_what_share_of_the_requests_the_new_release_served():
    record = GateRecord(at=0, step=1, weight=25, action="advance", reason="ok",
                        new=figures(66), current=figures(255))
    assert record.served_share == pytest.approx(66 / 321)
    assert record.figures().endswith("it answered 21% of them")
    assert GateRecord(at=0, step=0, weight=5, action="hold", reason="-").served_share is None


def test_request_p99_of_fewer_than_100_requests_decides_nothing_but_compute_p99_does():
    # Five requests met by a busy machine: their "p99" is the slowest of five.
    noisy = ReleaseFigures(requests=5, failures=0, error_rate=0.0, p99_ms=150.0,
                           compute_p99_ms=35.0)
    serving = SERVING.model_copy(update={"p99_ms": 82.0, "compute_p99_ms": 53.0})
    small = POLICY.model_copy(update={"min_requests": 5, "max_p99_ms": 100.0})
    assert judge(0, 60, noisy, current=serving, policy=small).action == "advance"
    slow = noisy.model_copy(update={"compute_p99_ms": 97.0})
    assert judge(0, 5, slow, current=serving, policy=small).action == "roll back"
