"""``accelops jobs render``: the JobSet a request becomes; publishes nothing."""

from __future__ import annotations

import argparse

import yaml

from shared.jobs.commands.request_file import config_of, read_request
from shared.jobspec.policy import check_policy
from shared.jobspec.render import render_jobset

__all__ = ["main"]


def main(args: argparse.Namespace) -> int:
    _, request = read_request(args.file)
    assert request is not None
    admission = check_policy(request, config_of(args))
    request_id = request.request_id or args.request_id
    print(yaml.safe_dump(render_jobset(admission, request_id), sort_keys=False), end="")
    return 0
