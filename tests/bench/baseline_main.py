"""Baseline for the cold-start benchmark: the usual sample style.

The same submit_job handler, but with every Google and Kubernetes client imported
at module top, as most Cloud Functions samples do. Only the benchmark uses it.
"""

from __future__ import annotations

import functions_framework
import kubernetes  # noqa: F401
from google.cloud import bigquery, container_v1, pubsub_v1, storage  # noqa: F401

from shared.handler import handle_pubsub
from shared.jobs.submit import on_message


@functions_framework.cloud_event
def submit_job(cloud_event):  # type: ignore[no-untyped-def]
    handle_pubsub(cloud_event, on_message, "submit_job")
