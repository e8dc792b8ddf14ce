"""The canary's gate: is a new Triton release as good as the one that serves? (pure)

A release that is ready takes ``steps[0]`` percent of the model's requests through
the Gateway's route; the rest still go to the release that serves. At every tick of
``reconcile_models`` the two are compared on the servers' own figures for the
current step (requests, failures, p99 latency, from Prometheus), and the gate says:

- **roll back** as soon as the new release has answered ``min_requests`` in the step
  and its error rate exceeds the serving release's by more than
  ``max_error_rate_increase``, or its p99 exceeds ``max_p99_ratio`` times the serving
  release's p99 plus ``p99_slack_ms``, or ``max_p99_ms``; the same ratio holds for the
  p99 of the model's compute time, which queueing does not inflate (a canary at 5 %
  queues less than the release serving 95 %, so request p99 alone flatters it). Request
  p99 is judged only from 100 requests on (below, it is the slowest request). Also
  when a step has not seen ``min_requests`` within the rollout timeout: a release
  nobody could judge is not promoted;
- **advance** to the next step once the step has lasted ``min_seconds`` with
  ``min_requests`` answered within the SLO; when the next step is 100 that is the
  **promotion**;
- **hold** otherwise, saying what it waits for.

A serving release with no requests in the window (nothing to compare with) leaves
only the absolute bound ``max_p99_ms`` and a zero baseline error rate.

Every decision that moves the canary is kept with the figures and the policy it used,
so ``accelops models status`` can say why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.config import CanaryPolicy

__all__ = ["P99_MIN_REQUESTS", "Action", "CanaryState", "Gate", "GateRecord", "ReleaseFigures",
           "judge_step"]

Action = Literal["hold", "advance", "promote", "roll back"]
MAX_RECORDS = 20
# Below this many requests a 0.99 quantile is the maximum.
P99_MIN_REQUESTS = 100


class ReleaseFigures(BaseModel):
    """One release's figures over one window, as the gate read them."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    requests: float
    failures: float
    error_rate: float | None = None  # None: no requests
    p99_ms: float | None = None
    # The model's own time per request, without queueing (see release_metrics).
    compute_p99_ms: float | None = None

    def words(self) -> str:
        if not self.requests:
            return "no requests"
        rate = f"{self.error_rate:.2%}" if self.error_rate is not None else "-"
        p99 = f"{self.p99_ms:.0f} ms" if self.p99_ms is not None else "-"
        compute = f", compute p99 {self.compute_p99_ms:.0f} ms" \
            if self.compute_p99_ms is not None else ""
        return f"{self.requests:.0f} requests, {rate} errors, p99 {p99}{compute}"


class GateRecord(BaseModel):
    """A decision of the gate and the numbers it was made on."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    at: float
    step: int
    weight: int
    action: Action
    reason: str
    window_seconds: float = 0.0
    new: ReleaseFigures | None = None
    current: ReleaseFigures | None = None

    @property
    def served_share(self) -> float | None:
        """The share of the window's requests the new release answered, by the servers'
        own counts: what the route's weight actually gave it."""
        if self.new is None or self.current is None:
            return None
        total = self.new.requests + self.current.requests
        return self.new.requests / total if total else None

    def figures(self) -> str:
        """Both releases' figures, and the share the new one served, in words."""
        share = self.served_share
        seen = f"; it answered {share:.0%} of them" if share is not None else ""
        return (f"new {self.new.words() if self.new else '-'}; serving "
                f"{self.current.words() if self.current else '-'}{seen}")


class CanaryState(BaseModel):
    """Where a release's canary stands: its policy, step, and what was decided."""

    model_config = ConfigDict(extra="ignore")

    policy: CanaryPolicy
    against: str  # the release id it is compared with (the one that serves)
    step: int = 0
    step_started: float = 0.0
    last: GateRecord | None = None  # the latest look, whatever it decided
    decisions: list[GateRecord] = Field(default_factory=list)  # those that moved it

    @property
    def weight(self) -> int:
        return self.policy.steps[self.step]

    def note(self, record: GateRecord) -> None:
        self.last = record
        if record.action != "hold":
            self.decisions = [*self.decisions, record][-MAX_RECORDS:]


@dataclass(frozen=True, slots=True)
class Gate:
    action: Action
    reason: str


def _breach(policy: CanaryPolicy, new: ReleaseFigures,
            current: ReleaseFigures | None) -> str | None:
    baseline = current.error_rate if current is not None and current.requests and \
        current.error_rate is not None else 0.0
    if new.error_rate is not None and new.error_rate > baseline + \
            policy.max_error_rate_increase:
        return (f"error rate {new.error_rate:.2%} against {baseline:.2%} (at most "
                f"+{policy.max_error_rate_increase:.2%})")
    # A request p99 of fewer than 100 requests is their slowest one, and a request's
    # time is mostly its wait in the queue: a new release's first few requests, met by
    # a busy machine, would decide alone. Its compute p99 carries no queue and is judged
    # from min_requests on.
    request_p99 = new.p99_ms if new.requests >= P99_MIN_REQUESTS else None
    if request_p99 is not None and policy.max_p99_ms is not None and \
            request_p99 > policy.max_p99_ms:
        return f"p99 {request_p99:.0f} ms over the bound of {policy.max_p99_ms:.0f} ms"
    if current is None or not current.requests:
        return None
    for what, mine, theirs in (("p99", request_p99, current.p99_ms),
                               ("compute p99", new.compute_p99_ms, current.compute_p99_ms)):
        if mine is None or theirs is None:
            continue
        bound = theirs * policy.max_p99_ratio + policy.p99_slack_ms
        if mine > bound:
            return (f"{what} {mine:.0f} ms against {theirs:.0f} ms (at most "
                    f"{policy.max_p99_ratio:g}x + {policy.p99_slack_ms:g} ms = "
                    f"{bound:.0f} ms)")
    return None


def judge_step(policy: CanaryPolicy, step: int, age_seconds: float, new: ReleaseFigures,
               current: ReleaseFigures | None, *, timeout_seconds: float) -> Gate:
    """The gate's word on ``step`` (an index into ``policy.steps``), held for
    ``age_seconds``, given both releases' figures over the step."""
    weight = policy.steps[step]
    if new.requests >= policy.min_requests:
        breach = _breach(policy, new, current)
        if breach is not None:
            return Gate("roll back", f"at {weight}%: {breach}")
        if age_seconds >= policy.min_seconds:
            following = policy.steps[step + 1]
            within = f"within the SLO at {weight}% for {age_seconds:.0f} s"
            if following == 100:
                return Gate("promote", f"{within}: promoted")
            return Gate("advance", f"{within}: on to {following}%")
        return Gate("hold", f"at {weight}%: within the SLO so far, held "
                            f"{age_seconds:.0f} s of {policy.min_seconds:g} s")
    if age_seconds > timeout_seconds:
        return Gate("roll back", f"at {weight}%: only {new.requests:.0f} of "
                                 f"{policy.min_requests} requests in {age_seconds:.0f} s, "
                                 f"too few to judge it")
    return Gate("hold", f"at {weight}%: {new.requests:.0f} of {policy.min_requests} "
                        f"requests so far, {age_seconds:.0f} s held")
