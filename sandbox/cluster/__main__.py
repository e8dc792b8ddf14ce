"""``python -m sandbox.cluster``: one process hosting a whole simulated GKE cluster.

It runs the SimClock, the sandbox Kubernetes API (state ``D/kube-state.json``),
the sandbox GKE API (state ``D/gke-state.json``, holding the cluster whose
endpoint is the Kubernetes API's URL) and the :class:`Simulation` of the
cluster's controllers; prints the URLs, serves until SIGTERM/SIGINT and saves
both states. Simulated time is saved too (``D/clock.json``): a restarted cluster
resumes where it stopped, as if it had been paused, so saved timestamps and
due times stay in the past and future they were in.

The cluster has what GKE gives every cluster: the PodMonitoring CRD of managed
collection is installed at start. Kueue and JobSet are not: they come with their
release manifests (the sandbox runner applies its stand-in of
``manifests/controllers``), and their controller managers turn ready
``--controller-start-seconds`` simulated seconds after their Deployments are
created (default 5, their readiness probes' initial delay); until then their
webhooks refuse what they intercept (:mod:`sandbox.cluster.managers`).

With ``--pubsub-host`` every newly unschedulable pod is published to
``--unschedulable-topic`` as the Cloud Logging entry a log sink would deliver.
Each ``--schedule`` is a Cloud Scheduler job fired on the simulated clock at the
times of a unix-cron schedule in an IANA time zone (:mod:`sandbox.cloud_scheduler.service`)::

    --schedule='slices-reconcile|* * * * *|Etc/UTC|trigger=schedule'
    --schedule='slices-reconcile|0 19 * * 1-5|Europe/Berlin|mode=cleanup-only'

(``TOPIC|CRON|TIME_ZONE[|KEY=VALUE,...[|DATA]]``; the sandbox runner passes the
deployment definition's jobs this way).

With ``--storage-url`` (the Cloud Storage endpoint Triton reads ``gs://`` model
repositories from) pods whose image contains ``tritonserver`` run a real
``tritonserver`` process (:class:`sandbox.inference.tritonserver.TritonLauncher`,
logs under ``D/containers``); at most ``--max-processes`` such processes run at
once and ``--pod-time-scale`` sets how fast their readiness probes, back-off,
preStop sleeps and grace periods run.
With ``--loadgen`` (and ``--pubsub-host``) the load generator's pods (image
``accelops/loadgen``: ``locust-master``, ``locust-worker``) run as real Locust
processes publishing their records there (:mod:`sandbox.cluster.locust`).
Services selecting them are served on loopback ports published in each
Service's ``sandbox.accelops.dev/host-ports`` annotation (and, for LoadBalancer
Services, ``status.loadBalancer.ingress``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from sandbox.cloud_scheduler.service import CloudScheduler, ScheduledJob
from sandbox.cluster.containers import Launcher
from sandbox.cluster.locust import LOADGEN_IMAGE_KEY, LocustLauncher
from sandbox.cluster.logsink import PubSubSink
from sandbox.cluster.managers import DEFAULT_START_SECONDS
from sandbox.cluster.nodes import ClusterRef
from sandbox.cluster.objects import Obj, timestamp
from sandbox.cluster.services import pod_address
from sandbox.cluster.simulation import Simulation
from sandbox.common.clock import SimClock
from sandbox.gke import GkeState, start_gke_api
from sandbox.kubeapi import ObjectStore, install_crds, start_kube_api
from sandbox.kubeapi.crdfiles import gke_crd_files
from sandbox.kubeapi.tls import ServingCertificate

log = logging.getLogger("sandbox.cluster")


def schedule_flag(value: str) -> ScheduledJob:
    try:
        return ScheduledJob.from_flag(value)
    except ValueError as exc:  # argparse reports ArgumentTypeError's message as is
        raise argparse.ArgumentTypeError(str(exc)) from exc


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sandbox.cluster",
        description="Serve a simulated GKE cluster: Kubernetes API, GKE API, controllers.")
    parser.add_argument("--kube-port", type=int, default=0, help="Kubernetes API port (0: any)")
    parser.add_argument("--gke-port", type=int, default=0, help="GKE API port (0: any)")
    parser.add_argument("--state-dir", required=True, help="directory for the state files")
    parser.add_argument("--speed", type=float, default=1.0,
                        help="simulated seconds per real second")
    parser.add_argument("--project", required=True)
    parser.add_argument("--location", required=True)
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--kubeconfig", help="write a kubeconfig for the Kubernetes API here")
    parser.add_argument("--token-auth-file",
                        help="token,user,uid,groups CSV: authenticate and authorize (RBAC)")
    parser.add_argument("--access-log", help="one JSON line per Kubernetes API request")
    parser.add_argument("--tls-cert", help="PEM certificate to serve HTTPS with (with --tls-key)")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert")
    parser.add_argument("--pubsub-host", help="host:port of the (sandbox) Pub/Sub endpoint")
    parser.add_argument("--unschedulable-topic",
                        help="topic receiving FailedScheduling log entries")
    parser.add_argument("--schedule", action="append", default=[], type=schedule_flag,
                        metavar="'TOPIC|CRON|TIME_ZONE[|KEY=VALUE,...[|DATA]]'",
                        help="a Cloud Scheduler job: publish DATA (default {}) with the "
                             "attributes to TOPIC at the times of the 5-field unix-cron "
                             "CRON in the IANA TIME_ZONE, on the simulated clock; "
                             "needs --pubsub-host; repeatable")
    parser.add_argument("--storage-url",
                        help="Cloud Storage endpoint URL: run tritonserver pods as real "
                             "processes reading their gs:// model repositories from it")
    parser.add_argument("--loadgen", action="store_true",
                        help="with --pubsub-host: run the load generator's Locust pods "
                             "(image accelops/loadgen) as real processes publishing there")
    parser.add_argument("--max-processes", type=int, default=3,
                        help="at most this many pod processes at once; pods beyond it wait "
                             "in ContainerCreating (default 3)")
    parser.add_argument("--pod-time-scale", type=float, default=0.2,
                        help="real seconds per second of a pod spec's readiness probe "
                             "timing, restart back-off, preStop sleeps and grace periods "
                             "(default 0.2)")
    parser.add_argument("--controller-start-seconds", type=float,
                        default=DEFAULT_START_SECONDS,
                        help="simulated seconds from the creation of the Kueue and JobSet "
                             "controller Deployments until their webhooks answer (default "
                             f"{DEFAULT_START_SECONDS:g}, their readiness probes' initial delay)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.controller_start_seconds < 0:
        parser.error("--controller-start-seconds must not be negative")
    if args.max_processes < 1:
        parser.error("--max-processes must be at least 1")
    if args.pod_time_scale <= 0:
        parser.error("--pod-time-scale must be positive")
    if args.schedule and not args.pubsub_host:
        parser.error("--schedule needs --pubsub-host")
    if args.pubsub_host and not args.unschedulable_topic:
        parser.error("--pubsub-host needs --unschedulable-topic")
    return args


def load_clock(path: Path, speed: float) -> SimClock:
    """A SimClock resuming at the saved simulated time (now, when nothing was saved)."""
    start: datetime | None = None
    if path.exists():
        try:
            start = datetime.fromtimestamp(float(json.loads(path.read_text())["time"]), UTC)
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring unreadable %s", path)
    return SimClock(speed=speed, start=start)


def save_clock(path: Path, clock: SimClock) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"time": clock.time(), "iso": clock.isoformat()}))
    os.replace(tmp, path)


def start_cloud_scheduler(clock: SimClock, project: str,
                          jobs: list[ScheduledJob]) -> CloudScheduler:
    """Cloud Scheduler jobs publishing to Pub/Sub on the simulated clock."""
    from google.cloud import pubsub_v1  # type: ignore[attr-defined,unused-ignore]

    publisher = pubsub_v1.PublisherClient()

    def publish(job: ScheduledJob) -> None:
        publisher.publish(publisher.topic_path(project, job.topic), job.data.encode(),
                          **job.attributes).result(timeout=10)

    return CloudScheduler(clock, jobs, publish).start()


def launchers(storage_url: str | None, log_dir: Path, *, store: ObjectStore | None = None,
              loadgen_pubsub: str | None = None) -> dict[str, Launcher]:
    """The container launchers the flags ask for: Triton with ``--storage-url``, the load
    generator's Locust with ``--loadgen`` (publishing to ``loadgen_pubsub``)."""
    found: dict[str, Launcher] = {}
    if store is not None and loadgen_pubsub:
        found[LOADGEN_IMAGE_KEY] = LocustLauncher(store, log_dir, loadgen_pubsub)
    if not storage_url:
        return found
    try:
        from sandbox.inference.tritonserver import TritonLauncher
    except ImportError as exc:
        log.warning("tritonserver pods stay simulated: no Triton launcher (%s)", exc)
        return found
    launcher: Launcher = TritonLauncher(storage_url, log_dir)
    return {**found, "tritonserver": launcher}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    state_dir = Path(args.state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    clock = load_clock(state_dir / "clock.json", args.speed)
    store = ObjectStore(clock=clock)
    cluster = ClusterRef(args.project, args.location, args.cluster)
    # A certificate from files survives restarts, so kubeconfigs written for it stay valid.
    certificate = (ServingCertificate(Path(args.tls_cert).read_bytes(),
                                      Path(args.tls_key).read_bytes())
                   if args.tls_cert and args.tls_key else None)
    kube = start_kube_api("127.0.0.1", args.kube_port, state_file=state_dir / "kube-state.json",
                          clock=clock, store=store, token_file=args.token_auth_file,
                          access_log=args.access_log, certificate=certificate,
                          pod_address=pod_address)
    install_crds(store, gke_crd_files())  # GKE's own, present in every cluster
    gke_state = GkeState(clock)
    gke_state.add_cluster(cluster.project, cluster.location, cluster.name, kube.url)
    gke = start_gke_api(gke_state, "127.0.0.1", args.gke_port,
                        state_file=state_dir / "gke-state.json")
    simulation = Simulation(store, clock, gke_state=gke_state, cluster=cluster.path,
                            launchers=launchers(
                                args.storage_url, state_dir / "containers", store=store,
                                loadgen_pubsub=args.pubsub_host if args.loadgen else None),
                            max_processes=args.max_processes,
                            pod_time_scale=args.pod_time_scale,
                            controller_start_seconds=args.controller_start_seconds)
    sink: PubSubSink | None = None
    scheduler: CloudScheduler | None = None
    try:
        if args.kubeconfig:
            kube.write_kubeconfig(args.kubeconfig)
        if args.pubsub_host:
            os.environ["PUBSUB_EMULATOR_HOST"] = args.pubsub_host
            sink = PubSubSink(cluster, args.unschedulable_topic)
            publish = sink.publish

            def on_unschedulable(pod: Obj, event: Obj) -> Any:
                return publish(event, timestamp(clock))

            simulation.on_unschedulable(on_unschedulable)
        if args.schedule:
            scheduler = start_cloud_scheduler(clock, cluster.project, args.schedule)
        simulation.start()
        print(f"kubernetes {kube.url}", flush=True)
        print(f"gke {gke.url}", flush=True)
        print(f"cluster {cluster.path}", flush=True)
        while not done.wait(0.5):
            pass
    finally:
        if scheduler is not None:
            scheduler.stop()
        simulation.stop()
        gke.stop()
        kube.stop()
        save_clock(state_dir / "clock.json", clock)
        if sink is not None:
            sink.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
