"""What a Triton pod's container asks of ``tritonserver``, translated for this machine.

A pod made from the Deployment that ``deploy_model`` renders runs::

    tritonserver --model-repository=gs://BUCKET/releases/<deployment>/<release>
        --model-control-mode=explicit --load-model=<model> --strict-readiness=true
        --exit-on-error=true --exit-timeout-secs=30
        --http-port=8000 --grpc-port=8001 --metrics-port=8002
        --metrics-config=histogram_latencies=true ...

Before :mod:`sandbox.inference.tritonserver` runs that as a local process, the
container's command, arguments and environment are checked and rewritten here, with
no I/O, so what a container may ask of this machine is decided in one place.

**Arguments are translated, not passed through.** The semantic flags (repository,
model control, readiness, exit behaviour, logging) are kept after validation; the
ports are replaced by the host ports the caller chose, every endpoint binds
127.0.0.1, and the backend directory is the caller's. Anything else is refused with
ValueError rather than guessed at: flags naming paths inside the image
(``--log-file``, ``--cache-directory``, TLS certificates, traces) would read or
write this machine's filesystem; a local ``--model-repository`` would too, so only
``gs://`` repositories are served. GPU-only tuning flags are dropped (no GPU here).

**The environment** is the container's literal ``env`` entries; names that change how
the binary and its stub load, or where storage and credentials come from, belong to
the launcher and are refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["CONTAINER_PORTS", "container_env", "server_arguments"]

#: Triton's default container ports: HTTP, gRPC, metrics.
CONTAINER_PORTS: dict[str, int] = {"http": 8000, "grpc": 8001, "metrics": 8002}

_TRUE = frozenset({"true", "on", "1"})
_FALSE = frozenset({"false", "off", "0"})
_INT = re.compile(r"^-?[0-9]{1,9}$")
_NUMBER = re.compile(r"^[0-9]{1,9}(\.[0-9]{1,6})?$")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")
_OBJECT_PATH = re.compile(r"^[A-Za-z0-9_.\-/]{0,900}$")
_BACKEND_CONFIG = re.compile(r"^[A-Za-z0-9_-]{1,64},[A-Za-z0-9_.-]{1,64}=[A-Za-z0-9_.,:-]{0,256}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$")
# Names the launcher owns or that would change how the binary and its stub load.
_RESERVED_ENV = re.compile(
    r"^(LD_.*|PATH|PYTHON(HOME|PATH|STARTUP|USERBASE|EXECUTABLE|PLATLIBDIR|SAFEPATH)|HOME|"
    r"TMPDIR|CLOUD_STORAGE_EMULATOR_ENDPOINT|STORAGE_EMULATOR_HOST|"
    r"GOOGLE_APPLICATION_CREDENTIALS|GCE_METADATA_.*)$")


def _bool(flag: str, value: str) -> str:
    if value.lower() not in _TRUE | _FALSE:
        raise ValueError(f"--{flag} takes true or false, not {value!r}")
    return value.lower()


def _int(flag: str, value: str) -> str:
    if not _INT.match(value):
        raise ValueError(f"--{flag} takes an integer, not {value!r}")
    return value


def _number(flag: str, value: str) -> str:
    if not _NUMBER.match(value):
        raise ValueError(f"--{flag} takes a number, not {value!r}")
    return value


def _name(flag: str, value: str) -> str:
    if not _NAME.match(value):
        raise ValueError(f"--{flag} takes a name of [A-Za-z0-9_.-], not {value!r}")
    return value


def _model(flag: str, value: str) -> str:
    return value if value == "*" else _name(flag, value)


def _choice(*choices: str) -> Callable[[str, str], str]:
    def check(flag: str, value: str) -> str:
        if value not in choices:
            raise ValueError(f"--{flag} takes one of {', '.join(choices)}, not {value!r}")
        return value
    return check


def _backend_config(flag: str, value: str) -> str:
    if not _BACKEND_CONFIG.match(value):
        raise ValueError(f"--{flag} takes <backend>,<setting>=<value> without paths, "
                         f"not {value!r}")
    return value


_METRICS_CONFIG = re.compile(r"^[A-Za-z0-9_]{1,64}=[A-Za-z0-9_.,:-]{0,256}$")


def _metrics_config(flag: str, value: str) -> str:
    """``<setting>=<value>``, refused as tritonserver refuses it when the ``=`` is
    missing. Like the server, any setting name is taken (it reads only those it
    knows: counter_latencies, histogram_latencies, summary_latencies,
    summary_quantiles); values are plain words, numbers and lists of them."""
    if "=" not in value:
        raise ValueError(f"--metrics-config option format is <setting>=<value>. Got {value}")
    if not _METRICS_CONFIG.match(value):
        raise ValueError(f"--{flag} takes <setting>=<value> of [A-Za-z0-9_.,:-], "
                         f"not {value!r}")
    return value


def _repository(flag: str, value: str) -> str:
    if not value.startswith("gs://"):
        raise ValueError(
            f"--{flag}={value!r}: only gs:// model repositories can be served in the "
            "sandbox (a local path names a directory inside the container image)")
    bucket, _, path = value[len("gs://"):].partition("/")
    if not _BUCKET.match(bucket) or not _OBJECT_PATH.match(path) or ".." in path.split("/"):
        raise ValueError(f"--{flag}={value!r} is not a plain gs://bucket/path")
    return value


_KEEP: dict[str, Callable[[str, str], str]] = {
    "model-repository": _repository, "model-store": _repository,
    "model-control-mode": _choice("none", "poll", "explicit"), "load-model": _model,
    "strict-readiness": _bool, "exit-on-error": _bool, "strict-model-config": _bool,
    "exit-timeout-secs": _int, "repository-poll-secs": _int,
    "model-load-thread-count": _int, "model-load-retry-count": _int,
    "model-namespacing": _bool, "model-config-name": _name, "id": _name,
    "log-verbose": _int, "log-info": _bool, "log-warning": _bool, "log-error": _bool,
    "log-format": _choice("default", "ISO8601"),
    "allow-http": _bool, "allow-grpc": _bool, "allow-metrics": _bool,
    "allow-cpu-metrics": _bool, "allow-gpu-metrics": _bool, "metrics-interval-ms": _number,
    "metrics-config": _metrics_config,
    "http-thread-count": _int, "buffer-manager-thread-count": _int,
    "pinned-memory-pool-byte-size": _int, "rate-limit": _choice("off", "execution_count"),
    "backend-config": _backend_config,
}
_NO_VALUE = frozenset({"disable-auto-complete-config"})
_PORT_FLAGS = {"http-port": "http", "grpc-port": "grpc", "metrics-port": "metrics"}
_ADDRESS_FLAGS = frozenset({"http-address", "grpc-address", "metrics-address"})
_GPU_ONLY = frozenset({"cuda-memory-pool-byte-size", "min-supported-compute-capability",
                       "model-load-gpu-limit", "cuda-virtual-address-size",
                       "enable-peer-access"})
# Accepted only with the value that changes nothing (an extra endpoint or port sharing).
_ONLY_FALSE = frozenset({"allow-sagemaker", "allow-vertex-ai", "reuse-http-port",
                         "reuse-grpc-port", "grpc-use-ssl", "grpc-use-ssl-mutual"})
_REFUSED_WHY = {
    "backend-directory": "the sandbox supplies the backend directory",
    "repoagent-directory": "it names a directory inside the container image",
    "cache-directory": "it names a directory inside the container image",
    "cache-config": "the response cache is not available in the sandbox",
    "log-file": "the server's log is the pod's log",
    "trace-file": "it names a file inside the container",
    "trace-config": "tracing writes files inside the container",
    "grpc-server-cert": "it names a file inside the container image",
    "grpc-server-key": "it names a file inside the container image",
    "grpc-root-cert": "it names a file inside the container image",
}


def _options(argv: Sequence[str]) -> list[tuple[str, str | None]]:
    """``--flag=value`` / ``--flag value`` / ``--flag`` into (flag, value) pairs."""
    options: list[tuple[str, str | None]] = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        index += 1
        if not arg.startswith("--") or len(arg) < 3:
            raise ValueError(f"tritonserver argument {arg!r} is not a --flag")
        flag, equals, value = arg[2:].partition("=")
        if flag in _NO_VALUE:
            if equals:
                raise ValueError(f"--{flag} takes no value")
            options.append((flag, None))
            continue
        if not equals:
            if index >= len(argv):
                raise ValueError(f"--{flag} needs a value")
            value = argv[index]
            index += 1
        if any(ord(ch) < 32 for ch in value):
            raise ValueError(f"--{flag} has a control character in its value")
        options.append((flag, value))
    return options


def _container_argv(container: Mapping[str, Any]) -> list[str]:
    command = list(container.get("command") or [])
    args = list(container.get("args") or [])
    argv = [str(part) for part in command + args]
    if not argv or Path(argv[0]).name != "tritonserver":
        raise ValueError("the container must run tritonserver (command or args starting "
                         f"with it), not {argv[:1]!r}")
    return argv[1:]


def server_arguments(container: Mapping[str, Any], ports: Mapping[int, int], *,
                     backend_directory: Path) -> list[str]:
    """The flags to run the container's ``tritonserver`` with on this machine (pure).

    Raises ValueError naming the flag for anything that cannot be honoured safely,
    and for an enabled endpoint whose container port has no host port in ``ports``.
    """
    kept: list[str] = []
    container_port = dict(CONTAINER_PORTS)
    enabled = {"http": True, "grpc": True, "metrics": True}
    repositories = 0
    for flag, value in _options(_container_argv(container)):
        if value is None:
            kept.append(f"--{flag}")
        elif flag in _KEEP:
            checked = _KEEP[flag](flag, value)
            kept.append(f"--{flag}={checked}")
            repositories += flag in ("model-repository", "model-store")
            if flag.startswith("allow-") and flag[len("allow-"):] in enabled:
                enabled[flag[len("allow-"):]] = checked in _TRUE
        elif flag in _PORT_FLAGS:
            container_port[_PORT_FLAGS[flag]] = int(_int(flag, value))
        elif flag in _ADDRESS_FLAGS or flag in _GPU_ONLY:
            continue  # every endpoint binds 127.0.0.1; no GPU here
        elif flag in _ONLY_FALSE:
            if _bool(flag, value) not in _FALSE:
                raise ValueError(f"--{flag}={value} is not supported in the sandbox")
            kept.append(f"--{flag}=false")
        elif flag in _REFUSED_WHY:
            raise ValueError(f"--{flag} is not supported in the sandbox: {_REFUSED_WHY[flag]}")
        else:
            raise ValueError(f"tritonserver flag --{flag} is not supported in the sandbox")
    if repositories == 0:
        raise ValueError("tritonserver needs --model-repository")
    endpoints: list[str] = []
    for endpoint, on in enabled.items():
        if not on:
            continue
        port = container_port[endpoint]
        host_port = ports.get(port)
        if not isinstance(host_port, int) or not 0 < host_port < 65536:
            raise ValueError(f"no host port for container port {port} (--{endpoint}-port)")
        endpoints += [f"--{endpoint}-address=127.0.0.1", f"--{endpoint}-port={host_port}"]
    return [*kept, *endpoints, f"--backend-directory={backend_directory}"]


def container_env(container: Mapping[str, Any]) -> dict[str, str]:
    """The container's literal ``env`` entries (``valueFrom`` ones are the cluster's to
    resolve and are left out). Raises ValueError for names the launcher owns."""
    env: dict[str, str] = {}
    for entry in container.get("env") or []:
        name = entry.get("name")
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise ValueError(f"invalid environment variable name {name!r}")
        if _RESERVED_ENV.match(name):
            raise ValueError(f"environment variable {name} is set by the sandbox and "
                             "cannot be overridden by the container")
        if "value" in entry:
            value = str(entry.get("value") or "")
            if "\x00" in value:
                raise ValueError(f"environment variable {name} contains a NUL byte")
            env[name] = value
    return env
