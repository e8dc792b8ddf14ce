"""What a function answers when an exception leaves it, or never reaches it.

functions-framework answers 500 to every exception, and a 500 asks the sender to retry.
That is right for an outage and for a bug in accelops, and wrong for a request that can
never be read, which would be retried until it is dead-lettered. Two kinds are the
sender's mistake and answered 400 with the reason:

* a request the framework itself cannot turn into a CloudEvent — a structured-mode body
  that is a JSON array, a body nested deeper than the JSON parser recurses, a number too
  long for Python to convert — which fails inside functions-framework or cloudevents
  before any entry point runs;
* an event an entry point found not to be a Pub/Sub message (InvalidEventError).

Pub/Sub never sends either; a misconfigured pusher might. A push sender retries a 400
like a 500 (so nothing is lost unread), but the answer and the ERROR log line say what
is wrong instead of "Internal Server Error". Exceptions raised in accelops code keep
the framework's 500 — retry — whatever their type.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from werkzeug.exceptions import HTTPException

from shared.errors import InvalidEventError

__all__ = ["answer_error", "install"]

_REASON_CHARS = 1000


def _raised_in(traceback: TracebackType | None, modules: tuple[str, ...]) -> bool:
    """Whether any frame of the traceback runs code of one of ``modules`` (or below)."""
    while traceback is not None:
        name = str(traceback.tb_frame.f_globals.get("__name__", ""))
        if any(name == m or name.startswith(m + ".") for m in modules):
            return True
        traceback = traceback.tb_next
    return False


def answer_error(error: Exception, modules: tuple[str, ...],
                 crash: Callable[[Exception], Any]) -> Any:
    """The response to ``error``; ``crash`` builds the framework's own 500."""
    # Imported here: main.py installs this at import, and only errors need them (they
    # would double the entry-point module's import, 1.7 ms, in every cold start).
    from shared.log import configure, get_logger  # noqa: PLC0415
    from shared.safetext import clean  # noqa: PLC0415

    if isinstance(error, HTTPException):
        return error  # the framework's own 4xx answers stand
    if isinstance(error, InvalidEventError):
        reason = clean(error.message, _REASON_CHARS).text  # the handler logged it
    elif _raised_in(error.__traceback__, modules):
        return crash(error)
    else:
        reason = clean(f"the request could not be read as a CloudEvent: "
                       f"{type(error).__name__}: {error}", _REASON_CHARS).text
        configure()
        get_logger("accelops.entry").error(reason, error=type(error).__name__, status=400)
    return reason, 400, {"Content-Type": "text/plain; charset=utf-8"}


def install(errorhandler: Any, crash: Callable[[Exception], Any], entry_module: str) -> None:
    """Register :func:`answer_error` with functions-framework's ``errorhandler``.

    ``entry_module`` is the module of the entry points; it and ``shared`` count as
    accelops code.
    """
    modules = (entry_module, "shared")

    def handler(error: Exception) -> Any:
        return answer_error(error, modules, crash)

    errorhandler(Exception)(handler)
