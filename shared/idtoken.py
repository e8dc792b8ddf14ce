"""Google-signed ID tokens: the one module that uses google-auth's ID token support.

The jobs API sits behind Cloud Run's IAM check, which already refuses a request
without a valid token of an allowed invoker. The service checks the token again
itself (defence in depth: a deployment mistake such as ``allUsers`` as invoker must
not open it): the signature against the issuer's public certificates, the audience,
the expiry and the issuer, then takes the caller's e-mail from it.

The certificates come from Google (:data:`GOOGLE_CERTS_URL`) unless
``ACCELOPS_ID_TOKEN_CERTS_URL`` names another endpoint: the sandbox serves its own
there and signs tokens for test identities with the matching key. Trust is anchored
on that endpoint, so the issuer claim is checked against Google's issuers in both
cases. Certificates are cached for the lifetime their response states (Google
rotates its keys daily and announces them in advance), and fetched again once when a
token names a key the cached set lacks.

Clients get tokens with :func:`fetch_token` (application default credentials: a
service account, the metadata server) unless ``ACCELOPS_ID_TOKEN`` holds one.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from shared.errors import ConfigError, PermanentError, UnavailableError

__all__ = [
    "CERTS_URL_ENV",
    "GOOGLE_CERTS_URL",
    "GOOGLE_ISSUERS",
    "TOKEN_ENV",
    "InvalidTokenError",
    "VerifiedToken",
    "certs_url_from_env",
    "fetch_token",
    "verify",
]

GOOGLE_CERTS_URL = "https://www.googleapis.com/oauth2/v1/certs"
# Google writes both forms into ID tokens (https://developers.google.com/identity/
# openid-connect/openid-connect#validatinganidtoken).
GOOGLE_ISSUERS = ("https://accounts.google.com", "accounts.google.com")
CERTS_URL_ENV = "ACCELOPS_ID_TOKEN_CERTS_URL"
TOKEN_ENV = "ACCELOPS_ID_TOKEN"  # noqa: S105 - the name of a variable, not a secret

# Tolerated clock difference between the issuer and this host when checking iat/exp.
CLOCK_SKEW_SECONDS = 10
CERTS_TIMEOUT_SECONDS = 10.0
# When a certificate response states no max-age: Google's state several hours.
_DEFAULT_CERTS_SECONDS = 300.0
_MIN_CERTS_SECONDS = 60.0
# A token naming a key the kept certificates lack makes them be fetched again, at most
# this often.
_REFETCH_AFTER_SECONDS = 30.0
_MAX_AGE = re.compile(r"max-age=(\d+)")


class InvalidTokenError(PermanentError):
    """The request's credentials are missing or do not prove who sent it (HTTP 401)."""


@dataclass(frozen=True, slots=True)
class VerifiedToken:
    """Who a verified token speaks for."""

    email: str
    subject: str
    audience: str
    expires_at: float


def certs_url_from_env() -> str:
    return os.environ.get(CERTS_URL_ENV, "").strip() or GOOGLE_CERTS_URL


@dataclass(slots=True)
class _Certs:
    body: bytes
    fetched_at: float
    lifetime: float


class _CachingRequest:
    """A google.auth transport request that keeps certificate responses for their
    stated lifetime, so a request's token check costs no HTTP call while they last."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[str, _Certs] = {}
        self._inner: Any = None

    def _transport(self) -> Any:
        if self._inner is None:
            from google.auth.transport import requests as google_requests

            self._inner = google_requests.Request()
        return self._inner

    def forget(self, url: str) -> bool:
        """Drop the kept certificates of ``url`` if they are older than
        _REFETCH_AFTER_SECONDS (so tokens naming unknown keys cannot make every
        request fetch them again); whether they were dropped."""
        with self._lock:
            kept = self._kept.get(url)
            if kept is None or time.monotonic() - kept.fetched_at < _REFETCH_AFTER_SECONDS:
                return False
            del self._kept[url]
            return True

    def __call__(self, url: str, method: str = "GET", body: Any = None,
                 headers: Any = None, timeout: Any = None, **kwargs: Any) -> Any:
        now = time.monotonic()
        with self._lock:
            kept = self._kept.get(url)
        if kept is None or now - kept.fetched_at >= kept.lifetime:
            response = self._transport()(url, method=method, body=body, headers=headers,
                                         timeout=CERTS_TIMEOUT_SECONDS, **kwargs)
            if response.status != 200:
                return response  # verify_token turns it into a TransportError
            _check_certs(url, response.data)
            match = _MAX_AGE.search(str(response.headers.get("Cache-Control", "")))
            lifetime = (max(_MIN_CERTS_SECONDS, float(match[1])) if match
                        else _DEFAULT_CERTS_SECONDS)
            kept = _Certs(response.data, now, lifetime)
            with self._lock:
                self._kept[url] = kept
        return _Response(kept.body)


def _check_certs(url: str, body: bytes) -> None:
    """Refuse to keep a certificates response that is not a JSON object: the
    endpoint is misconfigured, which is no fault of the token being checked."""
    from google.auth import exceptions as auth_exc

    try:
        certs = json.loads(body)
    except ValueError as exc:
        raise auth_exc.TransportError(  # type: ignore[no-untyped-call]
            f"{url} did not answer JSON") from exc
    if not isinstance(certs, dict) or not certs:
        raise auth_exc.TransportError(  # type: ignore[no-untyped-call]
            f"{url} answered no certificates")


class _Response:
    """The cached certificates as google.auth's transport response."""

    def __init__(self, data: bytes) -> None:
        self.status = 200
        self.headers: dict[str, str] = {}
        self.data = data


_request = _CachingRequest()


def verify(token: str, audiences: Sequence[str], certs_url: str | None = None) -> VerifiedToken:
    """Check a Google-signed ID token and say whose it is.

    The token must be signed by a key of ``certs_url`` (default: the environment's,
    else Google's), be meant for one of ``audiences``, be current, come from Google's
    issuer and carry a verified e-mail. Raises InvalidTokenError saying what is
    wrong, UnavailableError when the certificates cannot be fetched.
    """
    from google.auth import exceptions as auth_exc
    from google.oauth2 import id_token

    if not audiences:
        raise ConfigError("no audience to check ID tokens against", field="audiences")
    url = certs_url or certs_url_from_env()
    claims: Any = None
    for attempt in range(2):
        try:
            claims = id_token.verify_token(token, cast(Any, _request), audience=list(audiences),
                                           certs_url=url,
                                           clock_skew_in_seconds=CLOCK_SKEW_SECONDS)
            break
        except auth_exc.TransportError as exc:
            raise UnavailableError(f"ID token certificates at {url}: {exc}") from exc
        except (ValueError, auth_exc.GoogleAuthError) as exc:
            # A key the cached set lacks may be a newly rotated one: fetch once more.
            if attempt == 0 and "not found" in str(exc) and _request.forget(url):
                continue
            # google-auth quotes a malformed token whole: never log or answer one.
            reason = str(exc).replace(token, "<token>")[:300]
            raise InvalidTokenError(f"invalid ID token: {reason}") from exc
    return _claims(claims)


def _claims(claims: Any) -> VerifiedToken:
    if not isinstance(claims, dict):
        raise InvalidTokenError("invalid ID token: its payload is not a JSON object")
    if claims.get("iss") not in GOOGLE_ISSUERS:
        raise InvalidTokenError(f"invalid ID token: issuer {claims.get('iss')!r} is not "
                                "Google's")
    email = claims.get("email")
    if not isinstance(email, str) or not email:
        raise InvalidTokenError("invalid ID token: it carries no e-mail (service accounts: "
                                "request the token with the e-mail included)")
    if claims.get("email_verified") is not True:
        raise InvalidTokenError(f"invalid ID token: the e-mail {email!r} is not verified")
    audience = claims.get("aud")
    return VerifiedToken(email=email.lower(), subject=str(claims.get("sub", "")),
                         audience=str(audience), expires_at=float(claims.get("exp", 0)))


def fetch_token(audience: str) -> str:
    """An ID token for calling ``audience``: ``$ACCELOPS_ID_TOKEN`` when set, else one
    from application default credentials (a service account key, the metadata
    server). Raises ConfigError when there are no credentials that can mint one
    (a user's gcloud login cannot: set ACCELOPS_ID_TOKEN, e.g. from
    ``gcloud auth print-identity-token``), UnavailableError when Google cannot be
    reached."""
    given = os.environ.get(TOKEN_ENV, "").strip()
    if given:
        return given
    from google.auth import exceptions as auth_exc
    from google.auth.transport import requests as google_requests
    from google.oauth2 import id_token

    try:
        return str(id_token.fetch_id_token(  # type: ignore[no-untyped-call]
            google_requests.Request(), audience))
    except auth_exc.DefaultCredentialsError as exc:
        raise ConfigError(f"no credentials to get an ID token for {audience}: set "
                          f"{TOKEN_ENV} or use a service account ({exc})",
                          field=TOKEN_ENV) from exc
    except auth_exc.TransportError as exc:
        raise UnavailableError(f"getting an ID token for {audience}: {exc}") from exc
    except auth_exc.RefreshError as exc:
        raise ConfigError(f"cannot get an ID token for {audience}: {exc}",
                          field=TOKEN_ENV) from exc
