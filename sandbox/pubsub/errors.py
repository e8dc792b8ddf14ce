"""Broker errors that mirror the canonical status codes of the real Pub/Sub API.

The broker is usable in-process (no gRPC), so it raises plain Python exceptions;
the gRPC layer maps each class to its status code via ``grpc_code_name`` so the
real client raises the matching ``google.api_core.exceptions`` type
(``AlreadyExists``, ``NotFound``, ``InvalidArgument``, ...).
"""

from __future__ import annotations


class PubSubError(Exception):
    """Base class for errors the sandbox reports to callers."""

    grpc_code_name = "UNKNOWN"


class AlreadyExistsError(PubSubError):
    """A topic or subscription with that name already exists."""

    grpc_code_name = "ALREADY_EXISTS"


class NotFoundError(PubSubError):
    """The named topic or subscription does not exist."""

    grpc_code_name = "NOT_FOUND"


class InvalidArgumentError(PubSubError):
    """A malformed name, an out-of-range setting or an empty message."""

    grpc_code_name = "INVALID_ARGUMENT"


class FailedPreconditionError(PubSubError):
    """The request is valid but the resource is in the wrong state for it."""

    grpc_code_name = "FAILED_PRECONDITION"


class UnimplementedError(PubSubError):
    """A feature of the real service the sandbox deliberately does not model."""

    grpc_code_name = "UNIMPLEMENTED"
