"""A job request file and the team config, as ``accelops jobs render|submit`` read them."""

from __future__ import annotations

import argparse
from pathlib import Path

from shared.config import AccelopsConfig, load_config_from
from shared.errors import PermanentError
from shared.jobspec.request import JobRequest, read_job_request

__all__ = ["config_of", "read_request"]


def read_request(path: str, *, validate: bool = True) -> tuple[bytes, JobRequest | None]:
    """The file's bytes and the job request in it, checked exactly as ``submit_job``
    checks a message; PermanentError saying what is wrong."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise PermanentError(f"cannot read {path}: {exc.strerror}") from exc
    if not validate:
        return data, None
    try:
        return data, read_job_request(data)
    except PermanentError as exc:
        raise PermanentError(f"{path}: {exc.message}", field=exc.field,
                             rule=exc.rule) from exc


def config_of(args: argparse.Namespace) -> AccelopsConfig:
    """The config ``--config`` names, else ``$ACCELOPS_CONFIG``'s."""
    return load_config_from(args.config)
