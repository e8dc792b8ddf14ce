"""Container logs of simulated pods and the ``pods/{name}/log`` subresource that serves them.

On a real cluster the kubelet keeps each container's output and kube-apiserver
proxies ``GET /api/v1/namespaces/{ns}/pods/{name}/log`` to it as ``text/plain``.
Here the simulated pod runtime (:mod:`sandbox.cluster.runtime`) writes lines into a
:class:`PodLogs` held next to the object store, and :func:`read_pod_log` answers the
request the way kube-apiserver does for the parameters accelops and ``kubectl logs``
use: ``container`` (required when the pod has several), ``tailLines``, ``previous``
(the container's instance before its last restart), ``timestamps`` and ``limitBytes``.
Its refusals are kube-apiserver's words: 404 for a missing pod, 400 for an unknown
container, a container that has not started (``... is waiting to start:
ContainerCreating``) or no previous instance.

Lines are kept per pod uid, container and restart count, so a pod recreated under the
same name starts with an empty log, as on a real node; the runtime forgets the logs of
pods that are gone (:meth:`PodLogs.retain`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sandbox.kubeapi import field_errors as fe
from sandbox.kubeapi.errors import ApiError
from sandbox.kubeapi.validation import IS_NEGATIVE

__all__ = ["PodLogs", "read_pod_log"]

# Lines kept per container instance (the kubelet rotates logs; this bounds memory).
MAX_LINES = 5_000

_Key = tuple[str, str, int]  # pod uid, container, restart count


@dataclass(frozen=True, slots=True)
class _Line:
    at: str  # RFC 3339, as ``timestamps=true`` prints it
    text: str


class PodLogs:
    """Log lines of container instances, safe to write and read from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lines: dict[_Key, list[_Line]] = {}

    def write(self, uid: str, container: str, restart: int, at: str, text: str) -> None:
        """Append ``text`` (one or more lines) to the container instance's log."""
        with self._lock:
            lines = self._lines.setdefault((uid, container, restart), [])
            lines.extend(_Line(at, line) for line in text.splitlines() or [""])
            del lines[:-MAX_LINES]

    def has(self, uid: str, container: str, restart: int) -> bool:
        with self._lock:
            return (uid, container, restart) in self._lines

    def lines(self, uid: str, container: str, restart: int) -> list[tuple[str, str]]:
        """(timestamp, text) of each line of one container instance."""
        with self._lock:
            return [(line.at, line.text) for line in self._lines.get((uid, container,
                                                                        restart), [])]

    def retain(self, uids: Iterable[str]) -> None:
        """Forget the logs of every pod whose uid is not in ``uids``."""
        live = set(uids)
        with self._lock:
            for key in [k for k in self._lines if k[0] not in live]:
                del self._lines[key]


def _int(params: Mapping[str, str | None], name: str) -> int | None:
    value = params.get(name)
    if value in (None, ""):
        return None
    try:
        number = int(str(value))
    except ValueError:
        raise ApiError.bad_request(f"{name}: invalid value {value!r}: must be an integer") from None
    if number < 0:
        raise ApiError(422, "Invalid", str(fe.invalid(name, number, IS_NEGATIVE)))
    return number


def _container_status(pod: Mapping[str, Any], container: str) -> Mapping[str, Any]:
    for entry in (pod.get("status") or {}).get("containerStatuses") or []:
        if entry.get("name") == container:
            return dict(entry)
    return {}


def read_pod_log(logs: PodLogs, pod: Mapping[str, Any],
                 params: Mapping[str, str | None]) -> str:
    """The log text for ``GET .../pods/{name}/log`` with query ``params``; ApiError as
    kube-apiserver answers (see the module docstring)."""
    meta = pod.get("metadata") or {}
    name = str(meta.get("name", ""))
    containers = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
    container = params.get("container") or ""
    if not container:
        if len(containers) != 1:
            raise ApiError.bad_request(
                f"a container name must be specified for pod {name}, choose one of: "
                f"[{' '.join(containers)}]")
        container = containers[0]
    elif container not in containers:
        raise ApiError.bad_request(f"container {container} is not valid for pod {name}")
    status = _container_status(pod, container)
    restart = int(status.get("restartCount") or 0)
    previous = str(params.get("previous") or "").lower() in ("true", "1")
    uid = str(meta.get("uid", ""))
    if previous:
        if restart == 0 or not logs.has(uid, container, restart - 1):
            raise ApiError.bad_request(
                f'previous terminated container "{container}" in pod "{name}" not found')
        restart -= 1
    elif not logs.has(uid, container, restart):
        state = status.get("state") or {}
        waiting = (state.get("waiting") or {}).get("reason") or (
            "ContainerCreating" if not state.get("running") and not state.get("terminated")
            else None)
        if waiting:
            raise ApiError.bad_request(
                f'container "{container}" in pod "{name}" is waiting to start: {waiting}')
    lines = logs.lines(uid, container, restart)
    tail = _int(params, "tailLines")
    if tail is not None:
        lines = lines[-tail:] if tail else []
    stamped = str(params.get("timestamps") or "").lower() in ("true", "1")
    text = "".join(f"{at} {line}\n" if stamped else f"{line}\n" for at, line in lines)
    limit = _int(params, "limitBytes")
    if limit is not None:
        text = text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")
    return text
