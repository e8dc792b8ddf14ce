"""The Prometheus adapter over real sockets: a loopback server answering as Prometheus
(and as Google's token endpoint) does, and the errors each answer becomes."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.auth import jwt

from shared import prometheus
from shared.errors import (
    PermissionDeniedError,
    RateLimitedError,
    UnavailableError,
)
from shared.prometheus import InvalidQueryError, instant_query

OK = {"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": {"release": "r1"}, "value": [1764331200.25, "12"]}]}}
BAD_DATA = {"status": "error", "errorType": "bad_data",
            "error": 'invalid parameter "query": 1:5: parse error: unexpected "}"'}


class Script:
    """What the loopback server answers next, and what it was asked."""

    def __init__(self) -> None:
        self.status = 200
        self.body: Any = OK
        self.delay = 0.0
        self.requests: list[tuple[str, str, dict[str, list[str]], str | None]] = []
        self.tokens_issued = 0


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return None

        def _send(self, status: int, body: Any) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(data)  # a client that timed out has gone

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            script.requests.append(("GET", url.path, parse_qs(url.query),
                                    self.headers.get("Authorization")))
            if script.delay:
                threading.Event().wait(script.delay)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._send(script.status, script.body)

        def do_POST(self) -> None:  # Google's OAuth token endpoint
            length = int(self.headers.get("Content-Length") or 0)
            form = parse_qs(self.rfile.read(length).decode())
            script.tokens_issued += 1
            script.requests.append(("POST", self.path, form, None))
            self._send(200, {"access_token": f"token-{script.tokens_issued}",
                             "expires_in": 3600, "token_type": "Bearer"})
    return Handler


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    script = Script()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", script
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def env(server: tuple[str, Script]) -> dict[str, str]:
    return {"ACCELOPS_PROMETHEUS_URL": server[0] + "/prom"}


def test_an_instant_query_is_a_get_with_the_query_and_time(server, env):
    _, script = server
    [sample] = instant_query('sum(x{release="r1"})', at=1764331200.25, environ=env)

    assert (sample.labels, sample.value, sample.timestamp) == ({"release": "r1"}, 12.0,
                                                               1764331200.25)
    [(method, path, params, auth)] = script.requests
    assert (method, path, auth) == ("GET", "/prom/api/v1/query", None)
    assert params == {"query": ['sum(x{release="r1"})'], "time": ["1764331200.250"]}


def test_bad_data_is_a_fault_of_the_query_and_is_not_retried(server, env):
    _, script = server
    script.status, script.body = 400, BAD_DATA
    with pytest.raises(InvalidQueryError, match="parse error") as caught:
        instant_query("sum(x", environ=env)
    assert caught.value.retry is False
    assert "the query accelops builds" in str(caught.value)


def test_a_google_invalid_argument_is_a_fault_of_the_query_too(server, env):
    _, script = server
    script.status = 400
    script.body = {"error": {"code": 400, "message": "bad PromQL", "status": "INVALID_ARGUMENT"}}
    with pytest.raises(InvalidQueryError, match="bad PromQL"):
        instant_query("sum(x", environ=env)


@pytest.mark.parametrize(("status", "error"), [
    (500, UnavailableError), (503, UnavailableError), (429, RateLimitedError),
    (403, PermissionDeniedError), (401, PermissionDeniedError),
    (422, UnavailableError),  # an execution error (too many samples): may pass
])
def test_server_answers_become_retried_or_deployment_errors(server, env, status, error):
    _, script = server
    script.status = status
    script.body = {"status": "error", "errorType": "execution" if status == 422 else
                   "unavailable", "error": "nope"}
    with pytest.raises(error) as caught:
        instant_query("up", environ=env)
    assert caught.value.retry is True


def test_a_timeout_is_retried(server, env):
    _, script = server
    script.delay = 1.0
    with pytest.raises(UnavailableError, match=r"within 0\.2s"):
        instant_query("up", environ=env, timeout=0.2)


def test_a_refused_connection_is_retried():
    from sandbox.common.httpserver import free_port
    env = {"ACCELOPS_PROMETHEUS_URL": f"http://127.0.0.1:{free_port()}"}
    with pytest.raises(UnavailableError, match="could not be reached"):
        instant_query("up", environ=env)


def test_managed_prometheus_is_asked_with_a_cached_google_token(server, tmp_path,
                                                                 monkeypatch):
    url, script = server
    # Application default credentials: a service account key whose token endpoint is
    # on loopback (google-auth signs a JWT with the key and trades it for a token).
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    adc = tmp_path / "adc.json"
    adc.write_text(json.dumps({"type": "service_account", "project_id": "acme",
                               "private_key_id": "k1", "private_key": pem,
                               "client_email": "reconcile-models@acme.iam.gserviceaccount.com",
                               "client_id": "1", "token_uri": f"{url}/token"}))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(adc))
    monkeypatch.setattr(prometheus, "GMP_URL_TEMPLATE", url + "/v1/projects/{project}"
                        "/location/global/prometheus")
    monkeypatch.setattr(prometheus, "_sessions", {})

    instant_query("up", environ={"ACCELOPS_PROJECT": "acme"})
    instant_query("up", environ={"ACCELOPS_PROJECT": "acme"})

    gets = [r for r in script.requests if r[0] == "GET"]
    assert [r[1] for r in gets] == ["/v1/projects/acme/location/global/prometheus/api/v1/query"] * 2
    assert [r[3] for r in gets] == ["Bearer token-1"] * 2
    assert script.tokens_issued == 1
    [(_, _, form, _)] = [r for r in script.requests if r[0] == "POST"]
    assert form["grant_type"] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"]
    claims = jwt.decode(form["assertion"][0].encode(), verify=False)
    assert claims["scope"] == "https://www.googleapis.com/auth/monitoring.read"
