"""A real Prometheus (Debian's ``prometheus`` package) for the sandbox.

The sandbox's stand-in for Managed Service for Prometheus is an actual Prometheus
server: it scrapes the real ``tritonserver`` processes of the simulated cluster and
answers the same HTTP query API (``/api/v1/query``) that GMP answers, so the queries
production sends are evaluated by the PromQL engine they were written for.

It runs bound to 127.0.0.1 with its TSDB under the sandbox's state directory (the
configuration beside it) and loads its scrape jobs from :mod:`sandbox.monitoring.
collection`: one job per PodMonitoring endpoint, each with ``file_sd_configs`` naming
the file of its targets. Prometheus watches those files itself (inotify), so a pod
that starts or stops changes the targets without a reload; a new or removed job
rewrites the configuration and reloads it (SIGHUP).

Debian's package installs a systemd unit (``prometheus.service``) that would serve on
``:9090`` with ``/var/lib/prometheus``: nothing here uses it. This process is started
by the sandbox with its own flags, port and directories, and is its child.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

from sandbox.monitoring.collection import ScrapeJob

__all__ = [
    "PROMETHEUS_BINARY",
    "PrometheusNotInstalledError",
    "config_text",
    "find_prometheus",
    "prometheus_command",
    "write_jobs",
]

PROMETHEUS_BINARY = "/usr/bin/prometheus"
_BINARY_ENV = "ACCELOPS_PROMETHEUS_BINARY"
INSTALL_HINT = ("install Debian's prometheus package: `make prometheus` (apt-get install -y "
                "--no-install-recommends prometheus, as root)")


class PrometheusNotInstalledError(RuntimeError):
    """The prometheus binary is missing; the message says how to install it."""


def find_prometheus() -> Path:
    """``$ACCELOPS_PROMETHEUS_BINARY``, else /usr/bin/prometheus, else prometheus on
    PATH. Raises PrometheusNotInstalledError."""
    for candidate in (os.environ.get(_BINARY_ENV), PROMETHEUS_BINARY, shutil.which("prometheus")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    raise PrometheusNotInstalledError(f"the sandbox's Prometheus needs {PROMETHEUS_BINARY}: "
                                      f"{INSTALL_HINT}")


def prometheus_command(binary: Path, port: int, directory: Path) -> list[str]:
    """Prometheus on 127.0.0.1:``port``, configuration and TSDB under ``directory``."""
    return [str(binary), f"--config.file={directory / 'prometheus.yml'}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=1d", "--log.level=warn"]


def config_text(jobs: Sequence[ScrapeJob], directory: Path) -> str:
    """The configuration for ``jobs`` (JSON, which is YAML): one scrape job each,
    its targets in a file_sd file under ``directory``."""
    scrape_configs = [{
        "job_name": job.name,
        "scrape_interval": job.interval,
        "scrape_timeout": job.timeout,
        "metrics_path": job.path,
        "scheme": "http",
        "file_sd_configs": [{"files": [str(directory / job.file_name)]}],
    } for job in jobs]
    return json.dumps({"global": {"evaluation_interval": "1m"},
                       "scrape_configs": scrape_configs}, indent=1)


def _write(path: Path, text: str) -> bool:
    """Atomically replace ``path`` when its content changes; whether it did."""
    if path.exists() and path.read_text() == text:
        return False
    staging = path.with_name(f".{path.name}.tmp")
    staging.write_text(text)
    staging.replace(path)
    return True


def write_jobs(jobs: Sequence[ScrapeJob], directory: Path,
               process: subprocess.Popen[bytes] | None) -> bool:
    """Write the targets of every job, then the configuration; reload ``process``
    (SIGHUP) when the set of jobs changed. Whether the configuration changed."""
    directory.mkdir(parents=True, exist_ok=True)
    for job in jobs:
        _write(directory / job.file_name, job.file_sd())
    changed = _write(directory / "prometheus.yml", config_text(jobs, directory))
    if changed and process is not None and process.poll() is None:
        process.send_signal(signal.SIGHUP)
    return changed
