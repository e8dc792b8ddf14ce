"""Who may do what in the sandbox's Kubernetes API, as on GKE.

The API serves HTTPS with a certificate kept in the state directory (so a restarted
cluster keeps its kubeconfigs valid), authenticates bearer tokens from a token
file, and authorizes with the RBAC that ``manifests/`` applies. Each function (and
each service the sandbox runs, such as the jobs API) runs as its own user, named like
the Google service account GKE would map it to
(``accelops-submit-job@PROJECT.iam.gserviceaccount.com``), with a kubeconfig of its
own; people, tests and the provisioner use the admin kubeconfig (``system:masters``).
So the sandbox proves what production grants is enough — a missing rule fails the
end-to-end tests with a 403 — and the access log shows what each identity did.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sandbox.kubeapi.authn import TokenEntry, admin_entry, write_token_file
from sandbox.kubeapi.kubeconfig import write_kubeconfig
from sandbox.kubeapi.tls import self_signed
from shared.deployment import system
from shared.deployment.manifests import identity
from shared.deployment.model import Function, Service

__all__ = ["ClusterAccess", "cluster_access"]


@dataclass(frozen=True, slots=True)
class ClusterAccess:
    """Files under ``<state>/kube-auth`` (and the admin kubeconfig)."""

    directory: Path
    admin_kubeconfig: Path

    @property
    def token_file(self) -> Path:
        return self.directory / "tokens.csv"

    @property
    def access_log(self) -> Path:
        return self.directory / "access.jsonl"

    @property
    def tls_cert(self) -> Path:
        return self.directory / "tls.crt"

    @property
    def tls_key(self) -> Path:
        return self.directory / "tls.key"

    def kubeconfig(self, function: str) -> Path:
        return self.directory / f"kubeconfig-{function}"

    def server_args(self) -> list[str]:
        """The cluster process's options for serving with these files."""
        return ["--token-auth-file", str(self.token_file), "--access-log", str(self.access_log),
                "--tls-cert", str(self.tls_cert), "--tls-key", str(self.tls_key)]

    def write(self, server_url: str, project: str, functions: Iterable[str]) -> None:
        """A fresh certificate, tokens and kubeconfigs (before the server starts);
        ``functions``: the functions and services that get an identity."""
        self.directory.mkdir(parents=True, exist_ok=True)
        certificate = self_signed("127.0.0.1")
        self.tls_cert.write_bytes(certificate.cert_pem)
        self.tls_key.write_bytes(certificate.key_pem)
        self.tls_key.chmod(0o600)
        admin = secrets.token_urlsafe(24)
        entries = [admin_entry(admin)]
        write_kubeconfig(self.admin_kubeconfig, server_url, token=admin,
                         certificate_authority=certificate.cert_pem)
        known: tuple[Function | Service, ...] = (*system.FUNCTIONS, *system.SERVICES)
        specs = {spec.name: spec for spec in known}
        for name in functions:
            token = secrets.token_urlsafe(24)
            user = identity(specs[name], project)
            entries.append(TokenEntry(token, user, user))
            write_kubeconfig(self.kubeconfig(name), server_url, token=token,
                             certificate_authority=certificate.cert_pem)
        write_token_file(self.token_file, entries)


def cluster_access(state_dir: Path, admin_kubeconfig: Path) -> ClusterAccess:
    return ClusterAccess(state_dir / "kube-auth", admin_kubeconfig)
