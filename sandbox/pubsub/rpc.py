"""gRPC plumbing shared by the Publisher and Subscriber services.

google-cloud-pubsub ships no servicer base classes, and code generated from
pubsub.proto clashes with the library's descriptors, so the services are
registered as generic handlers whose (de)serialisers are the library's own raw
protobuf classes; broker errors become gRPC status codes so the real client
raises ``AlreadyExists``, ``NotFound``, ``InvalidArgument``...
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import grpc

from sandbox.pubsub.errors import PubSubError

Handler = Callable[[Any, Any], Any]


def abort(context: Any, error: PubSubError) -> None:
    """End the call with ``error``'s status code (raises, as ``context.abort`` does)."""
    context.abort(getattr(grpc.StatusCode, error.grpc_code_name), str(error))


def map_errors(method: Handler) -> Handler:
    """Map broker errors raised by a unary handler to gRPC status codes."""

    @functools.wraps(method)
    def wrapper(request: Any, context: Any) -> Any:
        try:
            return method(request, context)
        except PubSubError as error:
            abort(context, error)
            raise AssertionError("unreachable: context.abort raises") from error

    return wrapper


def raw(proto_plus_type: Any) -> Any:
    """The raw protobuf class behind a proto-plus type."""
    return proto_plus_type.pb()


def serialize(message: Any) -> bytes:
    return bytes(message.SerializeToString())


def generic_handler(
    service: str,
    table: dict[str, tuple[Handler, Any, Any]],
    extra: dict[str, Any] | None = None,
) -> grpc.GenericRpcHandler:
    """Build unary handlers from (function, request type, response type) rows.

    A response type of None means ``google.protobuf.Empty``; the serializer
    does not care, the entry only documents the method.
    """
    handlers: dict[str, Any] = dict(extra or {})
    for method, (function, request_type, _response_type) in table.items():
        handlers[method] = grpc.unary_unary_rpc_method_handler(
            map_errors(function),
            request_deserializer=raw(request_type).FromString,
            response_serializer=serialize,
        )
    return grpc.method_handlers_generic_handler(service, handlers)
