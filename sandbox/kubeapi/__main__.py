"""``python -m sandbox.kubeapi``: serve the sandbox Kubernetes API until signalled.

For demos and for processes (CLI, functions emulator) that need a cluster
endpoint outside a test: prints the URL, optionally writes a kubeconfig, and
on SIGTERM/SIGINT stops and saves ``--state-file`` so the next run resumes.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from types import FrameType

from sandbox.kubeapi import start_kube_api
from sandbox.kubeapi.kubeconfig import DEFAULT_TOKEN


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sandbox.kubeapi", description="Serve the sandbox Kubernetes API."
    )
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    parser.add_argument("--port", type=int, default=0, help="port (0 picks a free one)")
    parser.add_argument("--state-file", help="JSON file loaded at start and saved at exit")
    parser.add_argument("--kubeconfig", help="write a kubeconfig for this server here")
    parser.add_argument(
        "--token-auth-file",
        help="CSV token,user,uid,\"group1,group2\" (as kube-apiserver's): authenticate "
        "bearer tokens and enforce RBAC; without it every request is allowed",
    )
    parser.add_argument(
        "--kubeconfig-token",
        default=DEFAULT_TOKEN,
        help="bearer token to put in --kubeconfig (default: the sandbox admin's)",
    )
    parser.add_argument(
        "--access-log", help="append one JSON line per request (identity, attributes, decision)"
    )
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )

    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    server = start_kube_api(
        args.host,
        args.port,
        state_file=args.state_file,
        token_file=args.token_auth_file,
        access_log=args.access_log,
    )
    try:
        if args.kubeconfig:
            server.write_kubeconfig(args.kubeconfig, token=args.kubeconfig_token)
        print(server.url, flush=True)
        while not done.wait(0.5):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
