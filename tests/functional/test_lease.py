"""The request lock (a Kubernetes Lease) against the Kubernetes API stand-in over sockets."""

from __future__ import annotations

import threading
import time

import pytest

from shared.kube import LEASES
from shared.lease import LockHeldError, expired, hold
from tests.functional.conftest import STATE_NAMESPACE

NAMESPACE = STATE_NAMESPACE


def test_a_held_lease_exists_for_the_block_and_is_gone_after_it(system_client):
    with hold(system_client, NAMESPACE, "lock-a", holder="m1", seconds=60):
        lease = system_client.get(LEASES, "lock-a", NAMESPACE)
        assert lease["spec"]["holderIdentity"] == "m1"

    assert system_client.find(LEASES, "lock-a", NAMESPACE) is None


def test_a_second_holder_waits_for_the_first_then_gets_the_lock(system_client):
    order: list[str] = []
    first_holds = threading.Event()

    def first() -> None:
        with hold(system_client, NAMESPACE, "lock-b", holder="first", seconds=60):
            first_holds.set()
            time.sleep(0.3)
            order.append("first done")

    thread = threading.Thread(target=first)
    thread.start()
    first_holds.wait(5)
    with hold(system_client, NAMESPACE, "lock-b", holder="second", seconds=60, wait=5):
        order.append("second in")
    thread.join(5)

    assert order == ["first done", "second in"]


def test_a_live_lease_held_too_long_fails_the_waiter_with_a_transient_error(system_client):
    with hold(system_client, NAMESPACE, "lock-c", holder="first", seconds=60), \
            pytest.raises(LockHeldError), \
            hold(system_client, NAMESPACE, "lock-c", holder="second", seconds=60, wait=0.2):
        pass


def test_a_lease_left_by_a_dead_holder_is_taken_over_once_expired(system_client):
    system_client.create(LEASES, {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "lock-d", "namespace": NAMESPACE},
        "spec": {"holderIdentity": "crashed", "leaseDurationSeconds": 60,
                 "renewTime": "2020-01-01T00:00:00.000000Z"}})

    with hold(system_client, NAMESPACE, "lock-d", holder="next", seconds=60, wait=0.5):
        assert system_client.get(LEASES, "lock-d", NAMESPACE)["spec"]["holderIdentity"] == "next"

    assert system_client.find(LEASES, "lock-d", NAMESPACE) is None


def test_a_slow_holder_never_deletes_the_lease_its_successor_took_over(system_client):
    with hold(system_client, NAMESPACE, "lock-e", holder="slow", seconds=60):
        # The slow holder's lease expires and is taken over meanwhile.
        lease = system_client.get(LEASES, "lock-e", NAMESPACE)
        lease["spec"].update(holderIdentity="successor")
        system_client.replace(LEASES, lease)

    assert system_client.get(LEASES, "lock-e", NAMESPACE)["spec"]["holderIdentity"] == "successor"


@pytest.mark.parametrize(("spec", "is_expired"), [
    ({"renewTime": "2026-11-23T10:00:00.000000Z", "leaseDurationSeconds": 60}, False),
    ({"renewTime": "2026-11-23T09:58:59.000000Z", "leaseDurationSeconds": 60}, True),
    ({"leaseDurationSeconds": 60}, True),
    ({"renewTime": "not a time", "leaseDurationSeconds": 60}, True),
])
def test_a_lease_is_expired_once_its_duration_has_passed_or_it_cannot_be_read(spec,
                                                                            is_expired):
    now = 1_795_428_030.0  # 2026-11-23T10:00:30Z

    assert expired({"spec": spec}, now) is is_expired
