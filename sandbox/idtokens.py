"""The sandbox's stand-in for Google's ID token issuer.

Production callers of the jobs API present Google-signed ID tokens, which the
service checks against Google's public certificates. The sandbox has no Google, so
it keeps an RSA key of its own (in the state directory), signs tokens for test
identities with it — with google-auth's own ``crypt``/``jwt``, as Google signs them:
RS256, a key id, Google's issuer, ``aud``, ``iat``/``exp``, ``email`` and
``email_verified`` — and serves the certificate in Google's format
(``{key id: PEM certificate}``, as https://www.googleapis.com/oauth2/v1/certs) on
127.0.0.1. The jobs API of the sandbox is pointed at that endpoint with
``ACCELOPS_ID_TOKEN_CERTS_URL``; everything else about the check is production's.

``accelops sandbox token --as EMAIL`` prints a token; ``python -m sandbox.idtokens``
serves the certificates until signalled.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import logging
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from sandbox.common.httpserver import ApiHttpServer, ApiRequestHandler
from shared.idtoken import GOOGLE_ISSUERS

__all__ = ["CERTS_PATH", "TokenIssuer", "certs_url", "serve_certs"]

# Where Google serves its certificates (www.googleapis.com/oauth2/v1/certs).
CERTS_PATH = "/oauth2/v1/certs"
DEFAULT_LIFETIME_SECONDS = 3600
_CERTS_MAX_AGE_SECONDS = 300


@dataclass(frozen=True, slots=True)
class TokenIssuer:
    """An RSA key and its self-signed certificate, named by a key id."""

    key_pem: bytes
    cert_pem: bytes
    key_id: str

    @classmethod
    def generate(cls) -> TokenIssuer:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sandbox-id-token-issuer")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=365))
                .sign(key, hashes.SHA256()))
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        key_pem = key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        return cls(key_pem, cert_pem, hashlib.sha256(cert_pem).hexdigest()[:40])

    @classmethod
    def load(cls, directory: Path) -> TokenIssuer:
        """The issuer kept in ``directory`` (FileNotFoundError when there is none)."""
        meta = json.loads((directory / "issuer.json").read_text())
        return cls((directory / "key.pem").read_bytes(), (directory / "cert.pem").read_bytes(),
                   str(meta["key_id"]))

    @classmethod
    def in_directory(cls, directory: Path) -> TokenIssuer:
        """The issuer kept in ``directory``, made (and kept there) the first time, so a
        restarted sandbox still accepts the tokens it printed before."""
        try:
            return cls.load(directory)
        except FileNotFoundError:
            issuer = cls.generate()
            issuer.save(directory)
            return issuer

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        key = directory / "key.pem"
        key.write_bytes(self.key_pem)
        key.chmod(0o600)
        (directory / "cert.pem").write_bytes(self.cert_pem)
        (directory / "issuer.json").write_text(json.dumps({"key_id": self.key_id}))

    def certs(self) -> dict[str, str]:
        """The public certificates in Google's v1 format."""
        return {self.key_id: self.cert_pem.decode("ascii")}

    def mint(self, email: str, audience: str, *, lifetime: int = DEFAULT_LIFETIME_SECONDS,
             issued_at: float | None = None, issuer: str = GOOGLE_ISSUERS[0],
             email_verified: bool = True, key_id: str | None = None) -> str:
        """An ID token for ``email``, meant for ``audience``. The keyword arguments make
        the wrong tokens tests need (expired, another issuer, an unverified e-mail)."""
        from google.auth import crypt, jwt

        now = int(time.time() if issued_at is None else issued_at)
        signer = crypt.RSASigner.from_string(  # type: ignore[no-untyped-call]
            self.key_pem, key_id or self.key_id)
        payload: dict[str, Any] = {
            "iss": issuer, "aud": audience, "azp": email, "sub": _subject(email),
            "email": email, "email_verified": email_verified,
            "iat": now, "exp": now + lifetime,
        }
        token: bytes = jwt.encode(signer, payload)  # type: ignore[no-untyped-call]
        return token.decode("ascii")


def _subject(email: str) -> str:
    """A stable numeric subject per identity, as Google's ``sub`` is."""
    return str(int(hashlib.sha256(email.lower().encode()).hexdigest()[:15], 16))


class _CertsHandler(ApiRequestHandler):
    server: ApiHttpServer[TokenIssuer]

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != CERTS_PATH:
            self.send_body(404, b'{"error": "not found"}', "application/json")
            return
        body = json.dumps(self.server.api.certs()).encode()
        self.send_body(200, body, "application/json; charset=UTF-8",
                       {"Cache-Control": f"public, max-age={_CERTS_MAX_AGE_SECONDS}"})


def serve_certs(issuer: TokenIssuer, port: int = 0,
                host: str = "127.0.0.1") -> ApiHttpServer[TokenIssuer]:
    """Serve ``issuer``'s certificates at ``http://host:port/oauth2/v1/certs`` on a
    background thread; ``close()`` stops it."""
    server: ApiHttpServer[TokenIssuer] = ApiHttpServer((host, port), issuer, _CertsHandler)
    server.serve_in_background("sandbox-id-token-certs")
    return server


def certs_url(port: int) -> str:
    return f"http://127.0.0.1:{port}{CERTS_PATH}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox.idtokens",
                                     description="Serve the sandbox ID token issuer's "
                                                 "certificates.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--directory", type=Path, required=True,
                        help="where the issuer's key is kept (made when absent)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = serve_certs(TokenIssuer.in_directory(args.directory), args.port)
    logging.getLogger("sandbox.idtokens").info("certificates at %s", certs_url(server.port))
    done = threading.Event()

    def stop(_signum: int, _frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    done.wait()
    server.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
