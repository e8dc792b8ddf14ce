"""The jobs API's wire vocabulary, shared by the service (``services/jobs_api``) and its
client (``shared.jobs.api_client``): paths, query parameters, the accepted and error
bodies, and how the API names a request it was given without an id. Pure.

Job ids in paths are request ids or JobSet names. A request id may contain ``/``
(``shared.jobspec.request``), so the id is percent-encoded by the client and the
service routes the rest of the path to it.
"""

from __future__ import annotations

import uuid
from typing import Annotated
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "API_REQUEST_ID_PREFIX",
    "AUDIENCE_ENV",
    "JOBS_PATH",
    "LOGS_MAX_TAIL_LINES",
    "Accepted",
    "ApiError",
    "job_path",
    "logs_path",
    "new_request_id",
]

JOBS_PATH = "/v1/jobs"
# The audiences the service accepts ID tokens for (comma-separated): its URL, and any
# custom audience.
AUDIENCE_ENV = "ACCELOPS_JOBS_API_AUDIENCE"
# More lines than this are never sent at once: a pod's log can be gigabytes.
LOGS_MAX_TAIL_LINES = 10_000
API_REQUEST_ID_PREFIX = "api-"


def new_request_id() -> str:
    """A request id for a request posted without one: unique (a random UUID), and
    marked as given by the API."""
    return f"{API_REQUEST_ID_PREFIX}{uuid.uuid4().hex}"


def job_path(job_id: str) -> str:
    return f"{JOBS_PATH}/{quote(job_id, safe='')}"


def logs_path(job_id: str) -> str:
    return f"{job_path(job_id)}/logs"


class Accepted(BaseModel):
    """``POST /v1/jobs`` answered 202: the request was published and will be submitted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request_id: Annotated[str, Field(description="The request's id: the one it carried, "
                                                 "else the one the API gave it")]
    status_url: Annotated[str, Field(description="Where its status is, relative to the "
                                                 "API's root")]


class ApiError(BaseModel):
    """Every error answer: what is wrong and, for a refused request, the field and rule."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    error: str
    field: str | None = None
    rule: str | None = None
