"""Structured JSON logs in the format Cloud Logging parses from stdout.

Cloud Run forwards each stdout line; a line that is a JSON object becomes a
``jsonPayload`` whose ``severity`` and ``message`` keys are lifted into the log
entry. Every record carries the id of the event being handled (set once per
invocation with :func:`bind_event`) so one delivery's lines can be found together.

Built on :mod:`logging` so that tests capture records with ``caplog`` and the
platform's own handlers keep working.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from shared.safetext import lone_surrogate

__all__ = ["StructuredLogger", "bind_event", "configure", "get_logger"]

_event_fields: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "accelops_event_fields", default=None
)

_SEVERITY = {
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    logging.WARNING: "WARNING",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "CRITICAL",
}


class JsonFormatter(logging.Formatter):
    """Formats a record as one Cloud Logging JSON line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "severity": _SEVERITY.get(record.levelno, "DEFAULT"),
            "message": record.getMessage(),
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "logger": record.name,
        }
        entry.update(_event_fields.get() or {})
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        line = json.dumps(entry, default=str, ensure_ascii=False)
        if lone_surrogate(line) is not None:
            # User input (JSON's "\ud800") that cannot be written as UTF-8; escaped,
            # the line is still valid JSON and the entry is not lost.
            line = json.dumps(entry, default=str)
        return line


class StructuredLogger:
    """A logger whose keyword arguments become fields of the JSON entry."""

    def __init__(self, name: str) -> None:
        self._logger = logging.getLogger(name)

    def debug(self, message: str, **fields: Any) -> None:
        self._log(logging.DEBUG, message, fields)

    def info(self, message: str, **fields: Any) -> None:
        self._log(logging.INFO, message, fields)

    def warning(self, message: str, **fields: Any) -> None:
        self._log(logging.WARNING, message, fields)

    def error(self, message: str, **fields: Any) -> None:
        self._log(logging.ERROR, message, fields)

    def at(self, level: str, message: str, **fields: Any) -> None:
        """Log at a level given by name ("warning", "error", ...)."""
        self._log(logging.getLevelNamesMapping()[level.upper()], message, fields)

    def exception(self, message: str, **fields: Any) -> None:
        self._log(logging.ERROR, message, fields, exc_info=True)

    def _log(self, level: int, message: str, fields: dict[str, Any],
             exc_info: bool = False) -> None:
        if self._logger.isEnabledFor(level):
            self._logger.log(level, message, extra={"fields": fields}, exc_info=exc_info,
                             stacklevel=3)


def get_logger(name: str) -> StructuredLogger:
    return StructuredLogger(name)


@contextlib.contextmanager
def bind_event(**fields: Any) -> Iterator[None]:
    """Attach fields (the event id, its source…) to every record logged inside."""
    token = _event_fields.set({**(_event_fields.get() or {}), **fields})
    try:
        yield
    finally:
        _event_fields.reset(token)


def configure(level: int = logging.INFO) -> None:
    """Send accelops records to stdout as JSON lines, once per process."""
    root = logging.getLogger("accelops")
    if any(isinstance(h.formatter, JsonFormatter) for h in root.handlers):
        return
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter())
    root.addHandler(handler)
    root.setLevel(level)
    root.propagate = True
