"""Who is calling: the bearer ID token, checked, and the teams its e-mail may act for.

Cloud Run's IAM check has already let the request through when it reaches the
service; this is the second check (``shared.idtoken``). The audience is what
``ACCELOPS_JOBS_API_AUDIENCE`` lists (comma-separated: the service's URL and any
custom audience); when unset, the URL the request was addressed to, which behind
Cloud Run is one of the service's own (Cloud Run routes by host name).

Send the token in ``Authorization``: Cloud Run strips the signature of a token sent
in ``X-Serverless-Authorization`` before the service sees it.
"""

from __future__ import annotations

import os

from flask import Request

from shared.config import AccelopsConfig
from shared.idtoken import InvalidTokenError, VerifiedToken, verify
from shared.jobs.api import AUDIENCE_ENV
from shared.jobs.callers import Caller, caller

__all__ = ["AUDIENCE_ENV", "audiences", "authenticate", "bearer_token"]

# Bounded before any parsing: a Google ID token is about 1 KB.
MAX_TOKEN_CHARS = 8192


def audiences(request: Request) -> list[str]:
    """The audiences a token must be meant for."""
    listed = [a.strip() for a in os.environ.get(AUDIENCE_ENV, "").split(",") if a.strip()]
    return listed or [request.host_url.rstrip("/")]


def bearer_token(request: Request) -> str:
    """The token of ``Authorization: Bearer ...``; InvalidTokenError without one."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if not header:
        raise InvalidTokenError("no credentials: send 'Authorization: Bearer <ID token>' "
                                "(a Google-signed ID token for this service)")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise InvalidTokenError("the Authorization header must be 'Bearer <ID token>'")
    if len(token) > MAX_TOKEN_CHARS:
        raise InvalidTokenError(f"the bearer token is longer than {MAX_TOKEN_CHARS} "
                                "characters: not an ID token")
    return token


def authenticate(request: Request, config: AccelopsConfig) -> Caller:
    """The caller of ``request``. Raises InvalidTokenError (401) when its token is
    missing or invalid, UnavailableError when the certificates cannot be fetched."""
    verified: VerifiedToken = verify(bearer_token(request), audiences(request))
    return caller(verified.email, config)
