"""Batches bounded by count, bytes and age (shared.metrics.batch)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.metrics.batch import Batcher, split


def sized(*sizes: int) -> list[tuple[str, int]]:
    return [(f"item{i}", size) for i, size in enumerate(sizes)]


# ------------------------------------------------------------------ split
def test_split_cuts_a_batch_when_it_holds_max_count_items() -> None:
    batches = list(split(sized(1, 1, 1, 1, 1), max_count=2, max_bytes=100))

    assert batches == [["item0", "item1"], ["item2", "item3"], ["item4"]]


def test_split_cuts_a_batch_before_the_item_that_would_exceed_max_bytes() -> None:
    batches = list(split(sized(40, 40, 30, 50), max_count=10, max_bytes=100))

    assert batches == [["item0", "item1"], ["item2", "item3"]]


def test_split_gives_an_oversized_item_a_batch_of_its_own() -> None:
    batches = list(split(sized(10, 500, 10), max_count=10, max_bytes=100))

    assert batches == [["item0"], ["item1"], ["item2"]]


def test_split_of_nothing_yields_no_batch() -> None:
    assert list(split([], max_count=3, max_bytes=3)) == []


@pytest.mark.parametrize(("max_count", "max_bytes"), [(0, 10), (10, 0), (-1, -1)])
def test_split_refuses_bounds_that_admit_nothing(max_count: int, max_bytes: int) -> None:
    with pytest.raises(ValueError, match="positive"):
        list(split(sized(1), max_count=max_count, max_bytes=max_bytes))


# ------------------------------------------------------------------ Batcher
def test_a_batch_is_handed_back_the_moment_it_reaches_max_count() -> None:
    batcher: Batcher[str] = Batcher(max_count=3, max_bytes=1000, max_age=60)

    assert batcher.add("a", 1, now=0) is None
    assert batcher.add("b", 1, now=0) is None
    assert batcher.add("c", 1, now=0) == ["a", "b", "c"]
    assert len(batcher) == 0


def test_an_item_that_does_not_fit_the_bytes_hands_back_the_batch_before_it() -> None:
    batcher: Batcher[str] = Batcher(max_count=100, max_bytes=100, max_age=60)
    batcher.add("a", 60, now=0)

    assert batcher.add("b", 50, now=1) == ["a"]
    assert batcher.drain() == ["b"]


def test_a_batch_is_due_once_its_first_item_is_max_age_old() -> None:
    batcher: Batcher[str] = Batcher(max_count=100, max_bytes=1000, max_age=2.0)
    batcher.add("a", 1, now=10.0)
    batcher.add("b", 1, now=11.5)

    assert batcher.take_due(now=11.9) is None
    assert batcher.take_due(now=12.0) == ["a", "b"]
    assert batcher.take_due(now=99.0) is None


def test_the_age_of_a_batch_starts_with_its_first_item_not_the_previous_batch() -> None:
    batcher: Batcher[str] = Batcher(max_count=2, max_bytes=1000, max_age=2.0)
    batcher.add("a", 1, now=0.0)
    batcher.add("b", 1, now=0.1)  # full: handed back
    batcher.add("c", 1, now=5.0)

    assert batcher.take_due(now=6.0) is None
    assert batcher.take_due(now=7.0) == ["c"]


def test_an_oversized_item_gets_a_batch_of_its_own() -> None:
    batcher: Batcher[str] = Batcher(max_count=100, max_bytes=100, max_age=60)
    batcher.add("small", 10, now=0)

    assert batcher.add("huge", 1000, now=0) == ["small"]
    assert batcher.add("next", 10, now=0) == ["huge"]
    assert batcher.drain() == ["next"]


def test_drain_hands_back_what_is_pending_and_empties_the_batcher() -> None:
    batcher: Batcher[str] = Batcher(max_count=10, max_bytes=1000, max_age=60)
    batcher.add("a", 1, now=0)
    batcher.add("b", 1, now=0)

    assert batcher.drain() == ["a", "b"]
    assert batcher.drain() == []
    assert batcher.take_due(now=1000) is None


def test_with_max_count_one_every_item_is_its_own_batch_at_once() -> None:
    batcher: Batcher[str] = Batcher(max_count=1, max_bytes=1000, max_age=60)

    assert [batcher.add(x, 5, now=0) for x in "abc"] == [["a"], ["b"], ["c"]]
    assert batcher.drain() == []


@pytest.mark.parametrize(("count", "size", "age"), [(0, 1, 1.0), (1, 0, 1.0), (1, 1, 0.0)])
def test_a_batcher_refuses_bounds_that_admit_nothing(count: int, size: int, age: float) -> None:
    with pytest.raises(ValueError, match="positive"):
        Batcher(max_count=count, max_bytes=size, max_age=age)


# ------------------------------------------------------------------ properties
def _within(batch: list[tuple[int, int]], max_count: int, max_bytes: int) -> bool:
    size = sum(item_size for _, item_size in batch)
    return len(batch) <= max_count and (size <= max_bytes or len(batch) == 1)


items_strategy = st.lists(st.integers(min_value=0, max_value=300), max_size=200).map(
    lambda sizes: list(enumerate(sizes)))


@given(items=items_strategy, max_count=st.integers(1, 20), max_bytes=st.integers(1, 400))
def test_split_batches_stay_in_bounds_and_keep_every_item_in_order(
        items: list[tuple[int, int]], max_count: int, max_bytes: int) -> None:
    batches = list(split(((item, item[1]) for item in items), max_count=max_count,
                         max_bytes=max_bytes))

    assert [item for batch in batches for item in batch] == items
    assert all(batch for batch in batches)
    assert all(_within(batch, max_count, max_bytes) for batch in batches)


@given(items=items_strategy, max_count=st.integers(1, 20), max_bytes=st.integers(1, 400),
       ticks=st.lists(st.booleans(), max_size=200))
def test_batcher_batches_stay_in_bounds_and_keep_every_item_in_order(
        items: list[tuple[int, int]], max_count: int, max_bytes: int, ticks: list[bool]) -> None:
    batcher: Batcher[tuple[int, int]] = Batcher(max_count=max_count, max_bytes=max_bytes,
                                                max_age=3.0)
    batches: list[list[tuple[int, int]]] = []
    for now, item in enumerate(items):
        if (full := batcher.add(item, item[1], now=float(now))) is not None:
            batches.append(full)
        if now < len(ticks) and ticks[now] and (due := batcher.take_due(now=float(now))):
            batches.append(due)
    if rest := batcher.drain():
        batches.append(rest)

    assert [item for batch in batches for item in batch] == items
    assert all(batch for batch in batches)
    assert all(_within(batch, max_count, max_bytes) for batch in batches)
