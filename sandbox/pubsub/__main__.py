"""``python -m sandbox.pubsub --port P [--state-file F]``: serve until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from types import FrameType

from sandbox.pubsub.runtime import start_pubsub


def main(argv: list[str] | None = None) -> int:
    """Run the sandbox Pub/Sub in the foreground."""
    parser = argparse.ArgumentParser(prog="python -m sandbox.pubsub", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8085, help="port (0 = any free port)")
    parser.add_argument("--state-file", default=None, help="persist topics/subscriptions here")
    parser.add_argument("--verbose", "-v", action="store_true", help="debug logging")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    server = start_pubsub(args.host, args.port, state_file=args.state_file)

    def shutdown(signum: int, _frame: FrameType | None) -> None:
        logging.getLogger("sandbox.pubsub").info("signal %s: stopping", signum)
        server.stop()

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    # Machine-readable first line: tooling waits for it to know the port.
    print(f"PUBSUB_EMULATOR_HOST={server.address}", flush=True)
    while not server.wait(0.5):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
