"""``accelops sandbox up|down|status|env|token``: the command's main, over the
supervisor (:mod:`sandbox.supervisor.runner`)."""

from __future__ import annotations

import argparse
import signal
import sys

from sandbox.supervisor.runner import Sandbox, SandboxError, state_dir_from
from sandbox.topology import CLUSTER, LOCATION, PROJECT

__all__ = ["main"]


def main(args: argparse.Namespace) -> int:
    state_dir = state_dir_from(args.state_dir)
    try:
        if args.action == "up":
            sandbox = Sandbox(state_dir, speed=args.speed, pubsub=args.pubsub,
                              start_timeout=args.start_timeout).start()
            _print_endpoints(sandbox)
            if args.foreground:
                print("serving; press Ctrl-C to stop")
                try:
                    signal.pause()
                except KeyboardInterrupt:
                    pass
                finally:
                    sandbox.stop()
            return 0
        if args.action == "down":
            Sandbox.attach(state_dir).stop()
            print(f"sandbox at {state_dir.resolve()} stopped")
            return 0
        sandbox = Sandbox.attach(state_dir)
        if args.action == "env":
            for key, value in sandbox.env().items():
                print(f"export {key}={value}")
            return 0
        if args.action == "token":
            return _print_token(sandbox, args)
        rows = sandbox.status()
        for name, pid, up, where in rows:
            print(f"{name:<12} {'up' if up else 'DOWN':<5} pid {pid:<8} {where}")
        if sandbox.has("pubsub"):
            print(f"pubsub: {sandbox.pubsub_description}")
        return 0 if all(up for _, _, up, _ in rows) else 1
    except SandboxError as exc:
        print(f"accelops sandbox: {exc}", file=sys.stderr)
        return 1


def _print_token(sandbox: Sandbox, args: argparse.Namespace) -> int:
    if not sandbox.has("idtokens"):
        raise SandboxError("this sandbox has no ID token issuer (it runs with the jobs part)")
    if not args.identity:
        raise SandboxError("name the identity: accelops sandbox token --as EMAIL")
    audience = args.audience or (sandbox.jobs_api_url if sandbox.has("jobs_api") else None)
    if audience is None:
        raise SandboxError("no jobs API runs here: name the token's --audience")
    print(sandbox.id_token(args.identity, audience, lifetime=args.lifetime))
    return 0


def _print_endpoints(sandbox: Sandbox) -> None:
    if sandbox.has("cluster"):
        print(f"  Kubernetes API  {sandbox.kube_url}   (kubeconfig {sandbox.kubeconfig})")
        print(f"  GKE API         {sandbox.gke_url}   (cluster {PROJECT}/{LOCATION}/{CLUSTER}, "
              f"clock x{sandbox.speed:g})")
    print(f"  Pub/Sub         {sandbox.pubsub_host}   (project {PROJECT}, "
          f"{sandbox.pubsub_description})")
    if sandbox.has("bigquery"):
        print(f"  BigQuery        {sandbox.bigquery_url}   (project {PROJECT}, data "
              f"{sandbox.state_dir / 'bigquery'})")
    if sandbox.has("inference"):
        print(f"  Triton          {sandbox.triton_url}   (model toy-lm)")
        print(f"  Saxml proxy     {sandbox.saxml_url}")
    for spec in sandbox.functions:
        print(f"  function        {spec.target:<16} {sandbox.function_url(spec.target)}")
    for service in sandbox.services:
        print(f"  service         {service.name:<16} {sandbox.service_url(service.name)}")
    if sandbox.has("idtokens"):
        print(f"  ID tokens       {sandbox.id_token_certs_url}   (`accelops sandbox token "
              "--as EMAIL` signs one)")
    print(f"  logs            {sandbox.state_dir / 'logs'}")
    print(f"point clients at it with:  eval \"$(accelops sandbox env --state-dir "
          f"{sandbox.state_dir})\"")
