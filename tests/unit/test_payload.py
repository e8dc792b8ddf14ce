from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.errors import PermanentError
from shared.payload import (
    DuplicateKeys,
    Limits,
    Problem,
    Unusable,
    check,
    decode,
    decode_array,
    format_path,
    lone_surrogate,
)

LIMITS = Limits(max_bytes=1_000_000)
GENEROUS = Limits(max_bytes=10_000_000, max_depth=64, max_digits=400,
                  max_string_chars=1_000_000, max_items=100_000)


def _problem(text: str | bytes, limits: Limits = LIMITS) -> Problem | None:
    data = text.encode() if isinstance(text, str) else text
    return check(decode(data, limits), limits)


def _decoded(data: bytes, limits: Limits) -> tuple[Any, PermanentError | None]:
    """(value, None) when ``data`` decodes; (None, the refusal) when it does not."""
    try:
        return decode(data, limits), None
    except PermanentError as exc:
        return None, exc


def _refusal_rule(data: bytes, limits: Limits) -> str:
    """The rule a message breaks, whether the parser or the check refuses it."""
    value, refused = _decoded(data, limits)
    if refused is not None:
        assert refused.field == "data"
        assert refused.rule is not None
        return refused.rule
    problem = check(value, limits)
    assert problem is not None
    return problem.rule


# ----------------------------------------------------------------------------- decode
def test_data_over_the_size_limit_is_refused_before_it_is_decoded():
    # Not UTF-8 and not JSON either: only the size can have been looked at.
    data = b"\xff" * 101

    with pytest.raises(PermanentError) as caught:
        decode(data, Limits(max_bytes=100))

    assert caught.value.field == "data"
    assert caught.value.rule == "at most 100 bytes"
    assert "101 bytes" in caught.value.message


def test_data_exactly_at_the_size_limit_is_decoded():
    assert decode(b"[1, 2]", Limits(max_bytes=6)) == [1, 2]


def test_data_that_is_not_utf8_is_refused_naming_the_offset():
    with pytest.raises(PermanentError) as caught:
        decode(b'{"a": "\xc3\x28"}', LIMITS)

    assert caught.value.field == "data"
    assert caught.value.rule == "must be UTF-8 JSON"
    assert "offset 7" in caught.value.message


def test_a_syntax_error_is_refused_naming_its_line_and_column():
    with pytest.raises(PermanentError) as caught:
        decode(b'{\n  "a": 1,\n  "b" 2\n}', LIMITS)

    assert caught.value.field == "data"
    assert caught.value.rule == "must be UTF-8 JSON"
    assert "line 3 column 7" in caught.value.message


@pytest.mark.parametrize("depth", [975, 100_000])
def test_nesting_deeper_than_the_parser_follows_is_refused_as_too_deep(depth):
    data = b"[" * depth + b"]" * depth

    # 975 levels may or may not fit the parser's recursion budget (it depends on the
    # caller's stack); either way the message is refused for its depth, never crashes.
    assert _refusal_rule(data, LIMITS) == "nesting depth at most 16"


def test_nesting_far_beyond_the_parser_is_refused_by_decode_itself():
    depth = 100_000
    with pytest.raises(PermanentError, match="nested deeper than 16 levels") as caught:
        decode(b"[" * depth + b"]" * depth, LIMITS)

    assert caught.value.field == "data"


def test_an_integer_of_thousands_of_digits_is_marked_and_reported_at_its_path():
    data = b'{"tpu": {"type": "v4-8", "slices": ' + b"7" * 5000 + b"}}"

    value = decode(data, LIMITS)

    assert isinstance(value["tpu"]["slices"], Unusable)
    assert value["tpu"]["type"] == "v4-8"
    problem = check(value, LIMITS)
    assert problem is not None
    assert problem.field == "tpu.slices"
    assert problem.rule == "an integer of at most 40 digits (this one has 5,000)"
    assert str(problem) == "tpu.slices: an integer of at most 40 digits (this one has 5,000)"


@pytest.mark.parametrize("digits", [41, 400, 4300])
def test_an_integer_python_can_convert_but_longer_than_the_limit_is_reported(digits):
    data = b'{"count": -' + b"9" * digits + b"}"

    problem = _problem(data)

    assert problem == Problem(("count",),
                              f"an integer of at most 40 digits (this one has {digits:,})")


def test_a_float_written_with_sixty_digits_is_just_a_float():
    data = b'{"ratio": 1.' + b"5" * 59 + b"}"

    assert decode(data, LIMITS) == {"ratio": 1.5555555555555556}
    assert _problem(data) is None


def test_an_integer_of_forty_digits_decodes_to_its_value():
    digits = "9" * 40
    value = decode(f'{{"big": {digits}, "small": 3}}'.encode(), LIMITS)

    assert value == {"big": int(digits), "small": 3}
    assert check(value, LIMITS) is None


def test_a_long_digit_run_inside_a_string_leaves_the_string_and_numbers_alone():
    text = "1" * 5000
    value = decode(json.dumps({"s": text, "n": 12, "f": 2.5}).encode(),
                   Limits(max_bytes=1_000_000, max_string_chars=10_000))

    assert value == {"s": text, "n": 12, "f": 2.5}


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_numbers_the_parser_allows_are_marked_and_reported(constant):
    value = decode(f'{{"x": [1, {constant}]}}'.encode(), LIMITS)

    assert isinstance(value["x"][1], Unusable)
    problem = check(value, LIMITS)
    assert problem == Problem(("x", 1), f"{constant} is not a JSON number")


def test_a_number_beyond_float_range_is_reported_as_out_of_range():
    value = decode(b'{"lr": 1e999}', LIMITS)

    assert check(value, LIMITS) == Problem(("lr",), "a number within the range of a "
                                                    "64-bit float")


def test_a_duplicate_key_keeps_the_last_value_and_is_reported_naming_the_key():
    value = decode(b'{"ok": true, "team": {"name": "a", "name": "b", "x": 1, "x": 2}}',
                   LIMITS)

    team = value["team"]
    assert isinstance(team, DuplicateKeys)
    assert team == {"name": "b", "x": 2}
    assert team.duplicates == ("name", "x")
    assert check(value, LIMITS) == Problem(("team",),
                                           "each key at most once (repeated: 'name', 'x')")


def test_an_object_without_duplicates_is_a_plain_dict():
    assert type(decode(b'{"a": 1, "b": 2}', LIMITS)) is dict


# ------------------------------------------------------------------------------ check
def test_nesting_beyond_the_limit_is_reported_where_it_starts():
    limits = Limits(max_bytes=1000, max_depth=2)

    assert check({"a": {"b": 1}}, limits) is None
    assert check({"a": {"b": {"c": 1}}}, limits) == Problem(("a", "b"),
                                                          "nesting depth at most 2")
    assert check([[1], [2, [3]]], limits) == Problem((1, 1), "nesting depth at most 2")


def test_check_follows_nesting_far_deeper_than_recursion_allows():
    value: list[Any] = []
    for _ in range(100_000):
        value = [value]

    problem = check(value, LIMITS)

    assert problem is not None
    assert problem.rule == "nesting depth at most 16"
    assert problem.path == (0,) * 16


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ([0] * 4, "at most 3 items (this one has 4)"),
        ({str(i): i for i in range(4)}, "at most 3 members (this one has 4)"),
    ],
)
def test_containers_over_the_item_limit_are_reported(value, rule):
    limits = Limits(max_bytes=1000, max_items=3)

    assert check({"outer": value}, limits) == Problem(("outer",), rule)
    assert check({"outer": value[:3] if isinstance(value, list) else
                  dict(list(value.items())[:3])}, limits) is None


def test_a_string_over_the_length_limit_is_reported():
    limits = Limits(max_bytes=1000, max_string_chars=5)

    assert check({"args": ["short", "longer"]}, limits) == Problem(
        ("args", 1), "a string of at most 5 characters (this one has 6)")


def test_a_long_key_is_reported_and_its_path_is_shortened():
    key = "k" * 100
    problem = check({key: 1}, Limits(max_bytes=1000, max_string_chars=80))

    assert problem is not None
    assert problem.rule == "key a string of at most 80 characters (this one has 100)"
    assert problem.field == "k" * 64 + "…"


def test_a_lone_surrogate_in_a_value_is_reported_with_its_position():
    value = decode(b'{"env": {"A": "ab\\ud800c"}}', LIMITS)

    assert value["env"]["A"] == "ab\ud800c"
    assert check(value, LIMITS) == Problem(
        ("env", "A"), "must be valid Unicode text (lone surrogate U+D800 at character 2)")


def test_a_lone_surrogate_in_a_key_is_reported():
    value = decode(b'{"\\ud800": 1}', LIMITS)

    problem = check(value, LIMITS)

    assert problem is not None
    assert problem.path == ("\ud800",)
    assert problem.rule == ("key must be valid Unicode text "
                            "(lone surrogate U+D800 at character 0)")


def test_a_paired_surrogate_escape_is_ordinary_text():
    value = decode(b'{"emoji": "\\ud83d\\ude00"}', LIMITS)

    assert value == {"emoji": "😀"}
    assert check(value, LIMITS) is None


def test_a_valid_nested_value_has_no_problem():
    value = decode(json.dumps({
        "name": "llama", "tpu": {"type": "v5p-8", "slices": 2},
        "args": ["--steps=10", "--lr=0.1"], "env": {"A": "日本語"}, "x": [None, True, 1.5],
    }).encode(), LIMITS)

    assert check(value, LIMITS) is None


def test_the_first_problem_in_document_order_is_reported():
    value = decode(b'{"a": [1, NaN, "' + b"x" * 5000 + b'"], "b": Infinity}', LIMITS)

    assert check(value, LIMITS) == Problem(("a", 1), "NaN is not a JSON number")


def test_a_problem_with_the_value_itself_is_reported_at_the_root():
    problem = check(decode(b"NaN", LIMITS), LIMITS)

    assert problem is not None
    assert problem.path == ()
    assert problem.field == "<root>"


def test_a_path_prefix_is_put_before_every_reported_path():
    assert check({"a": float("inf")}, LIMITS, path=(3,)) == Problem(
        (3, "a"), "a number within the range of a 64-bit float")


def test_paths_read_like_pydantic_locations():
    assert format_path(()) == "<root>"
    assert format_path(("args", 3)) == "args.3"
    assert format_path(("tpu", "slices")) == "tpu.slices"


def test_lone_surrogate_finds_the_first_unpaired_half():
    assert lone_surrogate("plain") is None
    assert lone_surrogate("日本語 😀") is None
    assert lone_surrogate("ab\udc00\ud800") == 2


# ------------------------------------------------------------------------- properties
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None)
@given(_json_values)
def test_any_json_value_within_limits_decodes_to_itself_without_problems(value):
    data = json.dumps(value).encode()

    decoded = decode(data, GENEROUS)

    assert decoded == json.loads(data)
    assert decoded == value
    assert check(decoded, GENEROUS) is None


_TOKENS = ["[", "]", "{", "}", '"a"', '"\\ud800"', ":", ",", " ", "1" * 45, "1.5",
           "NaN", "-Infinity", "1e999", "true", "null", "-", ".", "e", '"', "\\"]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200)
       | st.text(alphabet=st.characters(), max_size=60).map(
           lambda t: t.encode("utf-8", "surrogatepass"))
       | st.lists(st.sampled_from(_TOKENS), max_size=60).map(lambda t: "".join(t).encode()))
def test_any_bytes_either_decode_or_are_refused_as_permanent(data):
    limits = Limits(max_bytes=150, max_depth=4, max_items=8)
    value, refused = _decoded(data, limits)
    if refused is not None:
        assert refused.field == "data"
        assert refused.rule in ("must be UTF-8 JSON", "at most 150 bytes",
                                "nesting depth at most 4")
        return
    problem = check(value, limits)
    assert problem is None or problem.rule


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(), max_size=50)
       | st.dictionaries(st.text(alphabet=st.characters(), max_size=5),
                         st.text(alphabet=st.characters(), max_size=20), max_size=4))
def test_any_text_with_surrogates_is_refused_or_reported_never_crashes(value):
    data = json.dumps(value, ensure_ascii=True).encode()

    decoded = decode(data, LIMITS)
    problem = check(decoded, LIMITS)

    assert decoded == value
    texts = [value] if isinstance(value, str) else [*value, *value.values()]
    has_surrogate = any(lone_surrogate(t) is not None for t in texts)
    assert (problem is not None) == has_surrogate


def test_a_too_deep_element_holding_brackets_and_escaped_quotes_in_a_string_is_skipped_whole():
    limits = Limits(max_bytes=10_000_000, max_depth=9)
    deep = b"[" * 3000 + b'"a\\"] [ { \\\\"' + b"]" * 3000

    value = decode_array(b"[" + deep + b', {"ok": 1}]', limits)

    assert isinstance(value[0], Unusable)
    assert value[1] == {"ok": 1}


def test_a_too_deep_element_with_an_unterminated_string_is_refused_not_scanned_for_ever():
    # '"\"\"\"…' never closes: each escaped quote once restarted a scan to the end.
    data = b"[" + b"[" * 1100 + b'"' + b'\\"' * 2_000_000

    with pytest.raises(PermanentError, match="unterminated"):
        decode_array(data, Limits(max_bytes=10_000_000, max_depth=9))
