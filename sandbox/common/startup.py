"""How the sandbox waits for its parts to come up: on readiness, not on a short clock.

On a busy machine (two cores shared with a test run, say) a part can take minutes to
answer — the Python stand-ins spend seconds importing their clients, tritonserver
loads its models, the Java Pub/Sub emulator starts a JVM — and none of that is a
failure. So a start-up wait keeps waiting while the process is alive, prints which
part it is waiting for and for how long (``waiting for pubsub (12 s)…``), and fails at
once, quoting the log's last lines, when the process exits. What remains of a deadline
is there only so that a part that hangs does not hang ``sandbox up`` for ever: it is
generous (:data:`DEFAULT_START_TIMEOUT`), set in one place (``--start-timeout`` of
``accelops sandbox up`` / ``accelops demo``, else :data:`ENV_VAR`), applies to each wait
(a group of parts coming up, one kubectl step), and its error names the part, its log
and the setting to raise.

:func:`decide` is the pure decision (what the caller observed → keep waiting, done, or
fail with which message); :func:`wait_for_parts` polls and acts on it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "DEFAULT_START_TIMEOUT",
    "ENV_VAR",
    "PROGRESS_EVERY",
    "Done",
    "Failed",
    "Observed",
    "StartupError",
    "Waiting",
    "decide",
    "raise_hint",
    "resolve_start_timeout",
    "timeout_message",
    "wait_for_parts",
]

#: The environment variable setting the start-up deadline (seconds) of every wait.
ENV_VAR = "ACCELOPS_SANDBOX_START_TIMEOUT"
#: Ten minutes: a cold start on a loaded 2-core machine takes one or two.
DEFAULT_START_TIMEOUT = 600.0
#: Real seconds between two "waiting for ..." lines.
PROGRESS_EVERY = 5.0


class StartupError(RuntimeError):
    """A part exited during start-up or did not answer within the deadline; the message
    says which, where its log is and what to do."""


def resolve_start_timeout(option: float | None = None) -> float:
    """The start-up deadline in seconds: ``option`` (``--start-timeout``), else
    ``$ACCELOPS_SANDBOX_START_TIMEOUT``, else :data:`DEFAULT_START_TIMEOUT`.

    Raises ValueError naming the setting when the value is not a positive number.
    """
    source, text = ("--start-timeout", str(option)) if option is not None else (
        ENV_VAR, os.environ.get(ENV_VAR, "").strip())
    if not text:
        return DEFAULT_START_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"{source} must be a positive number of seconds, not {text!r}")
    return seconds


def raise_hint(timeout: float) -> str:
    """What to do about a deadline that passed: the two ways to set a longer one."""
    longer = f"{max(timeout * 2, DEFAULT_START_TIMEOUT):.0f}"
    return (f"if the machine is busy, give it longer: `accelops sandbox up --start-timeout "
            f"{longer}` (or {ENV_VAR}={longer}; now {timeout:g} s)")


@dataclass(frozen=True)
class Observed:
    """One part as a wait sees it at one instant. ``tail``: the last lines of its log,
    read only once the process has exited."""

    name: str
    ready: bool
    running: bool
    log: str
    tail: str = ""


@dataclass(frozen=True)
class Waiting:
    """Keep waiting for ``pending``; ``report`` is a progress line due now, if any."""

    pending: tuple[str, ...]
    report: str | None = None


@dataclass(frozen=True)
class Done:
    """Every part answers."""


@dataclass(frozen=True)
class Failed:
    """Stop waiting: ``message`` says which part, its log and what to do."""

    message: str


def timeout_message(names: Sequence[str], logs: Sequence[str], timeout: float,
                    what: str = "did not answer") -> str:
    """The error of a deadline that passed while ``names`` were still running."""
    parts = ", ".join(names)
    where = "; ".join(logs)
    return (f"{parts} {what} within {timeout:g} s, though still running; see "
            f"{'its log' if len(logs) == 1 else 'their logs'} {where}. {raise_hint(timeout)}")


def decide(parts: Sequence[Observed], *, waited: float, timeout: float,
           reported_at: float) -> Done | Waiting | Failed:
    """What a wait does next, given each part as observed ``waited`` seconds into it
    (``reported_at``: when the last progress line was printed, 0 for none yet).

    A part that answers is done; one that exited before answering fails the wait at
    once, with its log's tail; the others are waited for, with a progress line every
    :data:`PROGRESS_EVERY` seconds, until ``timeout``.
    """
    pending = [part for part in parts if not part.ready]
    if not pending:
        return Done()
    for part in pending:
        if not part.running:
            tail = f":\n{part.tail}" if part.tail else " (it wrote nothing)"
            return Failed(f"{part.name} exited during start-up after {waited:.0f} s; see "
                          f"{part.log}{tail}")
    if waited >= timeout:
        return Failed(timeout_message([p.name for p in pending], [p.log for p in pending],
                                      timeout))
    names = tuple(part.name for part in pending)
    if waited - reported_at >= PROGRESS_EVERY:
        return Waiting(names, f"waiting for {', '.join(names)} ({waited:.0f} s)…")
    return Waiting(names)


Observe = Callable[[Sequence[str]], list[Observed]]


def wait_for_parts(names: Sequence[str], observe: Observe, *, timeout: float,
                   progress: Callable[[str], None] | None = None,
                   interval: float = 0.05,
                   clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep) -> float:
    """Poll ``observe`` until every part in ``names`` answers; the seconds it took.

    ``progress`` gets the "waiting for ..." lines (and, for a wait that printed one,
    the time it took at the end). Raises StartupError as :func:`decide` fails.
    """
    started = clock()
    reported_at = 0.0
    pending: Sequence[str] = list(names)
    while True:
        waited = clock() - started
        decision = decide(observe(pending), waited=waited, timeout=timeout,
                          reported_at=reported_at)
        if isinstance(decision, Done):
            if progress is not None and reported_at:
                progress(f"{', '.join(names)} up after {waited:.1f} s")
            return waited
        if isinstance(decision, Failed):
            raise StartupError(decision.message)
        pending = decision.pending
        if decision.report is not None:
            reported_at = waited
            if progress is not None:
                progress(decision.report)
        sleep(interval)
