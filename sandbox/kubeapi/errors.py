"""API errors that render as real Kubernetes ``Status`` bodies.

The store raises :class:`ApiError` and the HTTP layer turns it into the JSON
``Status`` object the real kube-apiserver sends, so that the official client
raises ``ApiException`` with the same ``.status`` and a ``.body`` that callers
can parse for ``reason``/``details`` exactly as they would against GKE.
"""

from __future__ import annotations

from typing import Any

JsonObject = dict[str, Any]

_REASON_BY_CODE: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def reason_for_code(code: int) -> str:
    """The ``Status.reason`` the real API uses for a bare HTTP code."""
    return _REASON_BY_CODE.get(code, "Unknown")


def qualified_resource(group: str, resource: str) -> str:
    """``jobsets.jobset.x-k8s.io`` / ``pods``, as the real API words messages."""
    return f"{resource}.{group}" if group else resource


class ApiError(Exception):
    """A failed API call; carries everything needed for a ``Status`` body."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: JsonObject | None = None,
        text: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.text = text  # a plain-text body instead of a Status (Go's http.NotFound)

    def to_status(self) -> JsonObject:
        """The ``Status`` body for this error."""
        return status_body(self.code, self.reason, self.message, details=self.details)

    def body(self) -> JsonObject | str:
        """What the response carries: the plain text, else the ``Status``."""
        return self.text if self.text is not None else self.to_status()

    # -- constructors mirroring k8s.io/apimachinery/pkg/api/errors ---------
    # (NewInvalid, built from field errors, is sandbox.kubeapi.field_errors.invalid_error)

    @classmethod
    def not_found(cls, group: str, resource: str, name: str) -> ApiError:
        return cls(
            404,
            "NotFound",
            f'{qualified_resource(group, resource)} "{name}" not found',
            details=_details(group, resource, name),
        )

    @classmethod
    def path_not_found(cls) -> ApiError:
        return cls(404, "NotFound", "the server could not find the requested resource")

    @classmethod
    def page_not_found(cls) -> ApiError:
        """The end of kube-apiserver's handler chain (``notfoundhandler``: Go's
        ``http.NotFound``): what a path of no served type gets, e.g. a custom resource
        whose CRD is not installed. Plain text, not a Status; clients report it as
        "the server could not find the requested resource"."""
        return cls(404, "NotFound", "the server could not find the requested resource",
                   text="404 page not found\n")

    @classmethod
    def already_exists(cls, group: str, resource: str, name: str) -> ApiError:
        return cls(
            409,
            "AlreadyExists",
            f'{qualified_resource(group, resource)} "{name}" already exists',
            details=_details(group, resource, name),
        )

    @classmethod
    def conflict(cls, group: str, resource: str, name: str, why: str) -> ApiError:
        return cls(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {qualified_resource(group, resource)} "{name}": '
            f"{why}",
            details=_details(group, resource, name),
        )

    @classmethod
    def stale(cls, group: str, resource: str, name: str) -> ApiError:
        return cls.conflict(
            group,
            resource,
            name,
            "the object has been modified; please apply your changes to the latest "
            "version and try again",
        )

    @classmethod
    def unprocessable(cls, message: str) -> ApiError:
        return cls(422, "Invalid", message)

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        return cls(400, "BadRequest", message)

    @classmethod
    def forbidden(cls, group: str, resource: str, name: str, why: str) -> ApiError:
        return cls(
            403,
            "Forbidden",
            f'{qualified_resource(group, resource)} "{name}" is forbidden: {why}',
            details=_details(group, resource, name),
        )


def status_body(
    code: int, reason: str, message: str, *, details: JsonObject | None = None
) -> JsonObject:
    """A failure ``Status`` object exactly shaped like the real API's."""
    body: JsonObject = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def success_status(group: str, resource: str, name: str, uid: str) -> JsonObject:
    """The ``Status`` the real API returns after deleting most built-in kinds."""
    details = _details(group, resource, name)
    details["uid"] = uid
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


def _details(group: str, resource: str, name: str) -> JsonObject:
    details: JsonObject = {"name": name, "kind": resource}
    if group:
        details["group"] = group
    return details

