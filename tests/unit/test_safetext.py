from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.payload import Unusable
from shared.safetext import clean, clip, preview


def _original(encoded: str) -> str:
    return base64.b64decode(encoded).decode("utf-8", "surrogatepass")


# ------------------------------------------------------------------------------ clean
def test_clean_replaces_lone_surrogates_and_keeps_the_exact_original():
    text = "bad \ud800 and \udfff end"

    cleaned = clean(text, 1000)

    assert cleaned.text == "bad \ufffd and \ufffd end"
    cleaned.text.encode("utf-8")
    assert cleaned.original_base64 is not None
    assert _original(cleaned.original_base64) == text


def test_clean_leaves_ordinary_non_ascii_text_alone():
    text = "日本語 ✓ 😀"

    cleaned = clean(text, 1000)

    assert cleaned.text == text
    assert cleaned.original_base64 is None


def test_clean_keeps_only_the_first_bytes_of_a_long_original():
    text = "\ud800" + "x" * 100

    cleaned = clean(text, 1000, max_original_bytes=10)

    assert cleaned.original_base64 is not None
    assert base64.b64decode(cleaned.original_base64) == b"\xed\xa0\x80" + b"x" * 7


def test_clean_clips_long_text_after_replacing_surrogates():
    cleaned = clean("\ud800" * 500, 100)

    assert len(cleaned.text) <= 100
    assert cleaned.text.startswith("\ufffd")
    assert "500 characters in all" in cleaned.text
    assert cleaned.original_base64 is not None
    assert _original(cleaned.original_base64) == "\ud800" * 500


# ------------------------------------------------------------------------------- clip
def test_clip_returns_short_text_unchanged():
    assert clip("hello", 5) == "hello"


def test_clip_keeps_long_text_within_the_limit_and_says_how_long_it_was():
    clipped = clip("x" * 12_345, 100)

    assert len(clipped) == 100
    assert clipped.startswith("x" * 50)
    assert clipped.endswith("… [clipped: 12,345 characters in all]")


# ---------------------------------------------------------------------------- preview
def test_preview_of_a_value_nested_far_deeper_than_recursion_allows_is_bounded():
    value: Any = "leaf"
    for _ in range(100_000):
        value = [value]

    shown = preview(value, 200)

    assert len(shown) <= 200
    assert shown.startswith("[[[[")
    assert shown.endswith("… [clipped]")


def test_preview_of_a_ten_million_character_string_is_short():
    value = {"data": "x" * 10_000_000, "next": 1}

    shown = preview(value, 80)

    assert len(shown) == 80
    assert shown.startswith('{"data": "xxx')
    assert shown.endswith("… [clipped]")


@pytest.mark.parametrize("value", [
    None, True, 0, -3, 1.5, 1e16, "plain", "日本語 ✓ 😀", 'quote " and \\ and \n',
    [], {}, [1, [2, [3]], {"a": None}],
    {"name": "llama", "tpu": {"type": "v5p-8", "slices": 2}, "args": ["--x", "--y"]},
])
def test_preview_of_a_short_json_value_is_its_json_text(value):
    assert preview(value, 1000) == json.dumps(value, ensure_ascii=False,
                                              separators=(", ", ": "))


def test_preview_shows_refused_values_as_their_rule():
    shown = preview({"x": Unusable("NaN is not a JSON number"), "y": float("inf")}, 200)

    assert shown == '{"x": <NaN is not a JSON number>, "y": Infinity}'


def test_preview_of_an_integer_too_long_to_print_does_not_raise():
    shown = preview([10**5000], 100)

    assert shown == "[<number too long to show>]"


# ------------------------------------------------------------------------- properties
_any_text = st.text(alphabet=st.characters(), max_size=30)
_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | _any_text,
    lambda children: st.lists(children, max_size=6)
    | st.dictionaries(_any_text, children, max_size=6),
    max_leaves=40,
)


@settings(max_examples=200, deadline=None)
@given(_values, st.integers(min_value=11, max_value=300))
def test_a_cleaned_preview_of_any_value_is_storable_and_within_the_limit(value, limit):
    shown = preview(value, limit)
    cleaned = clean(shown, limit)

    assert len(shown) <= limit
    assert len(cleaned.text) <= limit
    cleaned.text.encode("utf-8")
    if cleaned.original_base64 is None:
        assert cleaned.text == shown
    else:
        assert _original(cleaned.original_base64) == shown


@settings(max_examples=200, deadline=None)
@given(_any_text, st.integers(min_value=50, max_value=200))
def test_clip_never_exceeds_a_limit_that_has_room_for_its_marker(text, limit):
    original = text * 10
    clipped = clip(original, limit)

    assert len(clipped) <= limit
    if clipped != original:
        marker = f"… [clipped: {len(original):,} characters in all]"
        assert clipped.endswith(marker)
        assert original.startswith(clipped[: -len(marker)])
