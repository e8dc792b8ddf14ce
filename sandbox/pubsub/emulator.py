"""Which Pub/Sub the sandbox runs: the accelops stand-in or Google's emulator.

The stand-in (this package) is the default: it follows Google's documentation where
the emulator departs from it (filters, ``deliveryAttempt`` in push bodies, 202 acks,
retry backoff, publish limits). Google's Java emulator is the reference the
stand-in is held to by ``tests/e2e/test_pubsub_contract.py``, and the sandbox can
run on it instead (``accelops sandbox up --pubsub emulator`` or
``ACCELOPS_SANDBOX_PUBSUB=emulator``) to check that nothing depends on the stand-in.

This module only finds and describes the emulator (no gRPC import): the sandbox
runner and the tests start it as a process. It ships with the Cloud SDK under
``platform/pubsub-emulator``; the SDK root comes from ``gcloud info`` when gcloud
is on PATH, else from the usual install locations.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Literal

__all__ = [
    "BACKENDS",
    "EMULATOR_DESCRIPTION",
    "ENV_VAR",
    "INSTALL_HINT",
    "STANDIN_DESCRIPTION",
    "Backend",
    "EmulatorNotInstalledError",
    "backend_described",
    "backend_from_env",
    "describe_emulator",
    "emulator_command",
    "find_emulator",
]

Backend = Literal["standin", "emulator"]
BACKENDS: tuple[Backend, ...] = ("standin", "emulator")
#: Environment variable naming the default backend of ``accelops sandbox up``.
ENV_VAR = "ACCELOPS_SANDBOX_PUBSUB"
INSTALL_HINT = "gcloud components install pubsub-emulator"
STANDIN_DESCRIPTION = "accelops stand-in"
EMULATOR_DESCRIPTION = "Google Pub/Sub emulator"

_LAUNCHER = Path("platform", "pubsub-emulator", "bin", "cloud-pubsub-emulator")
# Where the Cloud SDK lives when installed from Debian/RPM packages or the archive.
_KNOWN_SDK_ROOTS = (
    Path("/usr/lib/google-cloud-sdk"),
    Path("/usr/share/google-cloud-sdk"),
    Path("/opt/google-cloud-sdk"),
    Path.home() / "google-cloud-sdk",
)
_JAR_VERSION = re.compile(r"cloud-pubsub-emulator-(\d[\w.\-]*?)(?:-all)?\.jar")
_GCLOUD_INFO_SECONDS = 30.0


class EmulatorNotInstalledError(RuntimeError):
    """Google's Pub/Sub emulator cannot be found; the message says how to install it."""


def backend_from_env(value: str | None = None) -> Backend:
    """The backend ``value`` names, else ``$ACCELOPS_SANDBOX_PUBSUB``, else the stand-in.

    Raises ValueError naming the accepted values when it names neither.
    """
    chosen = (value if value is not None else os.environ.get(ENV_VAR, "")).strip().lower()
    if not chosen:
        return "standin"
    if chosen not in BACKENDS:
        source = "--pubsub" if value is not None else ENV_VAR
        raise ValueError(f"{source} must be one of {', '.join(BACKENDS)}, not {chosen!r}")
    return chosen


def _sdk_roots() -> list[Path]:
    roots: list[Path] = []
    if shutil.which("gcloud") is not None:
        try:
            answer = subprocess.run(
                ["gcloud", "info", "--format=value(installation.sdk_root)"],  # noqa: S607
                capture_output=True, text=True, timeout=_GCLOUD_INFO_SECONDS, check=False,
            ).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            answer = ""
        if answer:
            roots.append(Path(answer))
    roots.extend(root for root in _KNOWN_SDK_ROOTS if root not in roots)
    return roots


def find_emulator() -> Path:
    """The ``cloud-pubsub-emulator`` launcher of the installed Cloud SDK.

    Raises EmulatorNotInstalledError (saying ``gcloud components install
    pubsub-emulator``) when no SDK root has one.
    """
    for root in _sdk_roots():
        launcher = root / _LAUNCHER
        if launcher.is_file() and os.access(launcher, os.X_OK):
            return launcher
    raise EmulatorNotInstalledError(
        "Google's Pub/Sub emulator is not installed (looked for "
        f"<Cloud SDK>/{_LAUNCHER}); install it with `{INSTALL_HINT}` "
        "(apt: google-cloud-cli-pubsub-emulator) or use the stand-in (--pubsub standin)"
    )


def emulator_command(launcher: Path, port: int, host: str = "127.0.0.1") -> list[str]:
    """The argv that serves Google's emulator on ``host:port`` (in memory, nothing saved)."""
    return [str(launcher), f"--host={host}", f"--port={port}"]


def describe_emulator(launcher: Path) -> str:
    """``Google Pub/Sub emulator 0.8.20`` (the version comes from the bundled jar's name)."""
    for jar in sorted((launcher.parent.parent / "lib").glob("cloud-pubsub-emulator-*.jar")):
        match = _JAR_VERSION.fullmatch(jar.name)
        if match:
            return f"{EMULATOR_DESCRIPTION} {match.group(1)}"
    return EMULATOR_DESCRIPTION


def backend_described(description: str) -> Backend:
    """The backend a ``describe_emulator``/``STANDIN_DESCRIPTION`` text names
    (an empty one is the stand-in: sandboxes started before there was a choice)."""
    return "emulator" if description.startswith(EMULATOR_DESCRIPTION) else "standin"
