"""Fault injection: make the next API requests fail like an overloaded apiserver.

Retry and back-off code (429 Too Many Requests, 503 during a control-plane
upgrade, 500s) is only trustworthy if tests can make it run. Tests arm
``faults.fail_next(2, code=503)`` and the next two matching requests answer
with a real ``Status`` body and nothing is changed in the store.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from sandbox.kubeapi.errors import JsonObject, reason_for_code, status_body

_DEFAULT_MESSAGES = {
    429: "Too many requests, please try again later.",
    500: "Internal error occurred: injected fault",
    503: "The server is currently unable to handle the request (injected fault)",
    504: "Timeout: request did not complete within the allotted timeout (injected fault)",
}


@dataclass
class Fault:
    """One armed fault; ``remaining`` counts down as requests hit it."""

    remaining: int
    code: int
    message: str
    reason: str
    retry_after_seconds: int | None
    method: str | None
    path_contains: str | None

    def matches(self, method: str, path: str) -> bool:
        if self.method is not None and self.method.upper() != method.upper():
            return False
        return self.path_contains is None or self.path_contains in path

    def response(self) -> tuple[int, JsonObject, dict[str, str]]:
        details: JsonObject | None = None
        headers: dict[str, str] = {}
        if self.retry_after_seconds is not None:
            details = {"retryAfterSeconds": self.retry_after_seconds}
            headers["Retry-After"] = str(self.retry_after_seconds)
        body = status_body(self.code, self.reason, self.message, details=details)
        return self.code, body, headers


class FaultInjector:
    """Thread-safe queue of armed faults, consulted once per HTTP request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self.injected = 0

    def fail_next(
        self,
        count: int = 1,
        code: int = 503,
        *,
        message: str | None = None,
        reason: str | None = None,
        retry_after_seconds: int | None = None,
        method: str | None = None,
        path_contains: str | None = None,
    ) -> None:
        """Answer the next ``count`` matching requests with ``code`` and a Status body.

        ``method`` / ``path_contains`` narrow which requests are hit (e.g. only
        ``PATCH`` or only ``/jobsets``); requests that do not match pass through.
        ``retry_after_seconds`` adds a ``Retry-After`` header and
        ``details.retryAfterSeconds`` (what the real API sends with 429).
        """
        if count < 1:
            raise ValueError("count must be at least 1")
        fault = Fault(
            remaining=count,
            code=code,
            message=message or _DEFAULT_MESSAGES.get(code, f"injected fault {code}"),
            reason=reason or reason_for_code(code),
            retry_after_seconds=retry_after_seconds,
            method=method,
            path_contains=path_contains,
        )
        with self._lock:
            self._faults.append(fault)

    def clear(self) -> None:
        """Disarm every pending fault."""
        with self._lock:
            self._faults.clear()

    @property
    def pending(self) -> int:
        """How many requests armed faults will still fail."""
        with self._lock:
            return sum(fault.remaining for fault in self._faults)

    def take(self, method: str, path: str) -> tuple[int, JsonObject, dict[str, str]] | None:
        """The fault response for this request, if an armed fault matches it."""
        with self._lock:
            for fault in self._faults:
                if fault.matches(method, path):
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    self.injected += 1
                    return fault.response()
        return None
