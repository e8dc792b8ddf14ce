"""Real ``tritonserver`` processes for the Triton pods of the simulated cluster.

``TritonLauncher`` runs a Triton pod's container as a local process: the
``tritonserver`` binary and Python backend nvidia-pytriton ships (CPU), reading the
release from the sandbox's Cloud Storage, so a rollout is judged by a real server
loading the real files -- a broken upload really fails to load and the pod really
exits. The container's flags and environment are checked and translated for this
machine by :mod:`sandbox.inference.tritonargs`; this module prepares what the server
needs and owns the processes.

**Never without the storage endpoint.** Triton's GCS client ignores
STORAGE_EMULATOR_HOST; it reads ``CLOUD_STORAGE_EMULATOR_ENDPOINT``. Without it a
``gs://`` repository makes Triton look for Google credentials and hang at start, so
the launcher raises instead of starting it.

**The backend directory is prepared once** per working directory: the Python
backend (``libtriton_python.so``, ``triton_python_backend_utils.py``) and the stub
for this interpreter's version, copied (a few MB) into ``<work_dir>/_tritonserver``
under a name that carries the pytriton and Python versions, built beside it and
renamed into place so concurrent launchers (threads or processes) never see half a
copy. The binary itself runs from site-packages. The stub embeds Python: this
interpreter's ``LIBDIR`` goes on ``LD_LIBRARY_PATH`` (``prepare_stub_environment``) and
its ``bin`` first on ``PATH``, which is how the embedded interpreter finds this
environment's numpy.

**Lifetime.** Each server starts in a session of its own (its stubs share its
process group), so signals meant for the sandbox do not reach it and ``stop`` can
end the whole group. ``stop(grace)`` sends SIGTERM (Triton drains, then exits 0) and
SIGKILLs the group after ``grace``. To die with this process, every server is forked
by one long-lived thread of this module and exec'd through ``setpriv --pdeathsig
TERM`` where available: the kernel sends the signal when the *forking thread* dies,
so forking from a caller's short-lived thread (pytriton's way) would kill the server
as soon as that thread returned. A launcher that dies before setpriv asks for the
signal sends none, so a shell between setpriv and the server checks, after asking,
that its parent is still the launcher, and exits (143) if not. A normal interpreter
exit also stops every server still running (atexit). Only a server that had to be
killed (SIGKILL after the grace) leaves litter: its model download in
``/tmp/folderXXXXXX`` (hard-coded by Triton; TMPDIR is ignored) and the stub's
``/dev/shm/triton_python_backend_shm_region_*`` (1 MB).

**Exit codes** are reported as a container runtime does: a server ended by signal N
exits ``128 + N``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import Any, TypeVar

from sandbox.common.logtail import log_tail
from sandbox.inference.triton import prepare_stub_environment
from sandbox.inference.tritonargs import CONTAINER_PORTS, container_env, server_arguments

__all__ = [
    "CONTAINER_PORTS",
    "TritonLauncher",
    "TritonNotInstalledError",
    "TritonProcess",
    "prepare_backend_directory",
    "server_arguments",
]

T = TypeVar("T")

_STUB = "triton_python_backend_stub"
_WORK_SUBDIR = "_tritonserver"
_LOG_TAIL_BYTES = 256 * 1024
_KILL_WAIT_SECONDS = 10.0
_AT_EXIT_GRACE_SECONDS = 5.0

_HOST_ENV = ("LANG", "LC_ALL", "TZ")


class TritonNotInstalledError(RuntimeError):
    """nvidia-pytriton (which ships the binary) is missing or lacks a stub for this Python."""


# ------------------------------------------------------------------ the distribution
@dataclass(frozen=True)
class _Distribution:
    version: str
    server: Path  # bin/tritonserver
    backend: Path  # backends/python (without a stub)
    stub: Path  # for this interpreter's version
    libs: Path  # nvidia_pytriton.libs


@functools.cache
def _distribution() -> _Distribution:
    spec = find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise TritonNotInstalledError(
            "tritonserver needs nvidia-pytriton: pip install 'accelops[sandbox]'")
    package = Path(next(iter(spec.submodule_search_locations)))
    dist = package / "tritonserver"
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    found = _Distribution(
        version=metadata.version("nvidia-pytriton"),
        server=dist / "bin" / "tritonserver",
        backend=dist / "backends" / "python",
        stub=dist / "python_backend_stubs" / python / _STUB,
        libs=package.parent / "nvidia_pytriton.libs",
    )
    for path in (found.server, found.backend / "libtriton_python.so", found.stub, found.libs):
        if not path.exists():
            raise TritonNotInstalledError(f"nvidia-pytriton {found.version} has no {path} "
                                          f"(Python {python} may be unsupported)")
    return found


_prepared: dict[Path, Path] = {}
_prepare_lock = threading.Lock()


def _backend_path(work_dir: Path) -> Path:
    """Named by the pytriton and Python versions: an upgrade gets a fresh copy."""
    python = f"{sys.version_info.major}{sys.version_info.minor}"
    return (work_dir.resolve() / _WORK_SUBDIR
            / f"backends-{_distribution().version}-py{python}")


def prepare_backend_directory(work_dir: Path) -> Path:
    """The ``--backend-directory`` below ``work_dir``, made once and reused.

    Raises TritonNotInstalledError when nvidia-pytriton is missing, OSError when
    ``work_dir`` cannot be written.
    """
    dist = _distribution()
    target = _backend_path(work_dir)
    with _prepare_lock:
        if target in _prepared:
            return target
        if not (target / "python" / _STUB).is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".backends-", dir=target.parent))
            try:
                backend = staging / "python"
                backend.mkdir()
                for source in dist.backend.iterdir():
                    if source.is_file():
                        shutil.copy2(source, backend / source.name)
                shutil.copy2(dist.stub, backend / _STUB)
                try:
                    staging.rename(target)
                except OSError:
                    # Another process renamed its copy into place first.
                    if not (target / "python" / _STUB).is_file():
                        raise
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        _prepared[target] = target
        return target


# ------------------------------------------------------------------ process lifetime
class _Forker:
    """One daemon thread that lives as long as the interpreter and forks every server:
    a parent-death signal is tied to the forking thread (see the module docstring)."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = (
            queue.SimpleQueue())
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, work: Callable[[], T]) -> T:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="tritonserver-forker",
                                                daemon=True)
                self._thread.start()
        future: Future[T] = Future()
        self._requests.put((work, future))
        return future.result()

    def _loop(self) -> None:
        while True:
            work, future = self._requests.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(work())
            except BaseException as exc:  # handed to the caller, who re-raises it
                future.set_exception(exc)


_forker = _Forker()


# Run by the server's process between setpriv and tritonserver: a launcher that died
# before setpriv asked for the signal (a race a busy machine widens) sends none, and the
# server would outlive it; so the parent is checked after asking. 143 = 128 + SIGTERM,
# as if the signal had come.
_PARENT_GUARD = 'test "$PPID" = "$1" || exit 143; shift; exec "$@"'


@functools.cache
def _death_signal_prefix(parent: int) -> tuple[str, ...]:
    """``setpriv --pdeathsig TERM --`` and a shell that goes on only while ``parent`` (the
    launching process) is still its parent, when this util-linux supports it; else nothing."""
    setpriv, true, sh = shutil.which("setpriv"), shutil.which("true"), shutil.which("sh")
    if setpriv is None or true is None or sh is None:
        return ()
    prefix = (setpriv, "--pdeathsig", "TERM", "--", sh, "-c", _PARENT_GUARD, "sh", str(parent))
    try:
        probe = subprocess.run([*prefix[:4], true], capture_output=True,  # noqa: S603 - fixed argv
                               timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return ()
    return prefix if probe.returncode == 0 else ()


_running: set[TritonProcess] = set()
_running_lock = threading.Lock()


def _stop_all_at_exit() -> None:
    with _running_lock:
        processes = list(_running)
    for process in processes:
        process.terminate()
    give_up = time.monotonic() + _AT_EXIT_GRACE_SECONDS
    for process in processes:
        process.stop(max(0.0, give_up - time.monotonic()))


atexit.register(_stop_all_at_exit)


class TritonProcess:
    """One running ``tritonserver`` (a ContainerProcess for the cluster)."""

    def __init__(self, popen: subprocess.Popen[bytes], argv: Sequence[str], log_file: Path,
                 log_offset: int) -> None:
        self._popen = popen
        self.argv = list(argv)
        self.log_file = log_file
        self._log_offset = log_offset
        self._stop_lock = threading.Lock()

    @property
    def pid(self) -> int:
        return self._popen.pid

    def alive(self) -> bool:
        return self._popen.poll() is None

    def exit_code(self) -> int | None:
        """None while running; ``128 + N`` when ended by signal N."""
        code = self._popen.poll()
        if code is None:
            return None
        return 128 - code if code < 0 else code

    def wait(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` seconds for the exit; the exit code, or None."""
        try:
            self._popen.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            return None
        return self.exit_code()

    def terminate(self) -> None:
        """Send SIGTERM (Triton drains in-flight requests, then exits) and return."""
        if self._popen.poll() is None:
            self._popen.send_signal(signal.SIGTERM)

    def stop(self, grace_seconds: float) -> None:
        """SIGTERM, wait ``grace_seconds``, then SIGKILL the process group; idempotent."""
        with self._stop_lock:
            self.terminate()
            if self.wait(grace_seconds) is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._popen.pid, signal.SIGKILL)
                self._popen.wait(timeout=_KILL_WAIT_SECONDS)
        with _running_lock:
            _running.discard(self)

    def log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines this run wrote to the pod's log."""
        return log_tail(self.log_file, lines, offset=self._log_offset,
                        max_bytes=_LOG_TAIL_BYTES)


def _log_name(pod: Mapping[str, Any], container: Mapping[str, Any]) -> str:
    """A file name for the pod's container: sanitised, plus a hash of the exact names
    so two pods that sanitise alike never share a log."""
    meta = pod.get("metadata") or {}
    parts = [str(meta.get("namespace") or "default"), str(meta.get("name") or "pod"),
             str(container.get("name") or "container")]
    readable = re.sub(r"[^a-z0-9.-]+", "-", ".".join(parts).lower()).strip(".-")[:120]
    digest = hashlib.sha256("/".join(parts).encode("utf-8", "replace")).hexdigest()[:10]
    return f"{readable or 'pod'}-{digest}.log"


class TritonLauncher:
    """Starts a pod's ``tritonserver`` container as a local process.

    ``storage_url`` is the sandbox's Cloud Storage endpoint (``http://127.0.0.1:P``),
    None when there is none (then only non-``gs://`` repositories could be served, and
    those are refused: every launch raises). Logs go to one file per pod container
    under ``log_dir``; the backend directory is prepared under ``work_dir`` (default
    ``log_dir``).
    """

    def __init__(self, storage_url: str | None, log_dir: Path, *,
                 work_dir: Path | None = None) -> None:
        if storage_url is not None and not re.match(r"^https?://[^\s/]+$", storage_url):
            raise ValueError(f"storage_url must be http(s)://host:port, not {storage_url!r}")
        self.storage_url = storage_url
        self.log_dir = log_dir
        self.work_dir = work_dir or log_dir

    def arguments(self, container: Mapping[str, Any], ports: Mapping[int, int]) -> list[str]:
        """The translated flags (see ``server_arguments``); raises ValueError as
        ``__call__`` would, without starting anything."""
        flags = server_arguments(container, ports,
                                 backend_directory=_backend_path(self.work_dir))
        if self.storage_url is None and any(f.startswith(("--model-repository=gs://",
                                                          "--model-store=gs://"))
                                            for f in flags):
            raise ValueError("a gs:// model repository needs the sandbox's Cloud Storage "
                             "(storage_url): without CLOUD_STORAGE_EMULATOR_ENDPOINT "
                             "tritonserver looks for Google credentials and hangs")
        return flags

    def environment(self, container: Mapping[str, Any]) -> dict[str, str]:
        """The server's environment: the container's literal ``env``, the loader and
        stub paths, the storage endpoint; nothing else of this process's."""
        dist = _distribution()
        env = {name: os.environ[name] for name in _HOST_ENV if name in os.environ}
        env.update(container_env(container))
        env["PATH"] = os.pathsep.join([str(Path(sys.exec_prefix) / "bin"),
                                       os.environ.get("PATH", os.defpath)])
        env["LD_LIBRARY_PATH"] = str(dist.libs)
        prepare_stub_environment(env)
        if self.storage_url is not None:
            env["CLOUD_STORAGE_EMULATOR_ENDPOINT"] = self.storage_url
        return env

    def __call__(self, pod: Mapping[str, Any], container: Mapping[str, Any],
                 ports: Mapping[int, int]) -> TritonProcess:
        """Start the container's server and return at once (readiness is the caller's
        probe). Raises ValueError for a container it cannot run safely,
        TritonNotInstalledError without nvidia-pytriton, OSError when it cannot start."""
        flags = self.arguments(container, ports)
        env = self.environment(container)
        prepare_backend_directory(self.work_dir)
        argv = [str(_distribution().server), *flags]
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_file = self.log_dir / _log_name(pod, container)
        fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o644)
        try:
            offset = os.lseek(fd, 0, os.SEEK_END)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            os.write(fd, f"# {stamp} start: {shlex.join(argv)}\n".encode())
            prefix = _death_signal_prefix(os.getpid())  # the forking thread's process

            def spawn() -> subprocess.Popen[bytes]:
                return subprocess.Popen(  # noqa: S603 - argv validated by server_arguments
                    [*prefix, *argv], env=env, cwd=self.work_dir, stdin=subprocess.DEVNULL,
                    stdout=fd, stderr=subprocess.STDOUT, start_new_session=True)

            popen = _forker.run(spawn)
        finally:
            os.close(fd)
        process = TritonProcess(popen, argv, log_file, offset)
        with _running_lock:
            _running.add(process)
        return process
