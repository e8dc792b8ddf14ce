"""shared.idtoken against the sandbox's issuer over HTTP: which tokens prove an identity,
and how often the certificates are fetched."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from sandbox.common.httpserver import ApiHttpServer, free_port
from sandbox.idtokens import TokenIssuer, certs_url, serve_certs
from shared import idtoken
from shared.errors import UnavailableError

AUDIENCE = "https://jobs.example"


@pytest.fixture
def issuer() -> Iterator[tuple[TokenIssuer, ApiHttpServer[TokenIssuer]]]:
    issuer = TokenIssuer.generate()
    server = serve_certs(issuer)
    try:
        yield issuer, server
    finally:
        server.close()


def test_a_token_of_the_issuer_names_its_verified_email(issuer):
    signer, server = issuer
    token = signer.mint("Alice@Example.com", AUDIENCE)

    verified = idtoken.verify(token, [AUDIENCE, "other"], certs_url(server.port))

    assert verified.email == "alice@example.com"
    assert verified.audience == AUDIENCE
    assert verified.expires_at > time.time()


@pytest.mark.parametrize(("mint", "says"), [
    (lambda s: s.mint("a@x.com", "https://elsewhere"), "wrong audience"),
    (lambda s: s.mint("a@x.com", AUDIENCE, issued_at=time.time() - 4000), "expired"),
    (lambda s: s.mint("a@x.com", AUDIENCE, issued_at=time.time() + 600), "too early"),
    (lambda s: TokenIssuer.generate().mint("a@x.com", AUDIENCE, key_id=s.key_id), "signature"),
    (lambda s: s.mint("a@x.com", AUDIENCE, issuer="https://evil.example"), "issuer"),
    (lambda s: s.mint("a@x.com", AUDIENCE, email_verified=False), "not verified"),
    (lambda s: "a.b.c", "invalid ID token"),
])
def test_a_token_that_proves_nothing_is_refused_saying_why(issuer, mint, says):
    signer, server = issuer

    with pytest.raises(idtoken.InvalidTokenError, match=says):
        idtoken.verify(mint(signer), [AUDIENCE], certs_url(server.port))


def test_certificates_are_fetched_once_while_they_last(issuer):
    signer, server = issuer
    url = certs_url(server.port)
    idtoken.verify(signer.mint("a@x.com", AUDIENCE), [AUDIENCE], url)
    server.close()  # nothing answers now: only the kept certificates can verify

    verified = idtoken.verify(signer.mint("b@x.com", AUDIENCE), [AUDIENCE], url)

    assert verified.email == "b@x.com"


def test_unreachable_certificates_are_a_passing_failure_not_a_bad_token():
    url = certs_url(free_port())
    token = TokenIssuer.generate().mint("a@x.com", AUDIENCE)

    with pytest.raises(UnavailableError):
        idtoken.verify(token, [AUDIENCE], url)


def test_a_token_from_the_environment_is_what_clients_send(monkeypatch):
    monkeypatch.setenv(idtoken.TOKEN_ENV, "  given-token  ")

    assert idtoken.fetch_token(AUDIENCE) == "given-token"


def test_a_malformed_token_is_never_quoted_back(issuer):
    _, server = issuer
    secret = "Zm9vYmFy-not-a-jwt-but-maybe-a-secret"

    with pytest.raises(idtoken.InvalidTokenError) as refused:
        idtoken.verify(secret, [AUDIENCE], certs_url(server.port))

    assert secret not in refused.value.message
