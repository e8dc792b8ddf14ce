"""Prometheus instant queries: the one module that reads the servers' own metrics.

**Where.** In production the series live in Google Cloud Managed Service for
Prometheus (GMP), which answers the Prometheus HTTP API under
``https://monitoring.googleapis.com/v1/projects/<project>/location/global/prometheus``
with Google credentials (application default credentials, scope ``monitoring.read``;
the identity needs ``roles/monitoring.viewer``). ``ACCELOPS_PROMETHEUS_URL`` names
another Prometheus-compatible base URL, queried anonymously: the sandbox points it at
its own Prometheus.

**How.** ``GET <base>/api/v1/query?query=...&time=...``. GMP's reference documents the
query method as a GET whose body must be empty, so that is what is sent to either
server (upstream Prometheus takes GET and POST alike). The answer has the upstream
shape, ``{"status": "success", "data": {"resultType": "vector", "result": [...]}}``.

**One session per process.** The authorised session (and with it the access token,
which google-auth refreshes before it expires) is made on first use and reused by
every invocation a warm instance serves.

**Errors.** A timeout, a refused connection, 5xx and 429 pass: :class:`UnavailableError`
and :class:`RateLimitedError` (retried). 401/403 is the deployment's
(:class:`PermissionDeniedError`). A 400/422 ``bad_data`` means the query accelops built
is wrong, which no retry fixes: :class:`InvalidQueryError` (permanent), naming the query.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

import requests
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from shared.errors import (
    ConfigError,
    PermanentError,
    PermissionDeniedError,
    RateLimitedError,
    UnavailableError,
)

__all__ = [
    "GMP_URL_TEMPLATE",
    "QUERY_SCOPE",
    "TIMEOUT_SECONDS",
    "URL_ENV",
    "InvalidQueryError",
    "Sample",
    "base_url",
    "instant_query",
    "parse_vector",
    "query_function",
]

URL_ENV = "ACCELOPS_PROMETHEUS_URL"
GMP_URL_TEMPLATE = ("https://monitoring.googleapis.com/v1/projects/{project}"
                    "/location/global/prometheus")
# The narrowest scope GMP's query method accepts.
QUERY_SCOPE = "https://www.googleapis.com/auth/monitoring.read"
TIMEOUT_SECONDS = 20.0
_PROJECT_ENV = "ACCELOPS_PROJECT"


class InvalidQueryError(PermanentError):
    """Prometheus refused the query as malformed (``bad_data``): the query accelops
    built is wrong, not the event or the server's state."""


class Sample(BaseModel):
    """One element of an instant vector: its labels and its value (NaN kept as NaN)."""

    model_config = ConfigDict(frozen=True)

    labels: dict[str, str] = Field(alias="metric")
    timestamp: float
    value: float

    @field_validator("labels", mode="before")
    @classmethod
    def _labels(cls, raw: Any) -> Any:
        return raw if raw is not None else {}


def base_url(environ: Mapping[str, str] | None = None) -> tuple[str, bool]:
    """``(base URL, authenticated)``: the override, anonymous, else GMP for
    ``ACCELOPS_PROJECT`` with Google credentials. Raises ConfigError without either."""
    env = os.environ if environ is None else environ
    override = env.get(URL_ENV, "").strip().rstrip("/")
    if override:
        if not override.startswith(("http://", "https://")):
            raise ConfigError(f"{URL_ENV} must be an http(s) URL, not {override!r}",
                              field=URL_ENV)
        return override, False
    project = env.get(_PROJECT_ENV, "").strip()
    if not project:
        raise ConfigError(f"set {_PROJECT_ENV} (queries go to its Managed Service for "
                          f"Prometheus) or {URL_ENV}", field=_PROJECT_ENV)
    return GMP_URL_TEMPLATE.format(project=project), True


def parse_vector(body: Any, query: str) -> list[Sample]:
    """The samples of a successful instant-vector answer (pure).

    A scalar answer becomes one sample without labels. Raises UnavailableError for an
    answer that is not Prometheus' (a proxy's error page, say) and InvalidQueryError
    for a query whose result is not a vector or scalar (a range vector).
    """
    if not isinstance(body, dict) or body.get("status") != "success":
        raise UnavailableError(f"Prometheus answered without success to {query!r}: "
                               f"{str(body)[:200]}")
    data = body.get("data") or {}
    kind = data.get("resultType")
    result: Any = data.get("result")
    try:
        if kind == "vector":
            return [Sample(metric=item.get("metric"), timestamp=float(item["value"][0]),
                           value=_number(item["value"][1])) for item in result]
        if kind == "scalar":
            return [Sample(metric={}, timestamp=float(result[0]), value=_number(result[1]))]
    except (KeyError, IndexError, TypeError, ValueError, ValidationError) as exc:
        raise UnavailableError(f"Prometheus' answer to {query!r} is not a vector: "
                               f"{str(body)[:200]}") from exc
    raise InvalidQueryError(f"the query {query!r} gives a {kind}, not an instant vector",
                            field="query")


def _number(raw: Any) -> float:
    """Prometheus writes sample values as strings, NaN and ±Inf included."""
    value = float(raw)
    return math.nan if math.isnan(value) else value


_session_lock = threading.Lock()
_sessions: dict[tuple[str, bool], requests.Session] = {}


def _session(url: str, authenticated: bool) -> requests.Session:
    key = (url, authenticated)
    with _session_lock:
        session = _sessions.get(key)
        if session is None:
            session = _authorized_session() if authenticated else requests.Session()
            _sessions[key] = session
        return session


def _authorized_session() -> requests.Session:
    # google-auth only where Google credentials are wanted; the session refreshes its
    # token before expiry on its own.
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError
    from google.auth.transport.requests import AuthorizedSession

    try:
        credentials, _ = google.auth.default(scopes=[QUERY_SCOPE])
    except DefaultCredentialsError as exc:
        raise ConfigError("no Google credentials to query Managed Service for "
                          f"Prometheus (or set {URL_ENV}): {exc}") from exc
    session: requests.Session = AuthorizedSession(credentials)  # type: ignore[no-untyped-call]
    return session


def instant_query(query: str, *, at: float | None = None,
                  environ: Mapping[str, str] | None = None,
                  timeout: float = TIMEOUT_SECONDS) -> list[Sample]:
    """Evaluate ``query`` at ``at`` (UNIX seconds; now when None) and return its vector.

    Raises InvalidQueryError (bad_data), PermissionDeniedError (401/403),
    RateLimitedError (429), UnavailableError (5xx, timeouts, connection errors,
    an answer that is not Prometheus'), ConfigError (nowhere to ask).
    """
    url, authenticated = base_url(environ)
    params = {"query": query}
    if at is not None:
        params["time"] = f"{at:.3f}"
    try:
        response = _session(url, authenticated).get(f"{url}/api/v1/query", params=params,
                                                     timeout=timeout)
    except requests.Timeout as exc:
        raise UnavailableError(f"Prometheus did not answer {query!r} within "
                               f"{timeout:g}s") from exc
    except requests.RequestException as exc:
        raise UnavailableError(f"Prometheus at {url} could not be reached: {exc}") from exc
    return _answer(response, query)


def _answer(response: requests.Response, query: str) -> list[Sample]:
    status = response.status_code
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    error = _error_text(body) or response.text[:300]
    if status in (400, 422) and _error_type(body) in ("bad_data", "INVALID_ARGUMENT", None):
        raise InvalidQueryError(f"Prometheus refused the query {query!r} as malformed "
                                f"(a fault in the query accelops builds): {error}",
                                field="query")
    if status in (401, 403):
        raise PermissionDeniedError(f"querying Prometheus was refused ({status}): {error}; "
                                    "the identity needs roles/monitoring.viewer")
    if status == 429:
        raise RateLimitedError(f"Prometheus is rate limiting queries: {error}")
    if status >= 500 or status in (400, 422):
        raise UnavailableError(f"Prometheus answered {status} to {query!r}: {error}")
    if status != 200:
        raise UnavailableError(f"Prometheus answered {status} to {query!r}: {error}")
    return parse_vector(body, query)


def _error_type(body: Any) -> str | None:
    """Prometheus' ``errorType``, or a Google API error's ``status``."""
    if not isinstance(body, dict):
        return None
    if isinstance(body.get("errorType"), str):
        return str(body["errorType"])
    error = body.get("error")
    if isinstance(error, dict) and isinstance(error.get("status"), str):
        return str(error["status"])
    return None


def _error_text(body: Any) -> str:
    if not isinstance(body, dict):
        return ""
    error = body.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or "")
    return str(error or "")


def query_function(environ: Mapping[str, str] | None = None,
                   ) -> Callable[[str], list[Sample]]:
    """``query(promql) -> list[Sample]`` bound to this environment, for callers that
    take the query as a parameter (:func:`shared.serving.release_metrics.release_stats`)."""
    def query(promql: str) -> list[Sample]:
        return instant_query(promql, environ=environ)
    return query

