"""A tiny HTTP server that behaves like a model server's health and request surface.

Run as a script (``python echoserver.py --port P --version v2``): it imports only
the standard library, so it starts in a few tens of milliseconds, which keeps
tests of rollouts with real processes quick. Routes:

* ``GET /v2/health/live`` — 200 while the process runs (the KServe v2 path);
* ``GET /v2/health/ready`` — 200 once ``--ready-after`` seconds passed, else 503;
* ``GET|POST /echo`` — 200 ``{"version", "pid", "method", "path", "body"}``;
* ``GET /slow?seconds=S`` — answers after S seconds (a request in flight);
* ``GET /stream?events=N&interval=S`` — N server-sent events, S seconds apart;
* ``GET|POST /v2/models/<model>/...`` — the KServe v2 paths of a model, answered
  like ``/echo`` (``.../generate_stream`` like ``/stream``), so a Gateway route
  written for Triton can be exercised against it.

``--fail-at-start`` prints an error and exits 1 at once (a model that does not
load). SIGTERM stops accepting connections, lets requests in flight finish and
exits 0, as a server with a graceful shutdown does. Unknown arguments are
ignored, so a container may pass a real server's flags too.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from urllib.parse import parse_qs, urlsplit


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() waits for requests in flight
    block_on_close = True
    allow_reuse_address = True

    def __init__(self, port: int, version: str, ready_at: float) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.version = version
        self.ready_at = ready_at


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        return  # quiet: the log file keeps startup and error lines only

    def _send(self, code: int, payload: object) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _echo(self, body: str = "") -> dict[str, object]:
        return {"version": self.server.version, "pid": os.getpid(), "method": self.command,
                "path": self.path, "body": body}

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path == "/v2/health/live":
            self._send(200, {"live": True})
        elif url.path == "/v2/health/ready":
            ready = time.monotonic() >= self.server.ready_at
            self._send(200 if ready else 503, {"ready": ready})
        elif url.path == "/echo":
            self._send(200, self._echo())
        elif url.path == "/slow":
            time.sleep(float(query.get("seconds", ["1"])[0]))
            self._send(200, self._echo())
        elif url.path == "/stream" or self._model_stream(url.path):
            self._stream(int(query.get("events", ["3"])[0]),
                         float(query.get("interval", ["0.05"])[0]))
        elif url.path.startswith("/v2/models/"):
            self._send(200, self._echo())
        else:
            self._send(404, {"error": f"no route {url.path}"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode(errors="replace") if length else ""
        path = urlsplit(self.path).path
        if self._model_stream(path):
            self._stream(3, 0.05)
        elif path == "/echo" or path.startswith("/v2/models/"):
            self._send(200, self._echo(body))
        else:
            self._send(404, {"error": f"no route {self.path}"})

    @staticmethod
    def _model_stream(path: str) -> bool:
        return path.startswith("/v2/models/") and path.endswith("/generate_stream")

    def _stream(self, events: int, interval: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for index in range(events):
            event = {"index": index, "version": self.server.version}
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()
            time.sleep(interval)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A model-server-like echo server.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--version", default="v1")
    parser.add_argument("--ready-after", type=float, default=0.0)
    parser.add_argument("--fail-at-start", action="store_true")
    args, _ = parser.parse_known_args(argv)
    if args.fail_at_start:
        print(f"echo {args.version}: loading the model failed: version {args.version} "
              "is broken", file=sys.stderr, flush=True)
        return 1
    server = _Server(args.port, args.version, time.monotonic() + args.ready_after)
    stop = threading.Event()

    def on_term(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    serving.start()
    print(f"echo {args.version} listening on 127.0.0.1:{args.port}", flush=True)
    while not stop.wait(0.05):
        pass
    server.shutdown()
    serving.join()
    server.server_close()  # waits for requests in flight
    print(f"echo {args.version} stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
