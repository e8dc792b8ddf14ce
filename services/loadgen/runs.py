"""Run records: what describes a test as a whole, published at its start and its stop.

The contract is :class:`shared.metrics.run.RunRecord`: one JSON object per message,
attributes ``kind=run`` and ``test_id``. This module builds that object from what a
Locust process knows; the plugin publishes it through the same outbox as the request
records. Pure and forgiving like :mod:`services.loadgen.records`: an odd value is
clamped or dropped (``None``), never raised, because a test without its run record is
summarised from guesses.

Two things are not where one would look for them:

* **Users, spawn rate and run time on a worker.** Locust's master hands its workers only
  the options Locust does not define itself, so a worker sees its own ``-u``/``-r``/``-t``
  defaults, not the test's. The master copies the three under names of ours at test
  start (:func:`forwarded_options`, set on its parsed options before it dispatches);
  :func:`run_parameters` prefers those copies. ``users`` is the number asked for
  across all workers, the same in the start and the stop record.
* **The host.** ``--host`` may carry credentials (``http://user:token@...``) or a query
  with a key; only scheme, host, port and path are recorded (:func:`public_host`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from shared.metrics.run import KIND_ATTRIBUTE, RUN_KIND, Phase

from .records import RunInfo

__all__ = [
    "RunParameters",
    "asked_parameters",
    "build_run_record",
    "forwarded_options",
    "public_host",
    "run_attributes",
    "run_parameters",
    "run_time_seconds",
]

_SHORT = 256
_HOST = 1024
_MAX_USERS = 10**9
_MAX_SPAWN_RATE = 1_000_000.0
_MAX_RUN_TIME = 604_800.0  # RunRecord's bound: a week
# Locust's own timespan syntax: 90, 90s, 5m, 1h30m, 2h10m5s.
_TIMESPAN = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
# Names under which the master forwards its -u / -r / -t to the workers.
_USERS, _SPAWN_RATE, _RUN_TIME = "loadgen_run_users", "loadgen_run_spawn_rate", "loadgen_run_time"


@dataclass(frozen=True, slots=True)
class RunParameters:
    """What the test asked Locust for."""

    users: int | None
    spawn_rate: float | None
    run_time_s: float | None


def _users(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return min(max(int(value), 0), _MAX_USERS)


def _rate(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return min(max(float(value), 0.0), _MAX_SPAWN_RATE)


def run_time_seconds(value: Any) -> float | None:
    """``--run-time`` in seconds (Locust has usually parsed it already; ``"1h30m"`` is read
    too); None when unbounded (unset, 0) or unreadable, at most a week."""
    seconds: float | None = None
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = float(value) if math.isfinite(value) else None
    elif isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            seconds = float(text)
        elif text and (found := _TIMESPAN.match(text)):
            hours, minutes, secs = (int(part or 0) for part in found.groups())
            seconds = float(hours * 3600 + minutes * 60 + secs)
    if seconds is None or seconds <= 0:
        return None
    return min(seconds, _MAX_RUN_TIME)


def _option(options: Any, name: str) -> Any:
    return getattr(options, name, None)


def asked_parameters(options: Any) -> RunParameters:
    """The users, spawn rate and run time in Locust's own options (``-u``, ``-r``,
    ``-t``, or what the web UI's form set them to)."""
    return RunParameters(users=_users(_option(options, "num_users")),
                         spawn_rate=_rate(_option(options, "spawn_rate")),
                         run_time_s=run_time_seconds(_option(options, "run_time")))


def run_parameters(options: Any) -> RunParameters:
    """The test's users, spawn rate and run time: the master's forwarded copies when
    there are any (on a worker), else Locust's own options."""
    if not hasattr(options, _USERS):
        return asked_parameters(options)
    return RunParameters(users=_users(_option(options, _USERS)),
                         spawn_rate=_rate(_option(options, _SPAWN_RATE)),
                         run_time_s=run_time_seconds(_option(options, _RUN_TIME)))


def forwarded_options(parameters: RunParameters) -> dict[str, Any]:
    """What the master adds to its parsed options so its workers receive the parameters."""
    return {_USERS: parameters.users, _SPAWN_RATE: parameters.spawn_rate,
            _RUN_TIME: parameters.run_time_s}


def public_host(host: Any) -> str | None:
    """``--host`` without credentials, query or fragment: ``http://user:pw@h:80/p?k=v#f``
    becomes ``http://h:80/p``. The authority ends at the first ``/``, ``?`` or ``#`` and
    its userinfo at its last ``@``, as RFC 3986 parsers read it. None when empty."""
    text = host.strip() if isinstance(host, str) else ""
    if not text:
        return None
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority = rest[:end].rpartition("@")[2]
    path = re.split(r"[?#]", rest[end:], maxsplit=1)[0]
    return f"{scheme}{sep}{authority}{path}"[:_HOST] or None


def _short(value: Any) -> str | None:
    return None if value is None else str(value)[:_SHORT]


def build_run_record(phase: Phase, at: float, run: RunInfo, parameters: RunParameters, *,
                     host: Any, locust_version: Any,
                     loadgen_revision: str | None) -> dict[str, Any]:
    """The run record of ``phase``, with exactly :class:`~shared.metrics.run.RunRecord`'s
    fields; ``at`` is epoch seconds."""
    return {
        "test_id": run.test_id,
        "phase": phase,
        "at": float(at),
        "model_name": _short(run.model),
        "server": _short(run.server),
        "accelerator": _short(run.accelerator),
        "users": parameters.users,
        "spawn_rate": parameters.spawn_rate,
        "run_time_s": parameters.run_time_s,
        "locust_version": _short(locust_version),
        "loadgen_revision": _short(loadgen_revision),
        "host": public_host(host),
        "slo_ttft_ms": run.slos.ttft_ms,
        "slo_tpot_ms": run.slos.tpot_ms,
        "slo_latency_ms": run.slos.latency_ms,
    }


def run_attributes(test_id: str) -> dict[str, str]:
    """A run message's attributes: its kind, so subscribers need not parse it, and the test."""
    return {KIND_ATTRIBUTE: RUN_KIND, "test_id": test_id}
