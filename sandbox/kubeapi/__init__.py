"""The sandbox Kubernetes API: a local subset of kube-apiserver for tests and demos.

The official ``kubernetes`` client works against it unchanged through a
kubeconfig, so code under test is exercised as it runs on GKE, on machines
with no cluster, no Docker and no kube-apiserver binary::

    server = start_kube_api()
    server.write_kubeconfig(tmp_path / "kubeconfig")
    api = kubernetes.config.new_client_from_config(str(tmp_path / "kubeconfig"))
    ...
    server.faults.fail_next(2, code=503)   # next two requests fail
    server.stop()

With ``token_file=`` (see :func:`write_token_file`) requests are authenticated
and authorized by RBAC like kube-apiserver's, over HTTPS with a self-signed
certificate (kubectl sends tokens to https servers only); ``access_log=``
records each decision as a JSON line; ``server.write_kubeconfig(path, token=...)``
writes a kubeconfig (CA included) for one identity.

Custom resources are served once their CRD exists, as on a real cluster:
``install_crds(server.store)`` installs the sandbox's copies of the pinned CRDs
(JobSet, Kueue, PodMonitoring) the way ``kubectl apply`` of them would.

Simulated controllers in the same process use ``server.store`` (an
:class:`ObjectStore`) directly and ``store.subscribe`` to react to changes.
"""

from __future__ import annotations

import os

from sandbox.kubeapi.authn import TokenEntry, UserInfo, admin_entry, write_token_file
from sandbox.kubeapi.crdfiles import install_crds
from sandbox.kubeapi.errors import ApiError
from sandbox.kubeapi.faults import FaultInjector
from sandbox.kubeapi.kubeconfig import kubeconfig_dict, write_kubeconfig
from sandbox.kubeapi.patch import PatchType
from sandbox.kubeapi.server import KubeApiServer
from sandbox.kubeapi.serviceproxy import PodAddress
from sandbox.kubeapi.store import Clock, DeleteResult, ObjectStore, format_timestamp
from sandbox.kubeapi.tls import ServingCertificate

__all__ = [
    "ApiError",
    "Clock",
    "DeleteResult",
    "FaultInjector",
    "KubeApiServer",
    "ObjectStore",
    "PatchType",
    "PodAddress",
    "TokenEntry",
    "UserInfo",
    "admin_entry",
    "format_timestamp",
    "install_crds",
    "kubeconfig_dict",
    "start_kube_api",
    "write_kubeconfig",
    "write_token_file",
]


def start_kube_api(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    state_file: str | os.PathLike[str] | None = None,
    clock: Clock | None = None,
    store: ObjectStore | None = None,
    token_file: str | os.PathLike[str] | None = None,
    access_log: str | os.PathLike[str] | None = None,
    certificate: ServingCertificate | None = None,
    pod_address: PodAddress | None = None,
) -> KubeApiServer:
    """Start a sandbox API in a daemon thread (port 0 = any free port) and return it."""
    return KubeApiServer(
        host,
        port,
        state_file=state_file,
        clock=clock,
        store=store,
        token_file=token_file,
        access_log=access_log,
        certificate=certificate,
        pod_address=pod_address,
    ).start()
