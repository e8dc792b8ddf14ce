"""A local GKE (Container API v1) endpoint over REST: the subset accelops uses.

google-cloud-container's REST transport reaches it through
``ACCELOPS_GKE_ENDPOINT``. So far it serves clusters (get, list), enough for
Kubernetes endpoint discovery: each cluster's ``endpoint`` is the sandbox
Kubernetes API's URL. Errors use Google's JSON error shape, which the client maps
to its exception types (404 → ``NotFound``).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Cluster", "GkeApiServer", "start_gke_api"]

_CLUSTER = re.compile(r"^/v1/projects/([^/]+)/locations/([^/]+)/clusters/([^/:]+)$")
_CLUSTERS = re.compile(r"^/v1/projects/([^/]+)/locations/([^/]+)/clusters$")


@dataclass
class Cluster:
    project: str
    location: str
    name: str
    endpoint: str
    ca_certificate: str = ""  # base64 PEM, as GKE returns it

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "location": self.location,
            "zone": self.location,
            "endpoint": self.endpoint,
            "status": "RUNNING",
            "selfLink": f"/v1/projects/{self.project}/locations/{self.location}"
                        f"/clusters/{self.name}",
            "masterAuth": {"clusterCaCertificate": self.ca_certificate},
        }


@dataclass
class GkeApiServer:
    clusters: list[Cluster] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def find(self, project: str, location: str, name: str) -> Cluster | None:
        for cluster in self.clusters:
            if (cluster.project, cluster.location, cluster.name) == (project, location, name):
                return cluster
        return None

    def start(self, port: int = 0) -> GkeApiServer:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if match := _CLUSTER.match(path):
                    cluster = api.find(*match.groups())
                    if cluster is None:
                        self._error(404, "NOT_FOUND", f"Not found: {path[4:]}.")
                    else:
                        self._send(200, cluster.as_json())
                elif match := _CLUSTERS.match(path):
                    project, location = match.groups()
                    self._send(200, {"clusters": [
                        c.as_json() for c in api.clusters
                        if c.project == project and location in ("-", c.location)]})
                else:
                    self._error(404, "NOT_FOUND", f"unknown path {path}")

            def _error(self, code: int, status: str, message: str) -> None:
                self._send(code, {"error": {"code": code, "message": message,
                                            "status": status}})

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="sandbox-gke")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def start_gke_api(clusters: list[Cluster], port: int = 0) -> GkeApiServer:
    """Serve the clusters on 127.0.0.1 in a background thread."""
    return GkeApiServer(clusters=list(clusters)).start(port)
