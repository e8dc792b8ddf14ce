"""Real Locust processes for the load generator's pods (``locust-master``, ``locust-worker``).

The deployment definition renders the load generator for GKE
(``shared/deployment/locust.py``): the image's entry point is ``locust -f
/app/services/loadgen/locustfile.py`` (``services/loadgen/Dockerfile``) and the
containers' ``args`` make one pod the master (``--master --master-bind-port 5557
--web-port 8089``) and the others workers (``--worker --master-host locust-master
--master-port 5557``). :class:`LocustLauncher` runs such a container as this
interpreter's ``python -m locust -f services/loadgen/locustfile.py`` with the same
arguments, translated for this machine:

* **Ports.** There is no pod network: the master binds its two ports on 127.0.0.1 at
  the host ports the process kubelet gave the containerPorts 5557 and 8089
  (``--master-bind-host``, ``--web-host`` added), where its readiness probe, the
  Service's proxy and the API server's ``services/proxy`` reach it.
* **The master's address.** On a cluster ``--master-host locust-master`` is resolved
  by cluster DNS to the Service, and kube-proxy carries the workers' ZeroMQ
  connection (plain TCP) to the master pod. The sandbox's Service proxies speak HTTP
  only, so the launcher resolves the name itself, as DNS plus kube-proxy would end
  up: the Service of that name in the pod's namespace (``NAME``, ``NAME.NS``,
  ``NAME.NS.svc``, ``NAME.NS.svc.cluster.local``), its port ``--master-port``, the
  ``targetPort`` on a pod it selects, that pod's host port. The worker gets
  ``--master-host 127.0.0.1 --master-port HOSTPORT``. A master pod not admitted yet
  is a launch failure (``RunContainerError``; the kubelet retries with back-off), as
  a worker on a cluster fails and restarts until the Service resolves. A master
  replaced later listens elsewhere: its workers lose it and, once Locust gives up
  on its heartbeats, exit and are restarted against the new one.
* **Environment.** The container's literal ``env`` (``GOOGLE_CLOUD_PROJECT``,
  ``LOADGEN_SERVER``, ...), plus ``PUBSUB_EMULATOR_HOST`` (the sandbox's Pub/Sub, where
  the workers publish their records as the ``locust`` identity would on GKE),
  ``PYTHONPATH`` (this checkout: the image's ``/app``) and the host's ``PATH``.

Refused, with the reason as the container's waiting message: a ``command`` (the
image's entry point is what runs), arguments outside what the definition renders
(other bind addresses, other locustfiles), a port argument without its
containerPort, ``valueFrom`` environment, and names the launcher sets itself.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sandbox.cluster.containers import SubprocessContainer
from sandbox.cluster.objects import PODS, SERVICES, deleting, labels_of, namespace_of
from sandbox.cluster.services import host_ports_of
from sandbox.kubeapi import ObjectStore

__all__ = ["LOADGEN_IMAGE", "LOADGEN_IMAGE_KEY", "LocustLauncher", "locust_arguments",
           "master_address"]

REPO = Path(__file__).resolve().parents[2]
LOCUSTFILE = REPO / "services" / "loadgen" / "locustfile.py"
# Matches the image Terraform builds (REGION-docker.pkg.dev/PROJECT/accelops/loadgen)
# and the one the sandbox renders.
LOADGEN_IMAGE_KEY = "accelops/loadgen"
LOADGEN_IMAGE = f"localhost/{LOADGEN_IMAGE_KEY}:sandbox"

# Flags of the rendered containers, with whether each takes a value.
_FLAGS = {"--master": False, "--worker": False, "--master-bind-port": True,
          "--web-port": True, "--master-host": True, "--master-port": True,
          "--expect-workers": True, "--loglevel": True, "-L": True}
_OWNED_ENV = re.compile(r"^(PUBSUB_EMULATOR_HOST|PYTHONPATH|PATH|LD_PRELOAD|LD_LIBRARY_PATH)$")
_DNS_SUFFIXES = (".svc.cluster.local", ".svc")

# (pod namespace, --master-host, --master-port) -> the master's host port
MasterAddress = Callable[[str, str, int], int]


def _parse(args: Sequence[str]) -> list[tuple[str, str | None]]:
    parsed: list[tuple[str, str | None]] = []
    items = list(args)
    while items:
        flag = items.pop(0)
        name, eq, inline = flag.partition("=")
        if name not in _FLAGS:
            raise ValueError(f"locust argument {flag!r} is not one the load generator's "
                             "Deployments use; the sandbox runs only those")
        if not _FLAGS[name]:
            parsed.append((name, None))
        elif eq:
            parsed.append((name, inline))
        elif items:
            parsed.append((name, items.pop(0)))
        else:
            raise ValueError(f"locust argument {name} needs a value")
    return parsed


def _port(value: str | None, flag: str) -> int:
    if value is None or not value.isdigit():
        raise ValueError(f"{flag} {value!r} is not a port number")
    return int(value)


def locust_arguments(container: Mapping[str, Any], ports: Mapping[int, int],
                     namespace: str, master_address: MasterAddress) -> list[str]:
    """Locust's arguments for this machine (see the module docstring); ValueError for a
    container that does not fit."""
    if container.get("command"):
        raise ValueError("the load generator's image runs its entry point (locust -f "
                         "services/loadgen/locustfile.py); a command cannot be run here")
    parsed = _parse([str(arg) for arg in container.get("args") or []])
    flags = {name for name, _ in parsed}
    if ("--master" in flags) == ("--worker" in flags):
        raise ValueError("a load generator pod is --master or --worker, exactly one")
    out: list[str] = []
    values = dict(parsed)
    for name, value in parsed:
        if name in ("--master-bind-port", "--web-port"):
            port = _port(value, name)
            if port not in ports:
                raise ValueError(f"{name} {port} is not a containerPort of the container")
            out += [name, str(ports[port])]
        elif name in ("--master-host", "--master-port"):
            continue
        else:
            out += [name] if value is None else [name, value]
    if "--master" in flags:
        # Locust's defaults, where the arguments leave them out, need their ports too.
        for flag, default in (("--master-bind-port", 5557), ("--web-port", 8089)):
            if flag not in flags:
                if default not in ports:
                    raise ValueError(f"{flag} {default} (Locust's default) is not a "
                                     "containerPort of the container")
                out += [flag, str(ports[default])]
        return [*out, "--master-bind-host", "127.0.0.1", "--web-host", "127.0.0.1"]
    host = values.get("--master-host")
    if not host:
        raise ValueError("a worker needs --master-host (the master's Service)")
    port = _port(values.get("--master-port") or "5557", "--master-port")
    return [*out, "--master-host", "127.0.0.1", "--master-port",
            str(master_address(namespace, host, port))]


def master_address(store: ObjectStore) -> MasterAddress:
    """Resolve a worker's ``--master-host``/``--master-port`` to the master pod's host
    port, through the Service as cluster DNS and kube-proxy would."""

    def resolve(namespace: str, host: str, port: int) -> int:
        name = host
        for suffix in _DNS_SUFFIXES:
            name = name.removesuffix(suffix)
        name, _, service_namespace = name.partition(".")
        service_namespace = service_namespace or namespace
        service = store.try_get(*SERVICES, name, service_namespace)
        if service is None:
            raise ValueError(f"--master-host {host}: no Service {name} in namespace "
                             f"{service_namespace}")
        spec = service.get("spec") or {}
        entry = next((p for p in spec.get("ports") or [] if int(p.get("port") or 0) == port),
                     None)
        if entry is None:
            raise ValueError(f"--master-port {port}: Service {name} has no such port")
        target = entry.get("targetPort", port)
        selector: Mapping[str, str] = spec.get("selector") or {}
        for pod in store.list(*PODS, namespace=service_namespace):
            if deleting(pod) or namespace_of(pod) != service_namespace \
                    or not selector or any(labels_of(pod).get(k) != v
                                           for k, v in selector.items()):
                continue
            number = target if isinstance(target, int) else _named(pod, str(target))
            found = host_ports_of(pod).get(number) if number is not None else None
            if found is not None:
                return found
        raise ValueError(f"Service {name} selects no master pod with port {target} yet")

    return resolve


def _named(pod: Mapping[str, Any], name: str) -> int | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == name:
                return int(port["containerPort"])
    return None


def _environment(container: Mapping[str, Any], pubsub_host: str) -> dict[str, str]:
    env = {name: os.environ[name] for name in ("LANG", "LC_ALL", "TZ", "HOME")
           if name in os.environ}
    for entry in container.get("env") or []:
        name = str(entry.get("name") or "")
        if _OWNED_ENV.match(name):
            raise ValueError(f"environment variable {name} is set by the sandbox")
        if "value" not in entry:
            raise ValueError(f"environment variable {name}: only literal values run here")
        env[name] = str(entry.get("value") or "")
    env.update({"PUBSUB_EMULATOR_HOST": pubsub_host, "PYTHONPATH": str(REPO),
                "PATH": os.environ.get("PATH", os.defpath), "PYTHONUNBUFFERED": "1"})
    return env


class LocustLauncher:
    """Starts a load generator pod's container as a Locust process (module docstring);
    logs go to one file per pod container under ``log_dir``."""

    def __init__(self, store: ObjectStore, log_dir: Path, pubsub_host: str) -> None:
        self.log_dir = log_dir
        self.pubsub_host = pubsub_host
        self._master_address = master_address(store)

    def __call__(self, pod: Mapping[str, Any], container: Mapping[str, Any],
                 ports: Mapping[int, int]) -> SubprocessContainer:
        meta = pod.get("metadata") or {}
        arguments = locust_arguments(container, ports, str(meta.get("namespace") or ""),
                                     self._master_address)
        env = _environment(container, self.pubsub_host)
        log = self.log_dir / (f"{meta.get('namespace', '')}_{meta.get('name', '')}_"
                              f"{container.get('name', '')}.log")
        argv = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), *arguments]
        return SubprocessContainer(argv, log, env=env, cwd=REPO)
