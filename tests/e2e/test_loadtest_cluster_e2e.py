"""``accelops loadtest --cluster`` on the sandbox's cluster: the load generator's master
and worker Deployments, applied from the deployment definition, run as real Locust
processes; the command scales the workers through the scale subresource and drives the
master through the API server's service proxy, as on GKE; every request ends up in
BigQuery, and the test's figures are checked against the raw rows.
"""

from __future__ import annotations

import re
import statistics
from typing import Any

import pytest

from sandbox.supervisor.runner import Sandbox
from sandbox.topology import PROJECT
from shared import bigquery, kube
from shared.cli import main
from shared.metrics.loadtest.completion import new_test_id
from shared.metrics.loadtest.views import BigQueryMetrics

pytestmark = pytest.mark.e2e

SANDBOX_PARTS = {"jobs", "metrics"}
NAMESPACE = "serving"  # serving.namespace of the sandbox config (the default)


def raw_rows(test_id: str) -> list[dict[str, Any]]:
    """The test's rows as ingested (the table, not the views), each row key once."""
    rows = bigquery.query(PROJECT, "SELECT row_key, response_time, exception, worker "
                          f"FROM `{PROJECT}.loadtest.requests` WHERE test_id = @t",
                          {"t": test_id})
    return list({row["row_key"]: row for row in rows}.values())


def exact_percentile(values: list[float], fraction: float) -> float:
    # Linear interpolation between closest ranks: BigQuery's PERCENTILE_CONT.
    return statistics.quantiles(values, n=100, method="inclusive")[round(fraction * 100) - 1]


def test_a_two_worker_test_on_the_clusters_load_generator_reports_every_request(
        sandbox: Sandbox, capsys: pytest.CaptureFixture[str]) -> None:
    test_id = new_test_id()
    kube.reset_client()

    code = main(["loadtest", "--cluster", "--workers", "2", "--users", "4",
                 "--duration", "4", "--host", sandbox.triton_url, "--model", "toy-lm",
                 "--test-id", test_id, "--no-report"])
    out = capsys.readouterr().out

    assert code == 0, out
    assert "workers connected: 2/2 (2 ready)" in out
    counted = re.search(r"locust made (\d+) requests", out)
    assert counted is not None, out
    master_count = int(counted.group(1))
    assert master_count > 0
    # The deployment now has the two workers the test asked for.
    scale = kube.get_client().scale(kube.DEPLOYMENTS, "locust-worker", NAMESPACE)
    assert scale["spec"]["replicas"] == 2

    rows = raw_rows(test_id)
    summary = BigQueryMetrics.from_env().summary(test_id)
    # The master's merged count, the rows and the views agree.
    assert len(rows) == master_count == summary.requests
    workers = {row["worker"] for row in rows}
    assert len(workers) == 2
    assert None not in workers
    # The run record's users are the test's total, not one worker's.
    assert summary.users == 4
    ok = [row["response_time"] for row in rows if row["exception"] is None]
    for name, fraction in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        assert getattr(summary, f"{name}_ms") == pytest.approx(
            exact_percentile(ok, fraction), rel=1e-9), name
