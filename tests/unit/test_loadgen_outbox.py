"""The load generator's outbox: batches leave only when Pub/Sub confirms them."""

from __future__ import annotations

import pytest

from services.loadgen.outbox import Outbox, RunMessage


def fill(outbox: Outbox, count: int, now: float = 0.0, start: int = 0) -> bool:
    ready = False
    for i in range(start, start + count):
        ready = outbox.add(f"r{i}".encode(), now)
    return ready


def test_a_full_batch_is_ready_and_stays_queued_until_published() -> None:
    outbox = Outbox(max_count=3, max_age=2.0)

    assert fill(outbox, 3)
    batch = outbox.head()
    assert batch == [b"r0", b"r1", b"r2"]
    assert outbox.pending_records == 3

    outbox.published(batch)
    assert (outbox.head(), outbox.pending_records) == (None, 0)
    assert (outbox.published_records, outbox.published_messages) == (3, 1)


def test_a_failed_publish_keeps_the_batch_at_the_head_for_the_next_attempt() -> None:
    outbox = Outbox(max_count=2, max_age=2.0)
    fill(outbox, 4)
    first = outbox.head()

    outbox.failed()

    assert outbox.head() is first
    assert (outbox.publish_errors, outbox.queued_records) == (1, 4)


def test_a_batch_refused_for_good_is_dropped_and_counted_as_lost() -> None:
    outbox = Outbox(max_count=2, max_age=2.0)
    fill(outbox, 2)
    batch = outbox.head()
    assert batch is not None

    outbox.rejected(batch)
    outbox.close()

    assert (outbox.head(), outbox.rejected_records, outbox.lost_records) == (None, 2, 2)


def test_only_the_head_batch_can_leave_the_queue() -> None:
    outbox = Outbox(max_count=1, max_age=2.0)
    fill(outbox, 2)

    with pytest.raises(ValueError, match="head"):
        outbox.published([b"r1"])


def test_an_old_open_batch_is_closed_by_the_age_check_only_when_due() -> None:
    outbox = Outbox(max_count=100, max_age=2.0)
    fill(outbox, 5, now=10.0)

    assert not outbox.flush_due(11.0)
    assert outbox.flush_due(12.0)
    assert outbox.head() == [f"r{i}".encode() for i in range(5)]


def test_batches_stay_under_the_byte_limit() -> None:
    outbox = Outbox(max_count=1000, max_age=2.0, max_bytes=25)
    for i in range(10):
        outbox.add(b"x" * 10, float(i))  # 11 bytes each with its separator
    outbox.flush()

    sizes = []
    while (batch := outbox.head()) is not None:
        sizes.append(len(batch))
        outbox.published(batch)
    assert sizes == [2, 2, 2, 2, 2]


def test_closing_flushes_the_partial_batch_and_counts_later_records_as_lost() -> None:
    outbox = Outbox(max_count=100, max_age=2.0)
    fill(outbox, 5)

    outbox.close()
    assert not outbox.add(b"late", 1.0)

    assert outbox.queued_records == 5
    assert (outbox.late_records, outbox.lost_records) == (1, 6)


def test_resizing_closes_the_open_batch_and_applies_to_the_next_ones() -> None:
    outbox = Outbox(max_count=100, max_age=2.0)
    fill(outbox, 3)

    outbox.resize(max_count=2, max_age=1.0)

    assert outbox.head() == [b"r0", b"r1", b"r2"]
    assert fill(outbox, 2, start=3)
    assert outbox.queued_records == 5


def test_a_run_message_leaves_after_the_records_recorded_before_it() -> None:
    outbox = Outbox(max_count=100, max_age=2.0)
    fill(outbox, 3)

    assert outbox.add_run(RunMessage("t1", b'{"phase":"stop"}'))

    batch = outbox.head()
    assert batch == [b"r0", b"r1", b"r2"]
    outbox.published(batch)
    run = outbox.head()
    assert isinstance(run, RunMessage)
    assert (outbox.pending_records, outbox.pending_runs, outbox.idle) == (0, 1, False)
    outbox.published(run)
    assert (outbox.published_records, outbox.published_runs, outbox.published_messages) == (
        3, 1, 2)
    assert outbox.idle


def test_a_run_message_that_fails_is_retried_and_counted_as_lost_if_never_sent() -> None:
    outbox = Outbox(max_count=100, max_age=2.0)
    outbox.add_run(RunMessage("t1", b'{"phase":"start"}'))

    outbox.failed()
    outbox.close()

    assert isinstance(outbox.head(), RunMessage)
    assert (outbox.publish_errors, outbox.lost_runs, outbox.lost_records) == (1, 1, 0)


def test_run_messages_refused_or_queued_after_closing_are_lost_not_records() -> None:
    outbox = Outbox(max_count=100, max_age=2.0)
    outbox.add_run(RunMessage("t1", b"{}"))
    run = outbox.head()
    assert run is not None

    outbox.rejected(run)
    outbox.close()
    assert not outbox.add_run(RunMessage("t1", b"{}"))

    assert (outbox.rejected_runs, outbox.late_runs, outbox.lost_runs) == (1, 1, 2)
    assert outbox.lost_records == 0
