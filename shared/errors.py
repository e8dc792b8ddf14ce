"""Domain errors that decide what happens to an event.

Every handler ends in one of three ways: it returns (the platform acknowledges the
event), it raises a :class:`TransientError` (the platform retries with backoff and
eventually dead-letters), or it raises a :class:`PermanentError` (the entry point
acknowledges the event, records why it was refused and creates nothing).

The decision is made here, once: each class says whether its event is retried
(``retry``) and how loudly it is logged (``severity``), and ``shared/handler.py``
does what they say. A :class:`DeploymentError` — settings missing, a topic,
namespace or table absent, a permission not granted — is never blamed on the
event: it is retried (and dead-lettered in the end) with an ERROR log, so a
deployment mistake never turns valid work into a rejection.

Adapters translate SDK exceptions into these types at their boundary and chain the
cause with ``raise ... from exc`` so business code never sees a vendor type.
"""

from __future__ import annotations

__all__ = [
    "AccelopsError",
    "AlreadyExistsError",
    "ConfigError",
    "ConflictError",
    "DeploymentError",
    "ForbiddenError",
    "InvalidEventError",
    "MissingTargetError",
    "NotFoundError",
    "OperationInProgressError",
    "PermanentError",
    "PermissionDeniedError",
    "RateLimitedError",
    "TransientError",
    "UnavailableError",
]


class AccelopsError(Exception):
    """Base class of every error accelops raises on purpose."""

    #: Whether the platform should redeliver the event that caused this error.
    retry: bool = False
    #: The level the handler logs it at: refused input and a broken deployment are
    #: errors (someone must act); a passing failure is a warning.
    severity: str = "error"

    def __init__(self, message: str, *, field: str | None = None, rule: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.rule = rule

    def as_fields(self) -> dict[str, str]:
        """The error as structured log fields."""
        fields = {"error": type(self).__name__, "reason": self.message}
        if self.field is not None:
            fields["field"] = self.field
        if self.rule is not None:
            fields["rule"] = self.rule
        return fields


class PermanentError(AccelopsError):
    """Bad input or a state that retrying cannot fix: acknowledge and record why."""

    retry = False


class InvalidEventError(PermanentError):
    """The request is not an event of the kind the function serves (not a Pub/Sub
    envelope, say): its sender is misconfigured. Answered 400, which a push sender
    retries and then dead-letters, so nothing is acknowledged unread; Pub/Sub itself
    never sends one."""


class TransientError(AccelopsError):
    """A failure that may pass (5xx, 429, timeouts, busy resources): retry later."""

    retry = True
    severity = "warning"


class DeploymentError(TransientError):
    """The deployment is incomplete or misconfigured, not the event: retried until an
    operator fixes it (then dead-lettered), logged as an error naming what is wrong."""

    severity = "error"


class ConfigError(DeploymentError):
    """The configuration file or environment is invalid; the message names the key."""


class PermissionDeniedError(DeploymentError):
    """The function's identity lacks a permission (401/403): grant it, the events
    wait meanwhile."""


class NotFoundError(PermanentError):
    """The object asked for does not exist."""


class ForbiddenError(PermanentError):
    """The caller may not act on this object (another team's job, say): refused, not
    retried. The message says whose object it is, so the caller knows whom to ask."""


class ConflictError(PermanentError):
    """The object exists already, or exists with other content."""


class AlreadyExistsError(ConflictError):
    """A create found an object of that name."""


class MissingTargetError(DeploymentError):
    """A write addressed a namespace or resource type that does not exist: the cluster
    is not set up as the deployment expects. Retried until that is fixed; never blamed
    on the input that caused the write."""


class UnavailableError(TransientError):
    """The remote service could not be reached or answered 5xx."""


class RateLimitedError(TransientError):
    """The remote service answered 429 or a quota error."""


class OperationInProgressError(TransientError):
    """GKE refuses a change because another operation is running on the resource."""
