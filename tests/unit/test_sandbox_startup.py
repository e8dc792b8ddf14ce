"""The sandbox's start-up waits (sandbox/common/startup.py): the pure decision, the deadline
setting, and the polling loop on a fake clock."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from sandbox.common.startup import (
    DEFAULT_START_TIMEOUT,
    ENV_VAR,
    PROGRESS_EVERY,
    Done,
    Failed,
    Observed,
    StartupError,
    Waiting,
    decide,
    resolve_start_timeout,
    wait_for_parts,
)

LOG = "/state/logs/pubsub.log"


def _part(name: str = "pubsub", *, ready: bool = False, running: bool = True,
          tail: str = "") -> Observed:
    return Observed(name, ready, running, f"/state/logs/{name}.log", tail)


def test_a_part_alive_but_not_answering_is_waited_for_and_reported_every_few_seconds(
) -> None:
    quiet = decide([_part()], waited=2.0, timeout=600, reported_at=0.0)
    due = decide([_part()], waited=PROGRESS_EVERY + 1, timeout=600, reported_at=0.0)
    assert quiet == Waiting(("pubsub",))
    assert due == Waiting(("pubsub",), f"waiting for pubsub ({PROGRESS_EVERY + 1:.0f} s)…")


def test_a_progress_line_names_only_the_parts_still_pending() -> None:
    decision = decide([_part("cluster", ready=True), _part("inference"), _part("bigquery")],
                      waited=75.0, timeout=600, reported_at=60.0)
    assert decision == Waiting(("inference", "bigquery"),
                               "waiting for inference, bigquery (75 s)…")


def test_a_slow_part_is_still_waited_for_past_the_old_sixty_seconds() -> None:
    decision = decide([_part("inference")], waited=180.0, timeout=DEFAULT_START_TIMEOUT,
                      reported_at=178.0)
    assert decision == Waiting(("inference",))


def test_every_part_answering_ends_the_wait() -> None:
    assert decide([_part(ready=True), _part("cluster", ready=True)], waited=1.0,
                  timeout=600, reported_at=0.0) == Done()


def test_a_part_that_exited_fails_the_wait_at_once_with_its_log_tail() -> None:
    decision = decide([_part(running=False, tail="OSError: [Errno 98] Address in use")],
                      waited=1.0, timeout=600, reported_at=0.0)
    assert isinstance(decision, Failed)
    assert decision.message == (f"pubsub exited during start-up after 1 s; see {LOG}:\n"
                                "OSError: [Errno 98] Address in use")


def test_a_part_that_exited_having_written_nothing_says_so() -> None:
    decision = decide([_part(running=False)], waited=0.0, timeout=600, reported_at=0.0)
    assert isinstance(decision, Failed)
    assert decision.message.endswith(f"see {LOG} (it wrote nothing)")


def test_a_part_that_answered_and_then_exited_is_not_a_start_up_failure() -> None:
    # Readiness is what the wait is for; a later crash is the status command's to report.
    assert decide([_part(ready=True, running=False)], waited=1.0, timeout=600,
                  reported_at=0.0) == Done()


def test_the_deadline_error_names_the_part_its_log_and_the_setting_to_raise() -> None:
    decision = decide([_part("cluster", ready=True), _part("inference")], waited=90.0,
                      timeout=90.0, reported_at=85.0)
    assert isinstance(decision, Failed)
    assert decision.message == (
        "inference did not answer within 90 s, though still running; see its log "
        "/state/logs/inference.log. if the machine is busy, give it longer: `accelops "
        "sandbox up --start-timeout 600` (or ACCELOPS_SANDBOX_START_TIMEOUT=600; now 90 s)")


def test_the_deadline_error_suggests_twice_a_deadline_already_raised() -> None:
    decision = decide([_part(), _part("bigquery")], waited=900.0, timeout=900.0,
                      reported_at=0.0)
    assert isinstance(decision, Failed)
    assert "pubsub, bigquery did not answer within 900 s" in decision.message
    assert "their logs /state/logs/pubsub.log; /state/logs/bigquery.log" in decision.message
    assert "--start-timeout 1800` (or ACCELOPS_SANDBOX_START_TIMEOUT=1800" in decision.message


def test_an_exit_is_reported_before_the_deadline_that_passed_meanwhile() -> None:
    decision = decide([_part(running=False, tail="Traceback")], waited=700.0, timeout=600,
                      reported_at=0.0)
    assert isinstance(decision, Failed)
    assert "exited during start-up" in decision.message


def test_the_deadline_defaults_to_ten_minutes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert resolve_start_timeout() == DEFAULT_START_TIMEOUT == 600.0


def test_the_deadline_comes_from_the_option_before_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "1200")
    assert resolve_start_timeout() == 1200.0
    assert resolve_start_timeout(45.0) == 45.0


@pytest.mark.parametrize(("option", "env", "source"), [
    (None, "soon", ENV_VAR), (None, "0", ENV_VAR), (None, "inf", ENV_VAR),
    (-5.0, "", "--start-timeout"),
])
def test_a_deadline_that_is_not_a_positive_number_is_refused_naming_the_setting(
        monkeypatch: pytest.MonkeyPatch, option: float | None, env: str, source: str) -> None:
    monkeypatch.setenv(ENV_VAR, env)
    with pytest.raises(ValueError, match=f"^{source} must be a positive number of seconds"):
        resolve_start_timeout(option)


class _FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_wait_prints_progress_while_a_slow_part_comes_up_then_how_long_it_took() -> None:
    clock = _FakeClock()
    lines: list[str] = []

    def observe(names: Sequence[str]) -> list[Observed]:
        # pubsub answers at once; inference after 12 simulated seconds.
        return [_part(name, ready=name == "pubsub" or clock.now >= 12.0) for name in names]

    waited = wait_for_parts(["pubsub", "inference"], observe, timeout=600.0,
                            progress=lines.append, interval=1.0, clock=clock,
                            sleep=clock.sleep)
    assert waited == 12.0
    assert lines == ["waiting for inference (5 s)…", "waiting for inference (10 s)…",
                     "pubsub, inference up after 12.0 s"]


def test_a_wait_that_needed_no_progress_line_prints_nothing() -> None:
    clock = _FakeClock()
    lines: list[str] = []
    wait_for_parts(["pubsub"], lambda names: [_part(n, ready=clock.now >= 2) for n in names],
                   timeout=600.0, progress=lines.append, interval=1.0, clock=clock,
                   sleep=clock.sleep)
    assert lines == []


def test_the_wait_raises_the_deadline_error_when_a_part_never_answers() -> None:
    clock = _FakeClock()
    with pytest.raises(StartupError, match=r"^pubsub did not answer within 30 s"):
        wait_for_parts(["pubsub"], lambda names: [_part(n) for n in names], timeout=30.0,
                       interval=1.0, clock=clock, sleep=clock.sleep)
    assert clock.now == 30.0
