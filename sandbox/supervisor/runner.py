"""The sandbox's supervisor: starting, watching and stopping the local stand-ins, the
functions and the services (``accelops sandbox`` is :mod:`sandbox.supervisor.cli`; where
each serves is :mod:`sandbox.supervisor.endpoints`).

Each stand-in (Kubernetes API, Pub/Sub), each function (functions-framework) and
each service (gunicorn, as in its image) runs as its own process bound to 127.0.0.1,
so a test can stop one — the Kubernetes API, say — and start it again on the same
port while the rest keep running. Everything the sandbox knows lives under one state
directory: ``state.json`` (processes, ports), ``kubeconfig``, ``config.yaml``, ``env``,
``logs/`` and the ID token issuer's key (``id-tokens/``). ``up`` returns once every
endpoint answers; ``down`` stops what ``state.json`` lists. The cluster is provisioned
as a first deployment must be (:mod:`sandbox.supervisor.provision`): Kueue and JobSet first, a
bounded wait until their webhooks answer (what it waits for, and how long it took,
is printed), then the overlay.

Every start-up wait is :mod:`sandbox.common.startup`'s: a part is waited for while its process
runs (with a progress line every few seconds), one that exits fails the start at once
with its log's tail, and the one deadline (``--start-timeout``, else
``$ACCELOPS_SANDBOX_START_TIMEOUT``, else ten minutes) names the setting to raise.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sandbox.cluster.locust import LOADGEN_IMAGE
from sandbox.common.httpserver import free_port, port_open
from sandbox.common.logtail import log_tail
from sandbox.common.startup import Observed, StartupError, resolve_start_timeout, wait_for_parts
from sandbox.monitoring.prometheus import PrometheusNotInstalledError, find_prometheus
from sandbox.pubsub.emulator import (
    STANDIN_DESCRIPTION,
    EmulatorNotInstalledError,
    backend_described,
    backend_from_env,
    describe_emulator,
    emulator_command,
    find_emulator,
)
from sandbox.storage import FakeGcs
from sandbox.supervisor.endpoints import Component, Endpoints
from sandbox.supervisor.provision import (
    KubectlError,
    provision_kubernetes,
    provision_loadgen_pool,
    provision_pubsub,
    provision_serving,
)
from sandbox.topology import (
    ALL_PARTS,
    CLUSTER,
    FUNCTIONS,
    LOCATION,
    MODELS_BUCKET,
    PARTS,
    PROJECT,
    PULL_SUBSCRIPTIONS,
    SCHEDULES,
    SERVICES,
    STORAGE_NOTIFICATIONS,
    UNSCHEDULABLE_TOPIC,
    FunctionSpec,
    ServiceSpec,
)
from shared.config import load_config
from shared.deployment.locust import LocustSite
from shared.errors import AccelopsError
from shared.metrics.schema import apply_schema

__all__ = ["Sandbox", "SandboxError", "session", "state_dir_from"]

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "config.yaml"
DEFAULT_STATE_DIR = Path(".sandbox")
# Simulated seconds per real second: a scheduler minute passes every real second.
DEFAULT_SPEED = 60.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SandboxError(AccelopsError):
    """The sandbox could not start or is not running; the message says what to do."""


class Sandbox(Endpoints):
    """A running (or to-be-started) sandbox rooted at one state directory."""

    def __init__(self, state_dir: Path, config: Path = DEFAULT_CONFIG,
                 speed: float = DEFAULT_SPEED, parts: Iterable[str] = ALL_PARTS,
                 pubsub: str | None = None, start_timeout: float | None = None) -> None:
        """``pubsub``: "standin" or "emulator" (Google's); None means
        ``$ACCELOPS_SANDBOX_PUBSUB``, else the stand-in. ``start_timeout``: how long
        each start-up wait may last, in seconds; None means
        ``$ACCELOPS_SANDBOX_START_TIMEOUT``, else ten minutes (:mod:`sandbox.common.startup`)."""
        self.state_dir = state_dir.resolve()
        try:
            self.pubsub = backend_from_env(pubsub)
            self.start_timeout = resolve_start_timeout(start_timeout)
        except ValueError as exc:
            raise SandboxError(str(exc)) from exc
        self.config_source = config
        self.speed = speed
        self.parts = frozenset(parts)
        unknown = self.parts - PARTS.keys()
        if unknown:
            raise SandboxError(f"unknown sandbox part(s) {sorted(unknown)}; "
                               f"known: {sorted(PARTS)}")
        self.components: dict[str, Component] = {}

    @property
    def functions(self) -> list[FunctionSpec]:
        """The functions this sandbox runs (those of its parts)."""
        return [spec for spec in FUNCTIONS if spec.part in self.parts]

    @property
    def services(self) -> list[ServiceSpec]:
        """The Cloud Run services this sandbox runs (those of its parts)."""
        return [spec for spec in SERVICES if spec.part in self.parts]

    # -- lifecycle ---------------------------------------------------------------------
    def start(self, *, progress: bool = True) -> Sandbox:
        """Start every component, wait until each answers, then create topics,
        subscriptions, namespaces and queues. Raises SandboxError on failure (and
        stops whatever it started)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / "logs").mkdir(exist_ok=True)
        existing = self.state_dir / "state.json"
        if existing.exists() and any(_alive(c.pid) for c in _load(existing).values()):
            raise SandboxError(f"a sandbox is already running from {self.state_dir}; "
                               "run `accelops sandbox down` first")
        shutil.copyfile(self.config_source, self.config)
        self._plan()
        if self.has("cluster"):
            # Written before any process starts, so whoever sees the port open finds it.
            self.access.write(self.kube_url, PROJECT, [
                *(spec.target for spec in self.functions), *(s.name for s in self.services)])
        started = time.monotonic()
        backends = [name for name in ("cluster", "idtokens", "bigquery", "inference",
                                      "monitoring") if self.has(name)]
        try:
            self._spawn(self.components["pubsub"])
            for name in backends:  # started together: each takes seconds to come up
                self._spawn(self.components[name])
            self._wait_ready(["pubsub"], progress=progress)
            with self.client_env():
                self._provision_pubsub(before_functions=True)
            # fake-gcs-server drops events for a topic that does not exist yet.
            for name in ("storage", "saxml"):
                if self.has(name):
                    self._spawn(self.components[name])
                    backends.append(name)
            self._wait_ready(backends, progress=progress)
            with self.client_env():
                if self.has("cluster"):
                    self._provision_kubernetes(progress=progress)
                if self.has("bigquery"):
                    self._provision_bigquery()
                if self.has("storage"):
                    self._provision_serving()
            for spec in self.functions:
                self._spawn(self.components[spec.target])
            for service in self.services:
                self._spawn(self.components[service.name])
            self._wait_ready([*(spec.target for spec in self.functions),
                              *(service.name for service in self.services)],
                             progress=progress)
            with self.client_env():
                self._provision_pubsub(before_functions=False)
        except BaseException:
            self.stop()
            raise
        self._save()
        (self.state_dir / "env").write_text(
            "".join(f"export {k}={v}\n" for k, v in self.env().items()))
        if progress:
            print(f"sandbox up in {time.monotonic() - started:.1f}s (state: {self.state_dir})")
        return self

    def _plan(self) -> None:
        python = sys.executable
        logs = self.state_dir / "logs"
        pubsub_port = free_port()
        self.components["pubsub"] = self._plan_pubsub(pubsub_port, str(logs / "pubsub.log"))
        wanted = {name for part in self.parts for name in PARTS[part]}
        storage_port = free_port() if "storage" in wanted else None
        if "cluster" in wanted:
            kube_port, gke_port = free_port(), free_port()
            self.components["cluster"] = Component(
                "cluster", kube_port,
                [python, "-m", "sandbox.cluster", "--kube-port", str(kube_port),
                 "--gke-port", str(gke_port), "--state-dir", str(self.state_dir),
                 "--speed", str(self.speed), "--project", PROJECT, "--location", LOCATION,
                 "--cluster", CLUSTER,
                 "--pubsub-host", f"127.0.0.1:{pubsub_port}",
                 "--unschedulable-topic", UNSCHEDULABLE_TOPIC, *self.access.server_args(),
                 *(f"--schedule={job.flag()}" for job in SCHEDULES),
                 *([f"--storage-url=http://127.0.0.1:{storage_port}"] if storage_port else []),
                 # The load generator's master and workers run where their records
                 # have somewhere to go (ingest_metrics, BigQuery): with the metrics part.
                 *(["--loadgen", "--max-processes", "7"] if self.loadgen else [])],
                str(logs / "cluster.log"), ports={"gke": gke_port})
        if "idtokens" in wanted:
            self.components["idtokens"] = Component(
                "idtokens", free_port(), [], str(logs / "idtokens.log"),
                about="the sandbox's ID token issuer")
            issuer = self.components["idtokens"]
            issuer.command = [python, "-m", "sandbox.idtokens", "--port", str(issuer.port),
                              "--directory", str(self.id_token_dir)]
        if storage_port is not None:
            self.components["storage"] = self._plan_storage(storage_port, pubsub_port,
                                                            str(logs / "storage.log"))
        if "saxml" in wanted:
            saxml_port = free_port()
            self.components["saxml"] = Component(
                "saxml", saxml_port,
                [python, "-m", "sandbox.inference.saxml_proxy", "--port", str(saxml_port)],
                str(logs / "saxml.log"),
                env={"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{storage_port}"}
                if storage_port else {})
        if "monitoring" in wanted:
            self.components["monitoring"] = self._plan_monitoring(
                free_port(), str(logs / "monitoring.log"))
        if "bigquery" in wanted:
            bq_port, bq_grpc_port = free_port(), free_port()
            # Persistent: load-test results outlive `sandbox down`, so runs can be compared.
            # bqemulator with its SELECT translations remembered (sandbox.bigquery_emulator).
            self.components["bigquery"] = Component(
                "bigquery", bq_port,
                [python, "-m", "sandbox.bigquery_emulator", "start",
                 "--rest-port", str(bq_port), "--grpc-port", str(bq_grpc_port),
                 "--project", PROJECT, "--persistent",
                 "--data-dir", str(self.state_dir / "bigquery"), "--log-level", "warning"],
                str(logs / "bigquery.log"), ports={"grpc": bq_grpc_port})
            (self.state_dir / "bigquery").mkdir(exist_ok=True)
        if "inference" in wanted:
            triton_port, saxml_port = free_port(), free_port()
            self.components["inference"] = Component(
                "inference", triton_port,
                [python, "-m", "sandbox.inference", "--triton-http-port", str(triton_port),
                 "--saxml-port", str(saxml_port),
                 # Its own deadline is the sandbox's: the wait here gives up as it does.
                 "--startup-timeout", f"{self.start_timeout:g}"],
                str(logs / "inference.log"), ports={"saxml": saxml_port})
        for spec in self.functions:
            port = free_port()
            self.components[spec.target] = Component(
                spec.target, port,
                [python, "-m", "functions_framework", "--target", spec.target,
                 "--source", str(REPO / "functions" / "main.py"),
                 "--signature-type", "cloudevent", "--host", "127.0.0.1", "--port", str(port)],
                str(logs / f"{spec.target}.log"),
                env=self.function_env(spec.target))
        for service in self.services:
            port = free_port()
            self.components[service.name] = Component(
                service.name, port,
                [python, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", "1",
                 "--threads", "8", "--timeout", "0",
                 # Its default control socket is one path per user: sandboxes side by
                 # side would take it from each other.
                 "--no-control-socket", service.wsgi_app],
                str(logs / f"{service.name}.log"))
        # Once every port is known: a service's environment names its own URL.
        for service in self.services:
            self.components[service.name].env = self.service_env(service.name)

    def _plan_storage(self, port: int, pubsub_port: int, log: str) -> Component:
        """fake-gcs-server, publishing the models bucket's finalize notifications to
        deploy_model's topic as a Cloud Storage notification configuration would."""
        topic, prefix, _ = STORAGE_NOTIFICATIONS[0]
        gcs = FakeGcs(port, Path(log), PROJECT, topic, MODELS_BUCKET,
                      pubsub_host=f"127.0.0.1:{pubsub_port}", object_prefix=prefix,
                      events=("finalize",))
        return Component("storage", port, gcs.command(), log,
                         env={"PUBSUB_EMULATOR_HOST": f"127.0.0.1:{pubsub_port}"},
                         about="fake-gcs-server")

    def _plan_monitoring(self, port: int, log: str) -> Component:
        """Prometheus scraping the cluster's pods as managed collection would
        (sandbox/monitoring); refused at once when Debian's prometheus is missing."""
        try:
            binary = find_prometheus()
        except PrometheusNotInstalledError as exc:
            raise SandboxError(str(exc)) from exc
        return Component(
            "monitoring", port,
            [sys.executable, "-m", "sandbox.monitoring", "--port", str(port),
             "--directory", str(self.state_dir / "prometheus"),
             "--kubeconfig", str(self.kubeconfig), "--project", PROJECT,
             "--location", LOCATION, "--cluster", CLUSTER],
            log, about=f"Prometheus ({binary})")

    def _plan_pubsub(self, port: int, log: str) -> Component:
        """The stand-in (topics and subscriptions kept in a state file across restarts)
        or Google's emulator (in memory): either way a gRPC endpoint on ``port``."""
        if self.pubsub == "emulator":
            try:
                launcher = find_emulator()
            except EmulatorNotInstalledError as exc:
                raise SandboxError(str(exc)) from exc
            return Component("pubsub", port, emulator_command(launcher, port), log,
                             about=describe_emulator(launcher))
        return Component("pubsub", port,
                         [sys.executable, "-m", "sandbox.pubsub", "--port", str(port),
                          "--state-file", str(self.state_dir / "pubsub-state.json")],
                         log, about=STANDIN_DESCRIPTION)

    def _spawn(self, component: Component) -> None:
        env = {**os.environ, **component.env, "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                            os.environ.get("PYTHONPATH")]))}
        with open(component.log, "ab") as log:
            process = subprocess.Popen(  # noqa: S603 - our own interpreter and modules
                component.command, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=env, cwd=str(REPO), start_new_session=True)
        component.pid = process.pid
        self._save()

    def _wait_ready(self, names: list[str], *, progress: bool = False) -> None:
        """Wait until every one of ``names`` answers on all its ports, for as long as
        they keep running (:mod:`sandbox.common.startup`); SandboxError when one exits first,
        or at the start-up deadline."""
        try:
            wait_for_parts(names, self._observe, timeout=self.start_timeout,
                           progress=_printer("  ") if progress else None)
        except StartupError as exc:
            raise SandboxError(str(exc)) from exc

    def _observe(self, names: Sequence[str]) -> list[Observed]:
        seen = []
        for name in names:
            component = self.components[name]
            ready = all(port_open(port) for port in [component.port,
                                                     *component.ports.values()])
            running = ready or (_alive(component.pid) and not _exited(component.pid))
            seen.append(Observed(name, ready, running, component.log,
                                 "" if running else _tail(component.log)))
        return seen

    def restart(self, name: str) -> None:
        """Stop one component and start it again on the same port (state survives)."""
        self.stop_component(name)
        self._spawn(self.components[name])
        self._wait_ready([name])

    def stop_component(self, name: str, timeout: float = 10.0) -> None:
        component = self.components[name]
        _terminate_all([component.pid], timeout)
        deadline = time.monotonic() + timeout
        while any(port_open(p) for p in [component.port, *component.ports.values()]) and (
                time.monotonic() < deadline):
            time.sleep(0.05)

    def stop(self) -> None:
        # In tiers, each stopped at once (a process takes up to a second to wind down,
        # and there are a dozen): functions and services first, so nothing is
        # mid-request when its backends go away; then the backends; Pub/Sub last,
        # which the backends publish to.
        serving = {spec.target for spec in FUNCTIONS} | {service.name for service in SERVICES}
        names = list(self.components)
        tiers = ([n for n in names if n in serving],
                 [n for n in names if n not in serving and n != "pubsub"],
                 [n for n in names if n == "pubsub"])
        for tier in tiers:
            _terminate_all([self.components[n].pid for n in tier if self.components[n].pid],
                           10.0)
        state = self.state_dir / "state.json"
        if state.exists():
            state.unlink()

    def _save(self) -> None:
        (self.state_dir / "state.json").write_text(json.dumps(
            {name: asdict(c) for name, c in self.components.items()}, indent=2))

    @classmethod
    def attach(cls, state_dir: Path) -> Sandbox:
        """The sandbox running from state_dir; SandboxError when there is none."""
        state = state_dir.resolve() / "state.json"
        if not state.exists():
            raise SandboxError(f"no sandbox is running from {state_dir.resolve()}")
        components = _load(state)
        parts = {part for part, names in PARTS.items() if all(n in components for n in names)}
        pubsub = components.get("pubsub")
        sandbox = cls(state_dir, parts=parts,
                      pubsub=None if pubsub is None else _pubsub_backend(pubsub))
        sandbox.components = components
        return sandbox

    def status(self) -> list[tuple[str, int, bool, str]]:
        rows = []
        for name, component in self.components.items():
            up = _alive(component.pid) and port_open(component.port)
            rows.append((name, component.pid, up, f"127.0.0.1:{component.port}"))
        return rows

    # -- provisioning ----------------------------------------------------------------
    @property
    def loadgen(self) -> bool:
        """Whether the load generator's pods run here (a cluster and the metrics part)."""
        return "metrics" in self.parts and "cluster" in {
            name for part in self.parts for name in PARTS[part]}

    def _provision_kubernetes(self, *, progress: bool) -> None:
        """The controllers, a wait for their webhooks, then the overlay
        (sandbox/supervisor/provision.py), with the load generator and its node pool
        when it runs here; SandboxError when the webhooks never answer."""
        try:
            if self.loadgen:
                provision_loadgen_pool(self.gke_url)
            provision_kubernetes(self.config, self.kubeconfig, self.state_dir / "manifests",
                                 controllers_dir=self.state_dir / "controllers",
                                 timeout=self.start_timeout,
                                 progress=_printer("  ") if progress else _quiet,
                                 locust=LocustSite(LOADGEN_IMAGE) if self.loadgen else None)
        except KubectlError as exc:
            raise SandboxError(str(exc)) from exc

    def _provision_pubsub(self, *, before_functions: bool) -> None:
        provision_pubsub(PROJECT, self.functions, PULL_SUBSCRIPTIONS,
                         push_endpoints=None if before_functions else {
                             spec.target: self.function_url(spec.target)
                             for spec in self.functions})

    def _provision_serving(self) -> None:
        provision_serving(self.storage_url, MODELS_BUCKET, self.gke_url)

    def _provision_bigquery(self) -> None:
        apply_schema(PROJECT, load_config(str(self.config)).metrics)


@contextlib.contextmanager
def session(state_dir: Path, parts: Iterable[str], *, progress: bool = True,
            ) -> Iterator[Sandbox]:
    """The sandbox running from state_dir if it has ``parts``, else one started with
    just those parts for the duration of the block (and stopped after it).

    State directories persist: BigQuery data written in one session is there in the
    next. Raises SandboxError when a running sandbox lacks a part.
    """
    wanted = frozenset(parts)
    running: Sandbox | None = None
    with contextlib.suppress(SandboxError):
        running = Sandbox.attach(state_dir)
    if running is not None and all(up for _, _, up, _ in running.status()):
        if not wanted <= running.parts:
            missing = sorted(wanted - running.parts)
            raise SandboxError(f"the sandbox running from {running.state_dir} has no {missing} "
                               "part; stop it with `accelops sandbox down` and retry")
        yield running
        return
    if running is not None:
        running.stop()  # a stale or half-dead sandbox: clear it before starting afresh
    if progress:
        print(f"starting the sandbox ({', '.join(sorted(wanted))}) in {state_dir.resolve()} ...",
              flush=True)
    sandbox = Sandbox(state_dir, parts=wanted).start(progress=progress)
    try:
        yield sandbox
    finally:
        sandbox.stop()
        if progress:
            print("sandbox stopped", flush=True)


def _pubsub_backend(component: Component) -> str:
    """Which Pub/Sub a started component is (a state file from before the choice
    existed has no ``about``: it ran the stand-in)."""
    return backend_described(component.about)


def _load(path: Path) -> dict[str, Component]:
    raw: dict[str, Any] = json.loads(path.read_text())
    return {name: Component(**value) for name, value in raw.items()}


def _exited(pid: int) -> bool:
    """Reap the child if it has exited (processes we spawned ourselves)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == pid


def _terminate_all(pids: list[int], timeout: float) -> None:
    """SIGTERM each process group at once, wait until all have exited (one deadline
    for all), then SIGKILL whichever has not."""
    pending = [pid for pid in pids if pid and _alive(pid)]
    for pid in pending:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        pending = [pid for pid in pending if not (_exited(pid) or not _alive(pid))]
        if pending:
            time.sleep(0.05)
    for pid in pending:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def _tail(path: str, lines: int = 20) -> str:
    return log_tail(path, lines)


def _printer(indent: str) -> Callable[[str], None]:
    """Progress lines on stdout, flushed (``sandbox up`` may be piped to a log)."""
    def show(message: str) -> None:
        print(f"{indent}{message}", flush=True)
    return show


def _quiet(message: str) -> None:
    return None


def state_dir_from(option: str | None) -> Path:
    """The sandbox directory a command means: its --state-dir, else
    ``$ACCELOPS_SANDBOX_DIR``, else ``.sandbox``."""
    return Path(option or os.environ.get("ACCELOPS_SANDBOX_DIR") or DEFAULT_STATE_DIR)
