"""Assemble broker, gRPC server, push dispatcher and state file into one server.

``start_pubsub`` is the entry point used by tests, the demo and
``python -m sandbox.pubsub``. The gRPC server runs each RPC on its own daemon
thread (instead of a fixed pool): a subscriber's StreamingPull holds its thread
for the life of the stream, so a fixed pool could starve unary calls, and
daemon threads never keep an interpreter alive if a caller forgets ``stop()``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent import futures
from typing import ParamSpec, TypeVar

import grpc

from sandbox.pubsub.broker import Broker
from sandbox.pubsub.push import DEFAULT_CONCURRENCY, PushDispatcher
from sandbox.pubsub.server import PublisherService, SubscriberService
from sandbox.pubsub.state import StateFile

P = ParamSpec("P")
T = TypeVar("T")


class _DaemonThreadExecutor(futures.Executor):
    """Runs every submitted call on a fresh daemon thread."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._shutdown = False

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> futures.Future[T]:
        if self._shutdown:
            raise RuntimeError("cannot schedule new calls after shutdown")
        future: futures.Future[T] = futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=run, name=self._name, daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._shutdown = True


class PubSubServer:
    """A running sandbox Pub/Sub: ``address`` is what PUBSUB_EMULATOR_HOST should hold."""

    def __init__(
        self,
        broker: Broker,
        server: grpc.Server,
        host: str,
        port: int,
        dispatcher: PushDispatcher,
    ) -> None:
        self.broker = broker
        self.host = host
        self.port = port
        self._server = server
        self._dispatcher = dispatcher
        self._stopped = threading.Event()

    @property
    def address(self) -> str:
        """``host:port`` for ``PUBSUB_EMULATOR_HOST``."""
        return f"{self.host}:{self.port}"

    def stop(self, grace: float = 1.0) -> None:
        """Stop push delivery and the gRPC server; open streams end. Idempotent."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._dispatcher.stop()
        self.broker.close()
        self._server.stop(grace).wait(grace + 5.0)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until ``stop()`` has been called; returns whether it was."""
        return self._stopped.wait(timeout)

    def __enter__(self) -> PubSubServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# Well above Pub/Sub's 10 MiB request limit, so that the handlers see an oversized
# publish and refuse it with the service's INVALID_ARGUMENT (which clients do not
# retry) instead of gRPC's RESOURCE_EXHAUSTED (which they retry until their deadline);
# beyond this, gRPC refuses a request before reading it, which bounds memory.
MAX_RECEIVE_BYTES = 32 * 1024 * 1024


def start_pubsub(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    state_file: str | os.PathLike[str] | None = None,
    broker: Broker | None = None,
    push_concurrency: int = DEFAULT_CONCURRENCY,
    pull_wait_seconds: float = 5.0,
) -> PubSubServer:
    """Start a sandbox Pub/Sub on ``host:port`` (port 0 picks a free one).

    ``state_file`` persists topics and subscriptions across restarts;
    ``broker`` lets a caller share a pre-built broker; ``push_concurrency``
    bounds in-flight pushes per subscription; ``pull_wait_seconds`` is how long
    a non-immediate Pull waits for a first message.
    """
    broker = broker or Broker()
    if state_file is not None:
        state = StateFile(state_file, broker)
        state.load()
        state.attach()
    server = grpc.server(
        _DaemonThreadExecutor("pubsub-rpc"),
        # Pub/Sub takes publish requests of up to 10 MB; gRPC's default is 4 MiB. Pull
        # responses carry up to 1,000 messages, so sending is not capped at all.
        options=[("grpc.so_reuseport", 0),
                 ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
                 ("grpc.max_send_message_length", -1)],
    )
    server.add_generic_rpc_handlers(
        (
            PublisherService(broker).handler(),
            SubscriberService(broker, pull_wait_seconds=pull_wait_seconds).handler(),
        )
    )
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError as exc:
        raise OSError(f"cannot bind the sandbox Pub/Sub to {host}:{port}: {exc}") from exc
    if bound == 0:
        raise OSError(f"cannot bind the sandbox Pub/Sub to {host}:{port}")
    server.start()
    dispatcher = PushDispatcher(broker, concurrency=push_concurrency)
    dispatcher.start()
    return PubSubServer(broker, server, host, bound, dispatcher)
