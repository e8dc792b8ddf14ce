"""``python -m sandbox.inference.saxml_proxy --port Q``: the Saxml HTTP proxy stand-in
alone, for the sandbox's serving part (model publishing) without a Triton beside it.

The proxy is the one ``sandbox.inference`` serves (see ``sandbox.inference.saxml``);
``STORAGE_EMULATOR_HOST`` is where ``gs://`` checkpoints are looked up. It binds
127.0.0.1 and stops on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import signal
import threading
from types import FrameType

from sandbox.inference.saxml import DEFAULT_MODELS, SaxmlApi, SaxmlHttpServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox.inference.saxml_proxy")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--load-seconds", type=float, default=1.0,
                        help="real seconds from /publish until a model serves (default: 1)")
    parser.add_argument("--ms-per-token", type=float, default=1.0)
    args = parser.parse_args(argv)
    stop = threading.Event()

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    server = SaxmlHttpServer(args.port, SaxmlApi(
        ms_per_token=args.ms_per_token, load_seconds=args.load_seconds,
        models=frozenset(DEFAULT_MODELS)))
    server.listen()
    print(f"saxml {server.url}", flush=True)
    try:
        stop.wait()
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
