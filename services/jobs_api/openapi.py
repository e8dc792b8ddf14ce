"""The jobs API's OpenAPI 3.1 document, generated from the models the code uses.

The request body is :class:`shared.jobspec.request.JobRequest` (what ``submit_job``
validates), the answers are ``shared.jobs.status.model``'s ``JobSummary`` and
``JobStatus`` (what ``accelops jobs`` prints) and
the API's own ``Accepted`` and ``ApiError``: each schema comes from its pydantic
model, so the document cannot describe fields the code does not have. OpenAPI 3.1
uses JSON Schema 2020-12, which is what pydantic writes. Pure; built once per
process and served at ``/openapi.json``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from shared.jobs.api import JOBS_PATH, LOGS_MAX_TAIL_LINES, Accepted, ApiError
from shared.jobs.status.model import JobStatus, JobSummary
from shared.jobspec.request import REQUEST_LIMITS, JobRequest

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{model}"
_SECURITY: list[dict[str, list[str]]] = [{"googleIdToken": []}]


def _response_models() -> tuple[type[BaseModel], type[BaseModel]]:
    return JobSummary, JobStatus


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF.format(model=name)}


def _errors(*statuses: int) -> dict[str, Any]:
    why = {
        400: "The request was refused (its body, or a query parameter the operation does "
             "not take): `field` and `rule` say what to change.",
        401: "No valid Google-signed ID token for this service (signature, audience, "
             "expiry, issuer).",
        403: "The caller may not act for that team (the configuration's team members "
             "and jobs_api.admins).",
        404: "No job with that id (request id or JobSet name), or no such team.",
        409: "The request was rejected: there is no job to cancel or read logs of (its "
             "status says why).",
        405: "That method is not allowed here.",
        413: f"The body is over {REQUEST_LIMITS.max_bytes} bytes.",
        500: "The service is misconfigured; the message says what to fix.",
        503: "A backend (Pub/Sub, Kubernetes, GKE, BigQuery) did not answer; retry after "
             "`Retry-After` seconds.",
    }
    return {str(status): {"description": why[status],
                          "content": {"application/json": {"schema": _ref("ApiError")}}}
            for status in statuses}


def _json_response(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_JOB_ID = {"name": "job_id", "in": "path", "required": True,
           "description": "The job's request id or its JobSet name.",
           "schema": {"type": "string", "minLength": 1}}


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the service."""
    summary, status = _response_models()
    job_list = {"type": "object", "required": ["jobs"], "additionalProperties": False,
                "properties": {"jobs": {"type": "array",
                                        "items": _ref(summary.__name__)}}}
    models: list[tuple[type[BaseModel], Any]] = [
        (JobRequest, "validation"), (Accepted, "serialization"),
        (ApiError, "serialization"), (summary, "serialization"), (status, "serialization")]
    _, schemas = models_json_schema(models, ref_template=_REF)
    components = dict(schemas.get("$defs", {}))
    components["JobList"] = job_list
    read_errors = _errors(400, 401, 403, 404, 405, 500, 503)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "accelops jobs API",
            "version": "1",
            "description": "Submit TPU job requests, list a team's jobs, read why a job is "
                           "where it is, read its logs and cancel it. Every /v1 operation "
                           "needs a Google-signed ID token whose e-mail is a member of the "
                           "job's team (or an admin) in the accelops configuration.",
        },
        "components": {
            "schemas": components,
            "securitySchemes": {"googleIdToken": {
                "type": "http", "scheme": "bearer", "bearerFormat": "JWT",
                "description": "A Google-signed ID token with this service's URL (or its "
                               "configured audience) as audience, sent as "
                               "`Authorization: Bearer <token>`."}},
        },
        "paths": {
            JOBS_PATH: {
                "post": {
                    "operationId": "submitJob",
                    "summary": "Validate a job request and publish it for submission",
                    "security": _SECURITY,
                    "requestBody": {"required": True, "content": {
                        "application/json": {"schema": _ref("JobRequest")}}},
                    "responses": {
                        "202": {**_json_response("Published: submit_job creates the JobSet "
                                                 "(or refuses it; see its status).",
                                                 _ref("Accepted")),
                                "headers": {"Location": {
                                    "description": "The job's status URL, relative.",
                                    "schema": {"type": "string"}}}},
                        **_errors(400, 401, 403, 405, 413, 500, 503),
                    },
                },
                "get": {
                    "operationId": "listJobs",
                    "summary": "The jobs of the teams the caller may act for",
                    "security": _SECURITY,
                    "parameters": [{"name": "team", "in": "query", "required": False,
                                    "description": "Only this team's jobs (default: every "
                                                   "team the caller may act for).",
                                    "schema": {"type": "string"}}],
                    "responses": {"200": _json_response("The jobs.", _ref("JobList")),
                                  **_errors(400, 401, 403, 404, 405, 500, 503)},
                },
            },
            f"{JOBS_PATH}/{{job_id}}": {
                "get": {
                    "operationId": "jobStatus",
                    "summary": "Where a job is and why",
                    "security": _SECURITY,
                    "parameters": [_JOB_ID],
                    "responses": {"200": _json_response("The job's status.",
                                                        _ref(status.__name__)),
                                  **read_errors},
                },
                "delete": {
                    "operationId": "cancelJob",
                    "summary": "Cancel a job: its JobSet is deleted and its slices reaped",
                    "security": _SECURITY,
                    "parameters": [_JOB_ID],
                    "responses": {"200": _json_response("The job's status after the cancel.",
                                                        _ref(status.__name__)),
                                  **_errors(400, 401, 403, 404, 405, 409, 500, 503)},
                },
            },
            f"{JOBS_PATH}/{{job_id}}/logs": {
                "get": {
                    "operationId": "jobLogs",
                    "summary": "The logs of a job's pods",
                    "security": _SECURITY,
                    "parameters": [
                        _JOB_ID,
                        {"name": "pod", "in": "query", "required": False,
                         "description": "Only this pod (default: every pod of the job).",
                         "schema": {"type": "string"}},
                        {"name": "tail_lines", "in": "query", "required": False,
                         "description": "Only the last lines of each log.",
                         "schema": {"type": "integer", "minimum": 1,
                                    "maximum": LOGS_MAX_TAIL_LINES}},
                    ],
                    "responses": {"200": {"description": "The logs, as text.",
                                          "content": {"text/plain": {
                                              "schema": {"type": "string"}}}},
                                  **_errors(400, 401, 403, 404, 405, 409, 500, 503)},
                },
            },
            "/openapi.json": {"get": {
                "operationId": "openapi", "summary": "This document", "security": [],
                "responses": {"200": _json_response("The OpenAPI document.",
                                                    {"type": "object"})}}},
            "/healthz": {"get": {
                "operationId": "healthz", "summary": "Liveness; touches no backend",
                "security": [],
                "responses": {"200": {"description": "ok", "content": {
                    "text/plain": {"schema": {"type": "string"}}}}}}},
        },
    }
