"""The planner's use of GKE's parallel node-pool operations: the limit, one operation
per pool, and the slices of one JobSet started together."""

from __future__ import annotations

from shared.config import SliceConfig
from shared.slices.plan import BACKFILL_SECONDS
from tests.unit.test_slice_planner import NOW, jobset, plan, pool


def test_all_slices_of_a_multi_slice_jobset_start_in_the_same_run():
    js = jobset(slices=4)
    result = plan([js])

    assert [a.slice_index for a in result.start] == [0, 1, 2, 3]


def test_operations_in_flight_use_up_the_limit():
    js = jobset(slices=4)
    settings = SliceConfig(max_concurrent_operations=4)
    provisioning = pool(js, 0, status="PROVISIONING", nodes=0)

    result = plan([js], [provisioning], settings=settings)

    assert [a.slice_index for a in result.start] == [1, 2, 3]
    assert len(result.actions) == 3


def test_a_multi_slice_jobset_waits_for_room_for_all_its_slices_together():
    js = jobset(slices=3)
    settings = SliceConfig(max_concurrent_operations=4)

    crowded = plan([js], settings=settings, inflight={"a", "b"})
    room = plan([js], settings=settings, inflight={"a"})

    assert crowded.start == ()
    assert len(crowded.actions) == 3
    assert any("research/llama: its 3 slice creates start together, when 3 of 4 operation "
               "slots are free (2 now)" in note for note in crowded.waiting)
    assert [a.slice_index for a in room.start] == [0, 1, 2]


def test_a_younger_jobset_may_use_the_slots_a_waiting_one_cannot_use_yet():
    older = jobset(name="older", slices=3, created_at=NOW - 300)
    younger = jobset(name="younger", slices=1, created_at=NOW - 100)

    result = plan([older, younger], settings=SliceConfig(max_concurrent_operations=4),
                  inflight={"a", "b"})

    assert [a.jobset for a in result.start] == ["research/younger"]


def test_a_jobset_waiting_long_for_room_holds_back_the_younger_ones():
    older = jobset(name="older", slices=3, created_at=NOW - BACKFILL_SECONDS)
    younger = jobset(name="younger", slices=1, created_at=NOW - 100)

    result = plan([older, younger], settings=SliceConfig(max_concurrent_operations=4),
                  inflight={"a", "b"})

    assert result.start == ()
    assert any("research/older" in note and "younger JobSets wait behind it" in note
               for note in result.waiting)


def test_a_jobset_with_more_slices_than_the_limit_starts_when_every_slot_is_free():
    js = jobset(slices=6)
    settings = SliceConfig(max_concurrent_operations=4)

    busy = plan([js], settings=settings, inflight={"elsewhere"})
    free = plan([js], settings=settings)

    assert busy.start == ()
    assert [a.slice_index for a in free.start] == [0, 1, 2, 3]


def test_a_pool_with_an_operation_in_flight_gets_no_second_one():
    js = jobset(slices=1, finished_at=NOW - 500)
    result = plan([js], [pool(js, 0)], inflight={pool(js, 0).name})

    assert [a.kind for a in result.actions] == ["delete"]
    assert result.start == ()
