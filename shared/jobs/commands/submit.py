"""``accelops jobs submit``: publish a request to the job-requests topic, or POST it to
the jobs API."""

from __future__ import annotations

import argparse
import os

from shared import pubsub
from shared.config import Settings, Topics
from shared.errors import PermanentError
from shared.jobs.cli import api_client
from shared.jobs.commands.request_file import config_of, read_request

__all__ = ["main"]


def main(args: argparse.Namespace) -> int:
    # Fail here, not in a rejection record, on obvious mistakes.
    data, _ = read_request(args.file, validate=not args.no_validate)
    if (api := api_client(args)) is not None:
        accepted = api.submit(data)
        print(f"submitted {args.file} through {api.base_url}: request id "
              f"{accepted.request_id}; status: accelops jobs status {accepted.request_id} "
              f"(or GET {api.base_url}{accepted.status_url})")
        return 0
    project = args.project or Settings.from_env().project
    if not project:
        raise PermanentError("no project: pass --project or set ACCELOPS_PROJECT")
    topic = args.topic
    if topic is None:
        has_config = args.config or os.environ.get("ACCELOPS_CONFIG")
        topic = (config_of(args).topics if has_config else Topics()).job_requests
    message_id = pubsub.publish(project, topic, data)
    target = os.environ.get("PUBSUB_EMULATOR_HOST") or "Pub/Sub"
    print(f"published {args.file} to {pubsub.topic_path(project, topic)} on {target}: "
          f"message id {message_id}")
    return 0
