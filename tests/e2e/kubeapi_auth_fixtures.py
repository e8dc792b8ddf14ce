"""Fixtures for the sandbox Kubernetes API with authentication and RBAC switched on.

The server gets a token file like kube-apiserver's ``--token-auth-file``: the
sandbox administrator (``system:masters``), a user with no grants, a team
member and a service account. It serves HTTPS, so kubectl sends the tokens.
Test modules import what they use.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from sandbox.kubeapi import (
    KubeApiServer,
    TokenEntry,
    admin_entry,
    install_crds,
    start_kube_api,
    write_token_file,
)
from sandbox.kubeapi.authn import service_account_groups, service_account_user
from sandbox.kubeapi.kubeconfig import DEFAULT_TOKEN

KUBECTL = shutil.which("kubectl")
KUBECTL_TIMEOUT = 60.0
TEAM_NAMESPACE = "research"
SUBMITTER_SA = "submitter"

ADMIN = admin_entry(DEFAULT_TOKEN)
NOBODY = TokenEntry("nobody-token", "nobody", "nobody")
ALICE = TokenEntry("alice-token", "alice", "alice", ("research-team",))
SUBMITTER = TokenEntry(
    "submitter-token",
    service_account_user(TEAM_NAMESPACE, SUBMITTER_SA),
    "submitter-uid",
    service_account_groups(TEAM_NAMESPACE),
)

needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")


class SecureApi:
    """A running RBAC-enforcing server and where its token file and access log are."""

    def __init__(self, server: KubeApiServer, directory: Path, access_log: Path) -> None:
        self.server = server
        self.directory = directory
        self.access_log = access_log

    def kubeconfig(self, entry: TokenEntry = ADMIN) -> Path:
        """A kubeconfig authenticating as ``entry``."""
        return self.server.write_kubeconfig(
            self.directory / f"kubeconfig-{entry.user.replace(':', '_')}", token=entry.token
        )

    def client(self, entry: TokenEntry = ADMIN) -> client.ApiClient:
        """A kubernetes ApiClient authenticating as ``entry``."""
        return config.new_client_from_config(config_file=str(self.kubeconfig(entry)))

    def log_lines(self) -> list[dict[str, Any]]:
        """The access log, parsed."""
        if not self.access_log.exists():
            return []
        return [json.loads(line) for line in self.access_log.read_text().splitlines()]

    def kubectl(
        self, *args: str, entry: TokenEntry = ADMIN, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run the real kubectl against the server as ``entry``; output as text."""
        assert KUBECTL is not None
        argv = [KUBECTL, f"--kubeconfig={self.kubeconfig(entry)}",
                f"--cache-dir={self.directory / 'kubectl-cache'}", *args]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=KUBECTL_TIMEOUT,
                              check=False, stdin=subprocess.DEVNULL)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
        return done


@pytest.fixture
def secure_api(tmp_path: Path) -> Iterator[SecureApi]:
    tokens = write_token_file(tmp_path / "tokens.csv", [ADMIN, NOBODY, ALICE, SUBMITTER])
    access_log = tmp_path / "access.jsonl"
    server = start_kube_api(token_file=tokens, access_log=access_log)
    install_crds(server.store)
    try:
        yield SecureApi(server, tmp_path, access_log)
    finally:
        server.stop()


@pytest.fixture
def admin_client(secure_api: SecureApi) -> Iterator[client.ApiClient]:
    api_client = secure_api.client(ADMIN)
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture
def research(admin_client: client.ApiClient) -> str:
    """The team namespace, a Role to manage JobSets there, bound to the team's group and
    to the submitter service account."""
    core = client.CoreV1Api(admin_client)
    rbac_api = client.RbacAuthorizationV1Api(admin_client)
    core.create_namespace({"metadata": {"name": TEAM_NAMESPACE}})
    rbac_api.create_namespaced_role(TEAM_NAMESPACE, {
        "metadata": {"name": "jobset-editor"},
        "rules": [
            {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"],
             "verbs": ["get", "list", "create", "patch"]},
            {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"], "verbs": ["get"]},
        ],
    })
    rbac_api.create_namespaced_role_binding(TEAM_NAMESPACE, {
        "metadata": {"name": "team-edits-jobsets"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "jobset-editor"},
        "subjects": [
            {"kind": "Group", "name": "research-team", "apiGroup": "rbac.authorization.k8s.io"},
            {"kind": "ServiceAccount", "name": SUBMITTER_SA, "namespace": TEAM_NAMESPACE},
        ],
    })
    return TEAM_NAMESPACE
