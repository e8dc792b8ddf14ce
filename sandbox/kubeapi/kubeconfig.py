"""Kubeconfig files pointing the official client at the sandbox API.

Code under test builds its client with ``kubernetes.config.load_kube_config``
exactly as it does for GKE; only the file differs. The sandbox speaks plain
HTTP on 127.0.0.1. The bearer token is ignored unless the server was started
with a token file; then it decides who the client is (pass ``token=``).
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import yaml

DEFAULT_CONTEXT = "accelops-sandbox"
# The sandbox administrator's token (see sandbox.kubeapi.authn.admin_entry).
DEFAULT_TOKEN = "sandbox-token"  # noqa: S105 - not a secret: a loopback-only sandbox


def kubeconfig_dict(
    server_url: str,
    *,
    context: str = DEFAULT_CONTEXT,
    namespace: str | None = None,
    token: str = DEFAULT_TOKEN,
    certificate_authority: bytes | None = None,
) -> dict[str, Any]:
    """A kubeconfig with one cluster, one token user and one current context;
    ``certificate_authority`` (PEM) is what an ``https://`` server's certificate is checked
    against."""
    context_body: dict[str, Any] = {"cluster": context, "user": context}
    if namespace:
        context_body["namespace"] = namespace
    cluster: dict[str, Any] = {"server": server_url}
    if certificate_authority is not None:
        cluster["certificate-authority-data"] = base64.b64encode(certificate_authority).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": context, "user": {"token": token}}],
        "contexts": [{"name": context, "context": context_body}],
        "current-context": context,
    }


def write_kubeconfig(
    path: str | os.PathLike[str],
    server_url: str,
    *,
    context: str = DEFAULT_CONTEXT,
    namespace: str | None = None,
    token: str = DEFAULT_TOKEN,
    certificate_authority: bytes | None = None,
) -> Path:
    """Write :func:`kubeconfig_dict` as YAML (mode 0600, like kubectl) and return the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(
        kubeconfig_dict(
            server_url,
            context=context,
            namespace=namespace,
            token=token,
            certificate_authority=certificate_authority,
        ),
        sort_keys=False,
    )
    # Written beside the target and renamed over it: a reader never sees a half-written file.
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    partial.write_text(text, encoding="utf-8")
    partial.chmod(0o600)
    partial.replace(target)
    return target
