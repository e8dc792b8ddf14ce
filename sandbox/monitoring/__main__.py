"""``python -m sandbox.monitoring``: managed collection and Prometheus for the sandbox.

    python -m sandbox.monitoring --port P --directory DIR --kubeconfig FILE
        --project ID --location L --cluster C [--poll-seconds 0.5]

Starts Prometheus on 127.0.0.1:P (its TSDB and configuration in DIR), then, every
``--poll-seconds``, lists PodMonitorings and pods through the Kubernetes API and
writes the scrape jobs and targets managed collection would give them
(:mod:`sandbox.monitoring.collection`). Exits 1 at once, saying how to install it,
when the prometheus binary is missing; exits with Prometheus' status if it ends.
SIGTERM stops Prometheus and exits 0.
"""

from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from sandbox.monitoring.collection import Site, scrape_jobs
from sandbox.monitoring.prometheus import (
    PrometheusNotInstalledError,
    find_prometheus,
    prometheus_command,
    write_jobs,
)
from shared.config import Settings
from shared.errors import AccelopsError
from shared.kube import POD_MONITORINGS, PODS, KubeClient, get_client

log = logging.getLogger("sandbox.monitoring")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sandbox.monitoring")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--directory", type=Path, required=True)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--project", required=True)
    parser.add_argument("--location", required=True)
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--poll-seconds", type=float, default=0.5)
    return parser


def _collect(client: KubeClient, site: Site, directory: Path,
             process: subprocess.Popen[bytes]) -> None:
    monitorings = client.list(POD_MONITORINGS)
    pods = client.list(PODS) if monitorings else []
    if write_jobs(scrape_jobs(monitorings, pods, site), directory, process):
        log.info("scrape jobs: %d PodMonitoring endpoint(s)", len(monitorings))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        binary = find_prometheus()
    except PrometheusNotInstalledError as exc:
        print(f"sandbox.monitoring: {exc}", file=sys.stderr, flush=True)
        return 1
    directory: Path = args.directory.resolve()
    site = Site(args.project, args.location, args.cluster)
    write_jobs([], directory, None)
    process = subprocess.Popen(  # noqa: S603 - a fixed binary and our own flags
        prometheus_command(binary, args.port, directory), stdin=subprocess.DEVNULL)
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    client = get_client(Settings.from_env({"KUBECONFIG": str(args.kubeconfig)}))
    try:
        while not stopping and process.poll() is None:
            try:
                _collect(client, site, directory, process)
            except AccelopsError as exc:  # the cluster is starting or restarting
                log.info("listing PodMonitorings and pods: %s", exc)
            time.sleep(args.poll_seconds)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    code = process.returncode
    return 0 if stopping else (code or 1)


if __name__ == "__main__":
    sys.exit(main())
