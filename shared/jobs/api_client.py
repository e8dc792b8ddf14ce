"""A client of the jobs API (``services/jobs_api``): what ``accelops jobs ... --api URL``
uses instead of reaching the cluster itself.

Each call sends a Google-signed ID token for the API's URL (``shared.idtoken``:
``$ACCELOPS_ID_TOKEN``, else application default credentials) and turns the answer
into the models the direct commands print (``shared.jobs.status.model``) or into the
domain error its status means, with the API's message (and field and rule) kept: 400
PermanentError, 401/403 ForbiddenError, 404 NotFoundError, 409 ConflictError, 5xx
and unreachable UnavailableError. The one module that speaks HTTP to the API.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import requests

from shared.errors import (
    AccelopsError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PermanentError,
    UnavailableError,
)
from shared.idtoken import fetch_token
from shared.jobs.api import JOBS_PATH, Accepted, job_path, logs_path
from shared.jobs.status.model import JobStatus, JobSummary

__all__ = ["API_ENV", "JobsApiClient"]

API_ENV = "ACCELOPS_JOBS_API"
TIMEOUT_SECONDS = 60.0


class JobsApiClient:
    """The jobs API at ``base_url``; ``token``: the ID token to send (default: one
    fetched for ``base_url`` on first use)."""

    def __init__(self, base_url: str, token: str | None = None) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise PermanentError(f"jobs API URL {base_url!r} is not an http(s) URL",
                                 field="--api", rule="must be http(s)://host[:port]")
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._session: Any = None

    def _bearer(self) -> str:
        if self._token is None:
            self._token = fetch_token(self.base_url)
        return self._token

    def _call(self, method: str, path: str, *, params: dict[str, Any] | None = None,
              body: bytes | None = None) -> Any:
        if self._session is None:
            self._session = requests.Session()
        headers = {"Authorization": f"Bearer {self._bearer()}"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        url = f"{self.base_url}{path}"
        try:
            response = self._session.request(method, url, params=params, data=body,
                                             headers=headers, timeout=TIMEOUT_SECONDS)
        except requests.RequestException as exc:
            raise UnavailableError(f"{method} {url}: {exc}") from exc
        if response.status_code >= 400:
            raise _error(response.status_code, response.text, f"{method} {url}")
        return response

    def submit(self, data: bytes) -> Accepted:
        """POST the job request ``data`` (JSON bytes as in a file); what was accepted."""
        return Accepted.model_validate(self._call("POST", JOBS_PATH, body=data).json())

    def list_jobs(self, team: str | None = None) -> list[JobSummary]:
        params = {"team": team} if team else None
        answer = self._call("GET", JOBS_PATH, params=params).json()
        return [JobSummary.model_validate(job) for job in answer["jobs"]]

    def job_status(self, job_id: str) -> JobStatus:
        return JobStatus.model_validate(self._call("GET", job_path(job_id)).json())

    def cancel_job(self, job_id: str) -> JobStatus:
        return JobStatus.model_validate(self._call("DELETE", job_path(job_id)).json())

    def job_logs(self, job_id: str, *, pod: str | None = None,
                 tail_lines: int | None = None) -> str:
        params: dict[str, Any] = {}
        if pod:
            params["pod"] = pod
        if tail_lines is not None:
            params["tail_lines"] = tail_lines
        return str(self._call("GET", logs_path(job_id), params=params).text)


def _error(status: int, text: str, what: str) -> AccelopsError:
    """The domain error an error answer means, with its message, field and rule."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("error"), str):
        body = {"error": f"{what} answered {status}: {text[:200]}"}
    message, field, rule = body["error"], body.get("field"), body.get("rule")
    kinds: dict[int, type[AccelopsError]] = {401: ForbiddenError, 403: ForbiddenError,
                                             404: NotFoundError, 409: ConflictError}
    if status >= 500:
        return UnavailableError(f"the jobs API answered {status}: {message}")
    if status == 401:
        message = f"not authenticated: {message}"
    kind = kinds.get(status, PermanentError)
    return kind(message, field=field if isinstance(field, str) else None,
                rule=rule if isinstance(rule, str) else None)
