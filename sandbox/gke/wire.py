"""Proto3 JSON on the wire, checked against the Container API's own message types.

Requests are parsed with the client library's proto descriptors, so an unknown
field or a wrong type is refused with INVALID_ARGUMENT ("Invalid JSON payload
received ...") like the real service, and normalised to the canonical form the
state works on: camelCase, enum *names*, default values omitted, int64 as strings.

Responses are built the same way, so they are valid messages by construction.
The REST client asks for ``$alt=json;enum-encoding=int`` and is then answered
enums as numbers (as Google's front end does); other callers get names.
google-cloud-container is imported lazily, on first use.
"""

from __future__ import annotations

import importlib
import json
from functools import cache
from typing import Any

from sandbox.gke.errors import GkeError, JsonObject

__all__ = ["decode_request", "encode_response", "wants_int_enums"]


@cache
def _types() -> Any:
    return importlib.import_module("google.cloud.container_v1")


def wants_int_enums(query: dict[str, list[str]]) -> bool:
    """Whether the caller asked for numeric enums (``$alt=json;enum-encoding=int``)."""
    values = [*query.get("$alt", []), *query.get("alt", [])]
    return any("enum-encoding=int" in value for value in values)


def decode_request(message_type: str, body: bytes) -> JsonObject:
    """Parse a request body as ``message_type`` (e.g. ``CreateNodePoolRequest``)."""
    cls = getattr(_types(), message_type)
    try:
        text = body.decode("utf-8") if body.strip() else "{}"
        message = cls.from_json(text, ignore_unknown_fields=False)
    except Exception as exc:  # json_format.ParseError, UnicodeDecodeError
        raise GkeError("INVALID_ARGUMENT", f"Invalid JSON payload received. {exc}") from exc
    result: JsonObject = cls.to_dict(message, use_integers_for_enums=False,
                                     preserving_proto_field_name=False,
                                     always_print_fields_with_no_presence=False)
    return result


def encode_response(message_type: str, data: JsonObject, *, int_enums: bool) -> bytes:
    """Serialise ``data`` as ``message_type`` in proto3 JSON."""
    cls = getattr(_types(), message_type)
    message = cls.from_json(json.dumps(data), ignore_unknown_fields=False)
    text: str = cls.to_json(message, use_integers_for_enums=int_enums,
                            preserving_proto_field_name=False, indent=None,
                            always_print_fields_with_no_presence=False)
    return text.encode("utf-8")
