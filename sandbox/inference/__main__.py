"""``python -m sandbox.inference``: a real inference target for load tests.

    python -m sandbox.inference --triton-http-port P --saxml-port Q
        [--triton-grpc-port G] [--model toy-lm] [--saxml-model /sax/test/toy ...]
        [--ms-per-token 1.0] [--saxml-load-seconds 1.0] [--startup-timeout 600]
        [--log-file PATH] [--verbose]

Serves the toy LM two ways: a real tritonserver (KServe v2 HTTP on P, gRPC on
G; ``--model`` for ``/infer`` and ``--model``-stream for ``generate_stream``, see
``sandbox.inference.triton`` for the request shapes) and a Saxml HTTP proxy
stand-in on Q serving the ``--saxml-model`` paths (repeatable; see
``sandbox.inference.saxml``). Models published later through the proxy's
``/publish`` become servable ``--saxml-load-seconds`` after it (see
``sandbox.inference.saxml_admin`` for when a checkpoint fails to load; the
process's ``STORAGE_EMULATOR_HOST`` is where ``gs://`` checkpoints are read). A
port of 0 picks a free one. Everything binds 127.0.0.1.

Readiness: Q is bound at once (so a clash fails fast) but refuses connections
until Triton reports both models ready (``/v2/models/NAME/ready`` = 200, which
trails ``/v2/health/ready``). A supervisor that waits for both ports to accept
connections therefore knows the whole target is up. The same moment, stdout
gets (flushed)::

    triton http://127.0.0.1:P
    triton-grpc 127.0.0.1:G
    saxml http://127.0.0.1:Q

Startup is bounded by ``--startup-timeout`` (default: the sandbox's start-up
deadline, ``sandbox/common/startup.py``; ``accelops sandbox up`` passes its own): past it
the process exits 1 with the tail of tritonserver's log on stderr and the setting
to raise. While it waits, a line a few seconds apart on stderr says so, so a slow
start (a busy machine) reads as progress in the log, not as a hang. SIGTERM or
SIGINT, during startup or after, stops both servers and exits 0.

During startup the main thread is inside pytriton, which polls the server
through gevent, so a signal or the deadline there raises an exception derived
from ``SystemExit``: pytriton catches only ``Exception``, and gevent's hub
passes ``SystemExit`` on to the waiting code without printing it (it prints a
``KeyboardInterrupt`` before passing it on, and drops ordinary exceptions
raised while it runs). tritonserver is started from the main thread because pytriton arms
``PR_SET_PDEATHSIG`` on it, which would kill the server as soon as a
short-lived starter thread exited.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from sandbox.common.httpserver import free_port
from sandbox.common.startup import DEFAULT_START_TIMEOUT, raise_hint
from sandbox.inference.saxml import DEFAULT_MODELS, SaxmlApi, SaxmlHttpServer, check_model_path
from sandbox.inference.triton import DEFAULT_MAX_BATCH_SIZE, MODEL_NAME_PATTERN, ToyLmTriton

log = logging.getLogger("sandbox.inference")

DEFAULT_STARTUP_TIMEOUT = DEFAULT_START_TIMEOUT


class _StartupInterrupted(SystemExit):
    """Raised in the main thread to abandon startup (signal or deadline)."""


class _Signals:
    """SIGTERM/SIGINT and the startup deadline, as the main thread sees them."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.timed_out = False
        self._starting = False

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        signal.signal(signal.SIGALRM, self._on_deadline)

    @contextlib.contextmanager
    def starting(self, timeout: float) -> Iterator[None]:
        """While inside, a signal or the deadline raises ``_StartupInterrupted``."""
        self._starting = True
        signal.setitimer(signal.ITIMER_REAL, max(timeout, 0.001))
        try:
            yield
        finally:
            self._starting = False
            signal.setitimer(signal.ITIMER_REAL, 0)

    def _on_stop(self, signum: int, _frame: FrameType | None) -> None:
        log.info("signal %s: stopping", signum)
        self.stopping.set()
        self._interrupt_startup()

    def _on_deadline(self, _signum: int, _frame: FrameType | None) -> None:
        if self._starting:
            self.timed_out = True
        self._interrupt_startup()

    def _interrupt_startup(self) -> None:
        if self._starting:
            # Only once: a second signal must not interrupt the cleanup.
            self._starting = False
            raise _StartupInterrupted


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Bind the way servers do (SO_REUSEADDR): a port in TIME_WAIT is free to reuse.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _model_name(value: str) -> str:
    if not MODEL_NAME_PATTERN.match(value):
        raise argparse.ArgumentTypeError("letters, digits, '.', '_' and '-' only")
    return value


def _saxml_model(value: str) -> str:
    try:
        return check_model_path(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise argparse.ArgumentTypeError("a number of seconds, 0 or more")
    return seconds


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sandbox.inference",
        description="Serve a toy LM through a real Triton server and a Saxml proxy stand-in.",
    )
    parser.add_argument("--triton-http-port", type=int, required=True,
                        help="Triton HTTP port (0 picks a free one)")
    parser.add_argument("--saxml-port", type=int, required=True,
                        help="Saxml proxy stand-in port (0 picks a free one)")
    parser.add_argument("--triton-grpc-port", type=int, default=0,
                        help="Triton gRPC port (default: a free one)")
    parser.add_argument("--model", type=_model_name, default="toy-lm",
                        help="Triton model name (default toy-lm; streamed as NAME-stream)")
    parser.add_argument("--saxml-model", type=_saxml_model, action="append", default=None,
                        metavar="PATH",
                        help="a model path the Saxml proxy serves, repeatable "
                             f"(default {' '.join(DEFAULT_MODELS)}); others get HTTP 400")
    parser.add_argument("--ms-per-token", type=float, default=1.0,
                        help="simulated decode time per generated token (default 1.0)")
    parser.add_argument("--saxml-load-seconds", type=_seconds, default=1.0,
                        help="real seconds a model published through the Saxml proxy takes "
                             "to load (default 1.0)")
    parser.add_argument("--max-batch-size", type=int, default=DEFAULT_MAX_BATCH_SIZE,
                        help=f"Triton dynamic batch limit (default {DEFAULT_MAX_BATCH_SIZE})")
    parser.add_argument("--startup-timeout", type=float, default=DEFAULT_STARTUP_TIMEOUT,
                        help="seconds to wait for the model to be ready "
                             f"(default {DEFAULT_STARTUP_TIMEOUT:g})")
    parser.add_argument("--log-file", type=Path, default=None,
                        help="keep tritonserver's log here (default: a temporary file)")
    parser.add_argument("--verbose", "-v", action="store_true", help="debug logging")
    return parser


def _fail(message: str, triton: ToyLmTriton) -> int:
    tail = triton.log_tail()
    print(f"sandbox.inference: {message}", file=sys.stderr, flush=True)
    if tail:
        print(f"tritonserver log ({triton.log_file}), last lines:\n{tail}",
              file=sys.stderr, flush=True)
    return 1


def _serve(triton: ToyLmTriton, saxml: SaxmlHttpServer, signals: _Signals,
           startup_timeout: float) -> int:
    started = time.monotonic()
    try:
        with signals.starting(startup_timeout):
            triton.start()
            remaining = startup_timeout - (time.monotonic() - started)
            ready = triton.wait_until_ready(max(remaining, 0.0), progress=lambda waited: log.info(
                "waiting for models %r and %r to be ready (%.0f s)", triton.model_name,
                triton.stream_model_name, time.monotonic() - started))
    except _StartupInterrupted:
        if not signals.timed_out:
            return 0
        ready = False
    except Exception as error:
        log.debug("startup failed", exc_info=True)
        return _fail(f"Triton failed to start: {error}", triton)
    if not ready and not signals.timed_out and not triton.is_alive():
        return _fail(f"tritonserver exited during start-up after "
                     f"{time.monotonic() - started:.0f} s", triton)
    if not ready:
        return _fail(f"models {triton.model_name!r} and {triton.stream_model_name!r} were "
                     f"not ready within {startup_timeout:g} s (--startup-timeout); "
                     f"{raise_hint(startup_timeout)}", triton)

    saxml.listen()
    log.info("ready in %.1f s", time.monotonic() - started)
    print(f"triton {triton.http_url}", flush=True)
    print(f"triton-grpc {triton.grpc_address}", flush=True)
    print(f"saxml {saxml.url}", flush=True)

    while not signals.stopping.wait(0.5):
        # A group-wide SIGTERM reaches tritonserver too; give our own handler a
        # moment to record it before calling the server's exit a failure.
        if not triton.is_alive() and not signals.stopping.wait(2.0):
            return _fail("tritonserver exited unexpectedly", triton)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:
        logging.getLogger("pytriton").setLevel(logging.WARNING)
    signals = _Signals()
    signals.install()

    http_port = args.triton_http_port or free_port()
    grpc_port = args.triton_grpc_port or free_port()
    for flag, port in (("--triton-http-port", http_port), ("--triton-grpc-port", grpc_port)):
        if _port_in_use(port):
            print(f"sandbox.inference: {flag} {port} is in use", file=sys.stderr, flush=True)
            return 2
    try:
        saxml = SaxmlHttpServer(args.saxml_port, SaxmlApi(
            ms_per_token=args.ms_per_token, load_seconds=args.saxml_load_seconds,
            models=frozenset(args.saxml_model or DEFAULT_MODELS)))
    except OSError as error:
        print(f"sandbox.inference: --saxml-port {args.saxml_port}: {error}",
              file=sys.stderr, flush=True)
        return 2

    with tempfile.TemporaryDirectory(prefix="accelops-inference-") as scratch:
        triton = ToyLmTriton(
            model_name=args.model, http_port=http_port, grpc_port=grpc_port,
            ms_per_token=args.ms_per_token, max_batch_size=args.max_batch_size,
            workspace=Path(scratch) / "workspace",
            log_file=args.log_file or Path(scratch) / "tritonserver.log",
        )
        try:
            return _serve(triton, saxml, signals, args.startup_timeout)
        finally:
            saxml.close()
            triton.stop()


if __name__ == "__main__":
    sys.exit(main())
