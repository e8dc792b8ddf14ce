"""Server-sent events decoded incrementally, however the bytes are split."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.loadgen.sse import SseDecoder, SseError

STREAM = (b'data: {"text_output": "caf\xc3\xa9"}\r\n\r\n'
          b": a comment\n"
          b"event: token\nid: 7\ndata: first line\ndata:second line\n\n"
          b"data: cr only\r\r"
          b"data\n\n"
          b"retry: 10\n\n")
EVENTS = ['{"text_output": "café"}', "first line\nsecond line", "cr only", ""]


def decode_all(chunks: list[bytes]) -> list[str]:
    decoder = SseDecoder()
    return [event for chunk in chunks for event in decoder.feed(chunk)]


def test_events_end_at_a_blank_line_whatever_the_line_endings() -> None:
    assert decode_all([STREAM]) == EVENTS


@given(st.lists(st.integers(0, len(STREAM)), max_size=12))
def test_any_split_of_the_bytes_gives_the_same_events(cuts: list[int]) -> None:
    points = [0, *sorted(cuts), len(STREAM)]
    chunks = [STREAM[a:b] for a, b in itertools.pairwise(points)]

    assert decode_all(chunks) == EVENTS


def test_a_crlf_split_between_two_chunks_is_one_line_end() -> None:
    assert decode_all([b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"]) == ["a", "b"]


def test_an_unfinished_event_is_not_returned() -> None:
    assert decode_all([b"data: complete\n\ndata: cut off\n"]) == ["complete"]


def test_an_event_larger_than_the_limit_is_refused() -> None:
    decoder = SseDecoder(max_chars=100)

    with pytest.raises(SseError, match="an event longer than 100"):
        decoder.feed((b"data: " + b"x" * 30 + b"\n") * 5)
