"""The job request: the only input a user controls.

The model is an allow-list. Unknown fields are refused rather than ignored, so a
request that tries to pass pod-spec fields (``serviceAccountName``,
``securityContext``, ``volumes``, ``hostNetwork``…) is rejected with the name of the
field, never silently half-applied. Everything that reaches the pod is a plain
string checked here: image reference, command, args and environment.

Types are strict: a JSON value is accepted only as what it is. ``"slices": "2"``,
``true`` or ``2.0`` is not an integer and ``"spot": "true"`` is not a boolean: a
request that says something else than it means is refused with the field and rule,
never guessed at. Before validation, the message must fit :data:`REQUEST_LIMITS`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from shared.config import format_validation_error
from shared.errors import PermanentError
from shared.payload import Limits, check, decode

__all__ = ["REQUEST_LIMITS", "JobRequest", "TpuRequest", "parse_job_request",
           "read_job_request"]

MAX_TEXT_CHARS = 4096
MAX_ARGS = 256
# A request nests two levels (the request, then tpu/env/args); 256 KiB holds any real
# command line and keeps the JobSet far below etcd's 1.5 MiB object limit.
REQUEST_LIMITS = Limits(max_bytes=256 * 1024, max_depth=4, max_digits=20,
                        max_string_chars=MAX_TEXT_CHARS, max_items=MAX_ARGS)

_Str = Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS)]
_EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
# An OCI image reference: registry/path[:tag][@digest]; no whitespace or shell syntax.
_Image = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True,
        max_length=512,
        pattern=r"^[a-z0-9]([a-z0-9._-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*"
        r"(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(@sha256:[a-f0-9]{64})?$",
    ),
]
_Reservation = Annotated[
    str, StringConstraints(pattern=r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
]
_Name = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=63,
                      pattern=r"^[A-Za-z0-9][A-Za-z0-9._ -]*$"),
]
_RequestId = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=128,
                      pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$"),
]


class TpuRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    type: Annotated[str, StringConstraints(strip_whitespace=True, to_lower=True,
                                           min_length=1, max_length=32)]
    slices: Annotated[int, Field(ge=1, le=1024)] = 1
    # Where slice capacity comes from; unset means the configuration's default.
    spot: bool | None = None
    reservation: _Reservation | None = None

    @model_validator(mode="after")
    def _one_capacity_source(self) -> TpuRequest:
        if self.spot and self.reservation:
            raise ValueError("choose either spot or a reservation, not both")
        return self


class JobRequest(BaseModel):
    """A request to run a TPU training job, published as UTF-8 JSON."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: _Name
    team: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=63)]
    image: _Image
    command: Annotated[list[_Str], Field(max_length=64)] = Field(default_factory=list)
    args: Annotated[list[_Str], Field(max_length=MAX_ARGS)] = Field(default_factory=list)
    env: Annotated[dict[_EnvName, _Str], Field(max_length=64)] = Field(default_factory=dict)
    tpu: TpuRequest
    priority: Literal["low", "medium", "high"] = "medium"
    max_restarts: Annotated[int, Field(ge=0, le=10)] = 0
    request_id: _RequestId | None = None

    def content_hash(self) -> str:
        """A digest of what the request asks for (its id excluded).

        Two deliveries of one request hash alike; a different request reusing the
        id does not, which is how a reused id is told from a duplicate.
        """
        body = self.model_dump(mode="json", exclude={"request_id"})
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def read_job_request(data: bytes) -> JobRequest:
    """Decode and validate a job request as published (UTF-8 JSON bytes).

    Raises PermanentError naming the field and the rule, whatever is wrong with it.
    """
    return parse_job_request(decode(data, REQUEST_LIMITS))


def parse_job_request(raw: Any) -> JobRequest:
    """Validate a decoded JSON value as a job request.

    Raises PermanentError naming the first bad field and the rule it broke (the
    message lists every problem).
    """
    if not isinstance(raw, dict):
        raise PermanentError("a job request must be a JSON object", field="<root>",
                             rule="must be a JSON object")
    problem = check(raw, REQUEST_LIMITS)
    if problem is not None:
        raise PermanentError(f"invalid job request: {problem}", field=problem.field,
                             rule=problem.rule)
    try:
        return JobRequest.model_validate(raw)
    except ValidationError as exc:
        message, field, rule = format_validation_error(exc)
        raise PermanentError(f"invalid job request: {message}", field=field, rule=rule) from exc
