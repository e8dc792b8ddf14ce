"""The jobs API: submit job requests, list jobs, read a job's status and logs, cancel it.

Every ``/v1`` route needs a Google-signed ID token (``services.jobs_api.auth``); the
e-mail in it decides which teams the caller may act for (``shared.jobs.callers``).

``POST /v1/jobs`` runs the checks ``submit_job`` runs — ``read_job_request`` and
``check_policy``, the same functions, so a request the API accepts is one the
function accepts — then publishes the request to the job-requests topic and answers
202 once Pub/Sub has stored it. ``submit_job`` does the rest, as for a request
published any other way. A request without a ``request_id`` gets one here, so the
caller can follow it; a client that retries with its own id gets that id back and
``submit_job`` makes one JobSet of any number of deliveries.

Reading and cancelling go through the same lookups as ``accelops jobs``
(``shared.jobs.lookup``), so the API and the CLI explain a job in the same words.

Errors are JSON ``{error, field?, rule?}`` with a status that says whose move it
is: 400 a refused request (with the field and rule), 401 no valid token, 403 a team
the caller may not act for, 404 an unknown job, 409 the logs or cancel of a
rejected request (there is no job), 413 a body over the request limit,
503 (with ``Retry-After``) a backend that did not answer, 500 a deployment mistake
(logged with what to fix).

Cold start stays short: creating the app reads no configuration and opens no
connection; the Pub/Sub, Kubernetes, GKE and BigQuery clients are created by the
first request that needs each.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from flask import Flask, Response, g, request
from werkzeug.exceptions import HTTPException
from werkzeug.routing import PathConverter

from services.jobs_api.auth import authenticate
from services.jobs_api.openapi import openapi_document
from shared import pubsub
from shared.config import AccelopsConfig, Settings, load_config_or_retry
from shared.errors import (
    AccelopsError,
    ConflictError,
    DeploymentError,
    ForbiddenError,
    NotFoundError,
    PermanentError,
    TransientError,
)
from shared.idtoken import InvalidTokenError
from shared.jobs.api import (
    JOBS_PATH,
    LOGS_MAX_TAIL_LINES,
    Accepted,
    ApiError,
    job_path,
    new_request_id,
)
from shared.jobs.callers import Caller
from shared.jobs.lookup import (
    cancel_job,
    find_jobset,
    job_logs,
    job_status,
    list_jobs,
    team_namespaces,
)
from shared.jobs.status.explain import jobset_ref
from shared.jobspec.policy import check_policy
from shared.jobspec.request import REQUEST_LIMITS, read_job_request
from shared.kube import get_client
from shared.log import get_logger

__all__ = ["create_app"]

log = get_logger("accelops.jobs_api")

_RETRY_AFTER_S = "5"
_JSON = "application/json"


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    response = Response(json.dumps(body, ensure_ascii=False, separators=(",", ":")),
                        status=status, mimetype=_JSON, headers=headers)
    response.headers["Cache-Control"] = "no-store"
    return response


def _error(status: int, message: str, *, field: str | None = None, rule: str | None = None,
           headers: dict[str, str] | None = None) -> Response:
    body = ApiError(error=message, field=field, rule=rule).model_dump(exclude_none=True)
    return _json(body, status, headers)


class _JobId(PathConverter):
    """A job id in a path: a request id (which may hold ``/``) or ``namespace/name``,
    but never ending in ``/logs``, which is the logs sub-resource of the id before it:
    ``DELETE /v1/jobs/x/logs`` is refused (405), not a cancel of a job ``x/logs``."""

    regex = r"[^/](?:(?!/logs\Z).)*"


def create_app(settings: Callable[[], Settings] = Settings.from_env) -> Flask:
    """The jobs API. ``settings`` says where to act (default: the environment)."""
    app = Flask(__name__)
    app.url_map.converters["job_id"] = _JobId
    # A body over the job request limit is refused before it is read.
    app.config["MAX_CONTENT_LENGTH"] = REQUEST_LIMITS.max_bytes
    document = functools.cache(openapi_document)

    def config() -> AccelopsConfig:
        return load_config_or_retry(settings())

    def current_caller() -> Caller:
        found: Caller = g.caller
        return found

    @app.before_request
    def identify() -> Response | None:
        # A path or method no route serves is answered as such (404, 405): the routes
        # are public (/openapi.json).
        if not request.path.startswith("/v1/") or request.routing_exception is not None:
            return None
        found = authenticate(request, config())
        if not found.teams:
            raise ForbiddenError(f"{found.email} may act for no team (a team's members or "
                                 "jobs_api.admins in the configuration)")
        g.caller = found
        _check_query(_QUERY.get(request.endpoint or "", ()))
        return None

    @app.get("/healthz")
    def healthz() -> Response:
        return Response("ok\n", mimetype="text/plain", headers={"Cache-Control": "no-store"})

    @app.get("/openapi.json")
    def openapi() -> Response:
        return _json(document())

    @app.post(JOBS_PATH)
    def submit() -> Response:
        who, where, policy = current_caller(), settings(), config()
        job = read_job_request(request.get_data(cache=False))
        if not who.may_act_for(job.team):
            raise ForbiddenError(f"{who.email} may not act for team {job.team!r} "
                                 f"(may for: {', '.join(sorted(who.teams))})",
                                 field="team", rule="must be a team the caller may act for")
        check_policy(job, policy)
        request_id = job.request_id or new_request_id()
        body = job.model_copy(update={"request_id": request_id})
        data = json.dumps(body.model_dump(mode="json", exclude_none=True), ensure_ascii=False,
                          separators=(",", ":")).encode("utf-8")
        where.require("project")
        assert where.project is not None
        message_id = pubsub.publish(where.project, policy.topics.job_requests, data,
                                    {"submitted_by": who.email})
        log.info("job request published", request_id=request_id, team=job.team,
                 caller=who.email, message_id=message_id)
        accepted = Accepted(request_id=request_id, status_url=job_path(request_id))
        return _json(accepted.model_dump(), 202, {"Location": accepted.status_url})

    @app.get(JOBS_PATH)
    def list_all() -> Response:
        who, policy = current_caller(), config()
        team = request.args.get("team", "").strip() or None
        if team is not None and not who.may_act_for(team):
            raise ForbiddenError(f"{who.email} may not act for team {team!r}",
                                 field="team", rule="must be a team the caller may act for")
        only = team or (next(iter(who.teams)) if not who.admin and len(who.teams) == 1
                        else None)
        jobs = list_jobs(settings(), policy, team=only)
        if only is None and not who.admin:
            jobs = [job for job in jobs if job.team in who.teams]
        return _json({"jobs": [job.model_dump(mode="json") for job in jobs]})

    def readable(job_id: str) -> Any:
        """The job's status, if the caller may act for its team (ForbiddenError)."""
        who = current_caller()
        status = job_status(settings(), config(), job_id)
        if status.team is None or not who.may_act_for(status.team):
            raise _not_yours(f"job {job_id!r}", status.team, who)
        return status

    @app.get(f"{JOBS_PATH}/<job_id:job_id>")
    def status_of(job_id: str) -> Response:
        return _json(readable(job_id).model_dump(mode="json"))

    @app.delete(f"{JOBS_PATH}/<job_id:job_id>")
    def cancel(job_id: str) -> Response:
        who = current_caller()
        status = cancel_job(settings(), config(), job_id, teams=who.restricted_to)
        log.info("job cancelled", job=job_id, team=status.team, caller=who.email)
        return _json(status.model_dump(mode="json"))

    @app.get(f"{JOBS_PATH}/<job_id:job_id>/logs")
    def logs(job_id: str) -> Response:
        pod = request.args.get("pod", "").strip() or None
        tail = _tail_lines(request.args.get("tail_lines"))
        who, where, policy = current_caller(), settings(), config()
        # One lookup says whose job it is (job_logs finds it again: a second list call,
        # cheaper than a full status).
        jobset = find_jobset(get_client(where), job_id)
        if jobset is not None:
            namespace = str((jobset.get("metadata") or {}).get("namespace", ""))
            team = team_namespaces(policy).get(namespace)
            if team is None:
                # Logs are read in team namespaces only (the service's RBAC).
                raise ForbiddenError(f"{jobset_ref(jobset)} is in namespace {namespace}, "
                                     "which is no team's: its logs are not served here",
                                     field="id", rule="must be a job of a team")
            if not who.may_act_for(team):
                raise _not_yours(jobset_ref(jobset), team, who)
        text = job_logs(where, policy, job_id, pod=pod, tail_lines=tail)
        return Response(text, mimetype="text/plain", headers={"Cache-Control": "no-store"})

    _add_error_handlers(app)
    return app


def _not_yours(job: str, team: str | None, who: Caller) -> ForbiddenError:
    whose = f"team {team}'s" if team else "no team's"
    return ForbiddenError(f"{job} is {whose} job; {who.email} may act for "
                          f"{', '.join(sorted(who.teams))} only", field="id",
                          rule="must be a job of your team")


# The query parameters each operation takes; any other is refused, so a misspelt one
# (``?teams=``) is an error rather than silently ignored.
_QUERY: dict[str, tuple[str, ...]] = {"list_all": ("team",), "logs": ("pod", "tail_lines")}


def _check_query(allowed: tuple[str, ...]) -> None:
    for name in request.args:
        if name not in allowed:
            takes = f"takes only {', '.join(allowed)}" if allowed else "takes none"
            raise PermanentError(f"unknown query parameter {name[:64]!r}: this operation "
                                 f"{takes}", field=name[:64], rule="unknown query parameter")
        if len(request.args.getlist(name)) > 1:
            raise PermanentError(f"query parameter {name!r} is given more than once",
                                 field=name, rule="at most once")


def _tail_lines(value: str | None) -> int | None:
    if value is None or value == "":
        return None
    if not value.isdigit() or not 1 <= int(value) <= LOGS_MAX_TAIL_LINES:
        raise PermanentError(f"tail_lines {value[:32]!r} is not a whole number from 1 to "
                             f"{LOGS_MAX_TAIL_LINES}", field="tail_lines",
                             rule=f"must be an integer from 1 to {LOGS_MAX_TAIL_LINES}")
    return int(value)


def _add_error_handlers(app: Flask) -> None:
    @app.errorhandler(InvalidTokenError)
    def unauthenticated(exc: InvalidTokenError) -> Response:
        log.warning("request refused: no valid ID token", path=request.path,
                    reason=exc.message)
        return _error(401, exc.message,
                      headers={"WWW-Authenticate": 'Bearer realm="accelops-jobs-api"'})

    @app.errorhandler(ForbiddenError)
    def forbidden(exc: ForbiddenError) -> Response:
        log.warning("request refused: team not allowed", path=request.path, **exc.as_fields())
        return _error(403, exc.message, field=exc.field, rule=exc.rule)

    @app.errorhandler(NotFoundError)
    def not_found(exc: NotFoundError) -> Response:
        return _error(404, exc.message, field=exc.field, rule=exc.rule)

    @app.errorhandler(ConflictError)
    def conflict(exc: ConflictError) -> Response:
        return _error(409, exc.message, field=exc.field, rule=exc.rule)

    @app.errorhandler(PermanentError)
    def refused(exc: PermanentError) -> Response:
        return _error(400, exc.message, field=exc.field, rule=exc.rule)

    @app.errorhandler(DeploymentError)
    def misconfigured(exc: DeploymentError) -> Response:
        # The deployment's fault, not the caller's: say what is wrong, log it loudly.
        log.error("jobs API misconfigured", path=request.path, **exc.as_fields())
        return _error(500, f"the jobs API is misconfigured: {exc.message}")

    @app.errorhandler(TransientError)
    def unavailable(exc: TransientError) -> Response:
        log.warning("backend unavailable", path=request.path, **exc.as_fields())
        return _error(503, exc.message, headers={"Retry-After": _RETRY_AFTER_S})

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        status = exc.code or 500
        if status == 413:
            return _error(413, f"the request body is over {REQUEST_LIMITS.max_bytes} bytes",
                          field="<root>", rule=f"at most {REQUEST_LIMITS.max_bytes} bytes")
        response = _error(status, exc.description or exc.name)
        if status == 405 and exc.get_response().headers.get("Allow"):
            response.headers["Allow"] = exc.get_response().headers["Allow"]
        return response

    @app.errorhandler(AccelopsError)
    def other(exc: AccelopsError) -> Response:
        log.error("unexpected error", path=request.path, **exc.as_fields())
        return _error(500, exc.message)
