"""Google API errors as the Container API answers them over REST.

Every failure is ``{"error": {"code": <http>, "message": ..., "status": <canonical code>}}``.
google-api-core maps REST errors by HTTP code only (400 → ``BadRequest``,
404 → ``NotFound``, 409 → ``Conflict``, 429 → ``TooManyRequests``, 503 →
``ServiceUnavailable``); the canonical ``status`` (FAILED_PRECONDITION vs
INVALID_ARGUMENT, both 400) stays readable in ``exc.response.json()``, and an
ErrorInfo in ``details`` becomes the exception's ``reason``.
"""

from __future__ import annotations

from typing import Any

JsonObject = dict[str, Any]

#: Canonical status → HTTP code (google.rpc.Code mapping of the JSON/REST APIs).
HTTP_FOR_STATUS: dict[str, int] = {
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "ABORTED": 409,
    "RESOURCE_EXHAUSTED": 429,
    "CANCELLED": 499,
    "INTERNAL": 500,
    "UNKNOWN": 500,
    "DATA_LOSS": 500,
    "UNIMPLEMENTED": 501,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}

#: HTTP code → the canonical status a Google API usually answers with it.
STATUS_FOR_HTTP: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

#: Canonical status → numeric google.rpc.Code (used in ``Operation.error.code``).
GRPC_CODES: dict[str, int] = {
    "OK": 0,
    "CANCELLED": 1,
    "UNKNOWN": 2,
    "INVALID_ARGUMENT": 3,
    "DEADLINE_EXCEEDED": 4,
    "NOT_FOUND": 5,
    "ALREADY_EXISTS": 6,
    "PERMISSION_DENIED": 7,
    "RESOURCE_EXHAUSTED": 8,
    "FAILED_PRECONDITION": 9,
    "ABORTED": 10,
    "OUT_OF_RANGE": 11,
    "UNIMPLEMENTED": 12,
    "INTERNAL": 13,
    "UNAVAILABLE": 14,
    "DATA_LOSS": 15,
    "UNAUTHENTICATED": 16,
}


def resolve_status(status: str | None, http_code: int | None) -> tuple[str, int]:
    """Complete a (status, http_code) pair from whichever half is given."""
    if status is None and http_code is None:
        status = "RESOURCE_EXHAUSTED"
    if status is not None:
        status = status.upper()
        if status not in HTTP_FOR_STATUS:
            raise ValueError(f"unknown canonical status {status!r}")
        return status, http_code if http_code is not None else HTTP_FOR_STATUS[status]
    assert http_code is not None
    return STATUS_FOR_HTTP.get(http_code, "UNKNOWN"), http_code


class GkeError(Exception):
    """A Container API error: canonical status, HTTP code and message."""

    def __init__(self, status: str, message: str, http_code: int | None = None, *,
                 details: list[JsonObject] | None = None) -> None:
        super().__init__(message)
        self.status, self.http_code = resolve_status(status, http_code)
        self.message = message
        #: google.rpc detail messages (``{"@type": ..., ...}``), e.g. an ErrorInfo.
        self.details = list(details or [])

    def body(self) -> JsonObject:
        error: JsonObject = {"code": self.http_code, "message": self.message,
                             "status": self.status}
        if self.details:
            error["details"] = self.details
        return {"error": error}


def invalid_argument(field: str, value: object, why: str) -> GkeError:
    """INVALID_ARGUMENT naming the field, in GKE's wording."""
    return GkeError("INVALID_ARGUMENT",
                    f"Invalid value for field '{field}': {_show(value)}. {why}")


def not_found(what: str) -> GkeError:
    return GkeError("NOT_FOUND", f"Not found: {what}.")


def already_exists(what: str) -> GkeError:
    return GkeError("ALREADY_EXISTS", f"Already exists: {what}.")


def failed_precondition(message: str) -> GkeError:
    return GkeError("FAILED_PRECONDITION", message)


def _show(value: object) -> str:
    return f"'{value}'" if isinstance(value, str) else repr(value)
