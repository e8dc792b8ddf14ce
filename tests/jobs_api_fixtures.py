"""The world the jobs API runs in, on the stand-ins over sockets: the Kubernetes API
(team namespaces, JobSets), Pub/Sub (the job-requests topic and a pull subscription
to read what the API published), BigQuery (job_events, for rejected requests) and the
sandbox's ID token issuer serving its certificates; the environment a deployed
service would have; and the app itself. Used by the functional and OpenAPI tests."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from google.cloud import pubsub_v1
from werkzeug.serving import make_server

from sandbox.idtokens import TokenIssuer, certs_url, serve_certs
from sandbox.kubeapi import KubeApiServer, install_crds, start_kube_api
from sandbox.pubsub import PubSubServer, SubscriptionConfig, start_pubsub
from shared import bigquery, kube, pubsub
from shared.config import load_config
from shared.jobspec.policy import check_policy
from shared.jobspec.render import render_jobset
from shared.jobspec.request import parse_job_request
from shared.kube import JOBSETS, NAMESPACES
from tests.bigquery_fixtures import PROJECT, environment, fresh_dataset
from tests.jobs_fixtures import CONFIG, JOB_NAMESPACES

AUDIENCE = "http://jobs-api.test"
ALICE = "alice@example.com"  # research
BOB = "bob@example.com"  # inference
OPS = "ops@example.com"  # admin
NOBODY = "nobody@example.com"  # no team
REQUESTS_SUBSCRIPTION = f"projects/{PROJECT}/subscriptions/job-requests-audit"


def job_request(team: str = "research", **changes: Any) -> dict[str, Any]:
    """A request the test config accepts for ``team``."""
    tpu = {"research": {"type": "v5litepod-16", "slices": 1},
           "inference": {"type": "v6e-8", "slices": 1}}[team]
    body: dict[str, Any] = {"name": f"{team}-train", "team": team,
                            "image": "us-docker.pkg.dev/acme/train/llama:1.4",
                            "command": ["python", "train.py"], "tpu": tpu}
    body.update(changes)
    return body


@dataclass
class JobsApiWorld:
    app: Any  # the Flask app
    client: Any  # its test client
    url: str  # where it also serves over HTTP (a werkzeug server on a loopback port)
    issuer: TokenIssuer
    kube: kube.KubeClient
    kube_api: KubeApiServer
    pubsub_api: PubSubServer
    config_path: Path
    dataset: str

    def token(self, email: str, **claims: Any) -> str:
        audience = claims.pop("audience", AUDIENCE)
        return self.issuer.mint(email, audience, **claims)

    def headers(self, email: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(email)}"}

    def create_job(self, team: str, request_id: str, **changes: Any) -> dict[str, Any]:
        """A JobSet as submit_job renders it, created straight in the cluster."""
        request = parse_job_request(job_request(team, request_id=request_id, **changes))
        jobset = render_jobset(check_policy(request, load_config(str(self.config_path))),
                               request_id)
        self.kube.create(JOBSETS, jobset)
        return jobset

    def record_rejection(self, request_id: str, team: str, field: str, rule: str) -> None:
        """A ``rejected`` row in job_events, as ingest_metrics writes submit_job's."""
        from datetime import UTC, datetime

        from shared.metrics.job_event import JobEventRecord, job_event_id

        record = JobEventRecord(
            event_id=job_event_id(request_id, "rejected"), event="rejected",
            at=datetime.now(UTC), request_id=request_id, team=team, reason=f"{field}: {rule}",
            field=field, rule=rule)
        row = {**record.model_dump(mode="json"), "row_key": record.event_id,
               "message_id": "1", "ingested_at": datetime.now(UTC).isoformat()}
        bigquery.insert_rows(PROJECT, f"{self.dataset}.job_events", [row], [record.event_id])

    def published(self, max_messages: int = 10) -> list[Any]:
        """The messages the API published since the last call (acknowledged)."""
        subscriber = pubsub_v1.SubscriberClient()
        try:
            response = subscriber.pull(subscription=REQUESTS_SUBSCRIPTION,
                                       max_messages=max_messages, timeout=5)
            if response.received_messages:
                subscriber.acknowledge(subscription=REQUESTS_SUBSCRIPTION,
                                       ack_ids=[m.ack_id for m in response.received_messages])
            return [m.message for m in response.received_messages]
        finally:
            subscriber.close()


def _config(directory: Path, dataset: str) -> Path:
    config = yaml.safe_load(CONFIG.read_text())
    config["teams"]["research"]["members"] = [ALICE]
    config["teams"]["inference"]["members"] = [BOB.upper()]  # e-mails match in any case
    config["jobs_api"] = {"admins": [OPS]}
    config["metrics"] = {"dataset": dataset}
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@contextlib.contextmanager
def jobs_api_world(directory: Path, bigquery_url: str) -> Iterator[JobsApiWorld]:
    """Every backend up, the environment set, the app created; all undone after."""
    from services.jobs_api import create_app
    from shared.metrics.schema import apply_schema

    metrics = fresh_dataset()
    config_path = _config(directory, metrics.dataset)
    issuer = TokenIssuer.generate()
    kube_api = start_kube_api()
    install_crds(kube_api.store)
    pubsub_api = start_pubsub(pull_wait_seconds=0.3)
    certs = serve_certs(issuer)
    try:
        with environment(
                KUBECONFIG=str(kube_api.write_kubeconfig(directory / "kubeconfig")),
                PUBSUB_EMULATOR_HOST=pubsub_api.address, BIGQUERY_EMULATOR_HOST=bigquery_url,
                ACCELOPS_CONFIG=str(config_path), ACCELOPS_PROJECT=PROJECT,
                ACCELOPS_ID_TOKEN_CERTS_URL=certs_url(certs.port),
                ACCELOPS_JOBS_API_AUDIENCE=AUDIENCE):
            for module in (kube, pubsub, bigquery):
                module.reset_client()
            client = kube.get_client()
            for namespace in JOB_NAMESPACES:
                client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": namespace}})
            topic = f"projects/{PROJECT}/topics/job-requests"
            # And those submit_job publishes to, for tests that hand it what was posted.
            for name in ("job-requests", "job-rejections", "slices-reconcile",
                         "loadtest-metrics"):
                pubsub_api.broker.create_topic(f"projects/{PROJECT}/topics/{name}")
            pubsub_api.broker.create_subscription(SubscriptionConfig(
                name=REQUESTS_SUBSCRIPTION, topic=topic))
            apply_schema(PROJECT, metrics)
            app = create_app()
            server = make_server("127.0.0.1", 0, app, threaded=True)
            thread = threading.Thread(target=server.serve_forever, daemon=True)
            thread.start()
            try:
                yield JobsApiWorld(app, app.test_client(), f"http://127.0.0.1:{server.port}",
                                   issuer, client, kube_api, pubsub_api,
                                   config_path, metrics.dataset)
            finally:
                server.shutdown()
                thread.join(timeout=5)
    finally:
        for module in (kube, pubsub, bigquery):
            module.reset_client()
        certs.close()
        pubsub_api.stop()
        kube_api.stop()
