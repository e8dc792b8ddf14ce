"""Where a sandbox's parts serve: the processes it started (:class:`Component`, as
``state.json`` lists them), their URLs, and the environment that points a client, a
function or a service at them.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox.idtokens import TokenIssuer, certs_url
from sandbox.pubsub.emulator import STANDIN_DESCRIPTION
from sandbox.supervisor.identities import ClusterAccess, cluster_access
from sandbox.topology import CLUSTER, FUNCTIONS, LOCATION, MODELS_BUCKET, PROJECT
from shared.idtoken import CERTS_URL_ENV
from shared.jobs.api import AUDIENCE_ENV
from shared.prometheus import URL_ENV as PROMETHEUS_URL_ENV

__all__ = ["Component", "Endpoints"]


@dataclass
class Component:
    name: str
    port: int
    command: list[str]
    log: str
    pid: int = 0
    env: dict[str, str] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)  # further ports it serves
    about: str = ""  # what serves there, when there is a choice (`status` prints it)



class Endpoints:
    """The endpoints of the components a sandbox rooted at ``state_dir`` runs."""

    state_dir: Path
    components: dict[str, Component]

    def has(self, component: str) -> bool:
        return component in self.components

    # -- paths and environment -------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def config(self) -> Path:
        return self.state_dir / "config.yaml"

    @property
    def access(self) -> ClusterAccess:
        """Certificate, tokens, per-function kubeconfigs and the API's access log."""
        return cluster_access(self.state_dir, self.kubeconfig)

    @property
    def kube_url(self) -> str:
        return f"https://127.0.0.1:{self.components['cluster'].port}"

    @property
    def gke_url(self) -> str:
        return f"http://127.0.0.1:{self.components['cluster'].ports['gke']}"

    @property
    def pubsub_host(self) -> str:
        return f"127.0.0.1:{self.components['pubsub'].port}"

    @property
    def pubsub_description(self) -> str:
        """What serves Pub/Sub: ``accelops stand-in`` or ``Google Pub/Sub emulator 0.8.20``."""
        return self.components["pubsub"].about or STANDIN_DESCRIPTION

    @property
    def bigquery_url(self) -> str:
        return f"http://127.0.0.1:{self.components['bigquery'].port}"

    @property
    def triton_url(self) -> str:
        return f"http://127.0.0.1:{self.components['inference'].port}"

    @property
    def saxml_url(self) -> str:
        return f"http://127.0.0.1:{self.components['inference'].ports['saxml']}"

    @property
    def storage_url(self) -> str:
        return f"http://127.0.0.1:{self.components['storage'].port}"

    @property
    def models_bucket(self) -> str:
        return MODELS_BUCKET

    @property
    def saxml_proxy_url(self) -> str:
        return f"http://127.0.0.1:{self.components['saxml'].port}"

    @property
    def prometheus_url(self) -> str:
        """The sandbox's Prometheus (its HTTP API under ``/api/v1``)."""
        return f"http://127.0.0.1:{self.components['monitoring'].port}"

    def function_url(self, target: str) -> str:
        return f"http://127.0.0.1:{self.components[target].port}/"

    def service_url(self, name: str) -> str:
        """A service's root URL, without a trailing slash (as Cloud Run's)."""
        return f"http://127.0.0.1:{self.components[name].port}"

    @property
    def jobs_api_url(self) -> str:
        return self.service_url("jobs_api")

    @property
    def id_token_dir(self) -> Path:
        """Where the ID token issuer keeps its key (``sandbox/idtokens.py``)."""
        return self.state_dir / "id-tokens"

    @property
    def id_token_certs_url(self) -> str:
        return certs_url(self.components["idtokens"].port)

    def id_token(self, email: str, audience: str | None = None, **claims: Any) -> str:
        """An ID token for ``email``, signed by the sandbox's issuer, for the jobs API
        (or ``audience``); ``claims`` as :meth:`sandbox.idtokens.TokenIssuer.mint`."""
        issuer = TokenIssuer.load(self.id_token_dir)
        return issuer.mint(email, audience or self.jobs_api_url, **claims)

    def redeliver(self, target: str, message_id: str, data: bytes,
                  attributes: dict[str, str] | None = None) -> int:
        """Deliver an already delivered message once more to a function, in Pub/Sub's
        push format, as Pub/Sub does when an ack is lost; returns the HTTP status."""
        spec = next(spec for spec in FUNCTIONS if spec.target == target)
        envelope = {
            "message": {"data": base64.b64encode(data).decode(), "messageId": message_id,
                        "message_id": message_id, "attributes": attributes or {},
                        "publishTime": "2026-01-01T00:00:00Z"},
            "subscription": f"projects/{PROJECT}/subscriptions/{spec.subscription}",
        }
        request = urllib.request.Request(  # noqa: S310 - a loopback URL we started
            self.function_url(target), data=json.dumps(envelope).encode(),
            headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    def env(self) -> dict[str, str]:
        """The environment a client (or a function) uses to reach this sandbox."""
        env = {
            "PUBSUB_EMULATOR_HOST": self.pubsub_host,
            "ACCELOPS_CONFIG": str(self.config),
            "ACCELOPS_PROJECT": PROJECT,
            "ACCELOPS_LOCATION": LOCATION,
            "ACCELOPS_CLUSTER": CLUSTER,
        }
        if self.has("cluster"):
            env["KUBECONFIG"] = str(self.kubeconfig)
            env["ACCELOPS_GKE_ENDPOINT"] = self.gke_url
        if self.has("bigquery"):
            env["BIGQUERY_EMULATOR_HOST"] = self.bigquery_url
        if self.has("storage"):
            env["STORAGE_EMULATOR_HOST"] = self.storage_url
        if self.has("saxml"):
            env["ACCELOPS_SAXML_PROXY"] = self.saxml_proxy_url
        if self.has("monitoring"):
            env[PROMETHEUS_URL_ENV] = self.prometheus_url
        return env

    def function_env(self, target: str) -> dict[str, str]:
        """A function's environment: the sandbox's, with a kubeconfig for its own identity."""
        env = self.env()
        if self.has("cluster"):
            env["KUBECONFIG"] = str(self.access.kubeconfig(target))
        return env

    def service_env(self, name: str) -> dict[str, str]:
        """A service's environment: a function's, plus where ID tokens are checked
        (the sandbox's issuer) and for which audience (the service's own URL)."""
        env = self.function_env(name)
        if self.has("idtokens"):
            env[CERTS_URL_ENV] = self.id_token_certs_url
            env[AUDIENCE_ENV] = self.service_url(name)
        return env

    @contextlib.contextmanager
    def client_env(self) -> Iterator[None]:
        """Point this process's Google and Kubernetes clients at the sandbox for a while."""
        saved = {k: os.environ.get(k) for k in self.env()}
        os.environ.update(self.env())
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
