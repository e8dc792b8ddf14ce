"""The sandbox GKE API's admission rules for concurrent operations, without HTTP."""

from __future__ import annotations

import pytest

from sandbox.common.clock import SimClock
from sandbox.gke.errors import GkeError
from sandbox.gke.faults import FaultInjector
from sandbox.gke.operations import UPGRADE_MASTER, OperationBook
from sandbox.gke.records import Cluster

CLUSTER = Cluster("acme", "us-central2-b", "tpu", "http://127.0.0.1:6443")
OTHER = Cluster("acme", "europe-west4-a", "serve", "http://127.0.0.1:6444")


def refusal(book: OperationBook, pool: str, limit: int = 5) -> GkeError:
    with pytest.raises(GkeError) as excinfo:
        book.admit(CLUSTER, pool, limit)
    return excinfo.value


def test_operations_on_different_pools_are_admitted_side_by_side():
    book = OperationBook()
    book.start(CLUSTER, "CREATE_NODE_POOL", "a", 0.0, 180)

    book.admit(CLUSTER, "b", 5)  # does not raise


def test_the_checks_come_in_order_upgrade_then_same_pool_then_limit():
    book = OperationBook()
    book.start(CLUSTER, "CREATE_NODE_POOL", "a", 0.0, 180)
    assert refusal(book, "b", limit=1).status == "RESOURCE_EXHAUSTED"
    assert refusal(book, "a", limit=1).status == "FAILED_PRECONDITION"
    upgrade = book.start(CLUSTER, UPGRADE_MASTER, "", 0.0, 600)

    error = refusal(book, "a")

    assert error.message == f"Cluster is running incompatible operation {upgrade.name}."
    assert error.details[0]["reason"] == "CLUSTER_ALREADY_HAS_OPERATION"


def test_finished_operations_and_other_clusters_do_not_count():
    book = OperationBook()
    done = book.start(CLUSTER, "CREATE_NODE_POOL", "a", 0.0, 10)
    book.start(OTHER, UPGRADE_MASTER, "", 0.0, 600)
    for op in book.due(10.0):
        op.status = "DONE"

    book.admit(CLUSTER, "a", 1)  # does not raise
    assert done.target_link.endswith("/clusters/tpu/nodePools/a")
    assert book.next_due() == 600.0


def test_a_stockout_window_names_the_zone_and_closes_on_time():
    clock = SimClock()
    faults = FaultInjector(clock)
    faults.stockout_for(60, cluster="tpu")
    faults.stockout_for(60, reason="quota", cluster=OTHER.path)

    stockout = faults.take_pool_error(CLUSTER.path, "ct5lp-hightpu-4t")
    quota = faults.take_pool_error(OTHER.path, "ct5lp-hightpu-4t")
    clock.advance(60)

    assert stockout is not None
    assert quota is not None
    assert "'projects/acme/zones/us-central2-b' does not have enough" in stockout.message
    assert quota.message.startswith("Insufficient quota to satisfy the request")
    assert "region europe-west4" in quota.message
    assert faults.take_pool_error(CLUSTER.path, "ct5lp-hightpu-4t") is None


def test_an_unknown_window_reason_is_refused():
    with pytest.raises(ValueError, match="reason"):
        FaultInjector(SimClock()).stockout_for(60, reason="meteor")
