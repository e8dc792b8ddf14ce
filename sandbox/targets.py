"""What ``accelops report``, ``doctor`` and ``deploy up`` do against the local sandbox.

``sandbox/commands.py`` adds these to the library's commands (their ``--state-dir``
and ``--sandbox`` options, and the BigQuery ``report`` reads when the environment
names none) and names them here, imported only when such a command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

from sandbox.supervisor.runner import Sandbox, session, state_dir_from
from sandbox.topology import FUNCTIONS, PROJECT
from shared.config import load_config
from shared.deployment.cli import repo_root
from shared.deployment.deploy_cli import run_plan, shown
from shared.deployment.doctor import Expectations, run
from shared.deployment.up import Kubernetes, sandbox_plan
from shared.errors import ConfigError

__all__ = ["deploy_up", "doctor", "local_metrics"]


@contextlib.contextmanager
def local_metrics(args: argparse.Namespace) -> Iterator[None]:
    """``accelops report`` with no BigQuery named: the sandbox's, from ``--state-dir``
    (started with its reports part for the report when it is not running)."""
    with session(state_dir_from(args.state_dir), {"reports"}) as sandbox, \
            sandbox.client_env():
        yield


def doctor(args: argparse.Namespace) -> int:
    """``accelops doctor --state-dir DIR``: the sandbox running from DIR, its parts only,
    against its own retry policies and push endpoints."""
    sandbox = Sandbox.attach(Path(args.state_dir))
    running = [spec for spec in FUNCTIONS if sandbox.has(spec.target)]
    retry = {spec.target: (spec.retry.minimum_backoff, spec.retry.maximum_backoff,
                           spec.retry.max_delivery_attempts,
                           spec.retry.ack_deadline_seconds) for spec in running}
    areas = ["pubsub"]
    areas += ["kubernetes", "identity"] if sandbox.has("cluster") else []
    areas += ["bigquery"] if sandbox.has("bigquery") else []
    expect = Expectations(
        PROJECT, load_config(str(sandbox.config)), lambda f: retry[f.name],
        push_endpoints={spec.target: sandbox.function_url(spec.target) for spec in running},
        functions=tuple(retry))
    with sandbox.client_env():
        print(f"checking the sandbox in {sandbox.state_dir}")
        return run(expect, tuple(areas))


def deploy_up(args: argparse.Namespace) -> int:
    """``accelops deploy up --sandbox DIR``: only the Kubernetes half, onto the sandbox
    running from DIR."""
    root = repo_root()
    sandbox = Sandbox.attach(Path(args.sandbox))
    work = sandbox.state_dir / "deploy"
    k = Kubernetes(shown(sandbox.kubeconfig, root), shown(work / "overlay", root),
                   controllers_timeout_seconds=args.controllers_timeout)
    plan = sandbox_plan(shown(sandbox.state_dir, root), shown(sandbox.config, root),
                        PROJECT, k)
    if not args.plan and shutil.which("kubectl") is None:
        raise ConfigError("not on PATH: kubectl")
    return run_plan(args, plan, work, "down", rerun=f"accelops deploy up --sandbox {args.sandbox}")
