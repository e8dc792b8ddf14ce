from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox.inference.toy_lm import (
    DEFAULT_MAX_TOKENS,
    MAX_TOKENS_LIMIT,
    VOCABULARY,
    clamp_max_tokens,
    generate,
    generation_seconds,
    pieces,
    tokenize,
)


def test_the_same_prompt_always_gives_the_same_completion():
    assert generate("hello world", 8) == generate("hello world", 8)


def test_different_prompts_give_different_completions():
    texts = {generate(f"prompt number {i}", 16).text for i in range(20)}
    assert len(texts) == 20


def test_the_completion_has_exactly_max_tokens_words_from_the_vocabulary():
    result = generate("hello world", 8)
    assert result.num_output_tokens == 8
    assert len(tokenize(result.text)) == 8
    assert set(tokenize(result.text)) <= set(VOCABULARY)


def test_input_tokens_are_the_prompts_whitespace_separated_words():
    assert generate("  the quick\tbrown\nfox  ", 1).num_input_tokens == 4
    assert generate("", 1).num_input_tokens == 0


def test_an_empty_prompt_still_gets_a_completion():
    assert len(tokenize(generate("", 3).text)) == 3


def test_no_max_tokens_means_the_default():
    assert generate("hello").num_output_tokens == DEFAULT_MAX_TOKENS == 16


@pytest.mark.parametrize(("asked", "granted"), [
    (None, 16), (-5, 1), (0, 1), (1, 1), (8, 8), (256, 256), (257, 256), (10_000, 256),
])
def test_max_tokens_is_clamped_to_between_1_and_256(asked: int | None, granted: int):
    assert clamp_max_tokens(asked) == granted
    assert generate("hello", asked).num_output_tokens == granted


def test_a_longer_completion_extends_the_shorter_one():
    assert generate("hello world", 20).text.startswith(generate("hello world", 8).text + " ")


def test_the_score_is_negative_and_falls_with_length():
    assert 0 > generate("x", 4).score > generate("x", 8).score


def test_generation_time_is_milliseconds_per_token_times_tokens():
    assert generation_seconds(8, 1.0) == pytest.approx(0.008)
    assert generation_seconds(8, 0.0) == 0.0
    assert generation_seconds(8, -1.0) == 0.0


@given(prompt=st.text(max_size=200), max_tokens=st.integers(-1000, 1000) | st.none())
def test_any_prompt_gets_a_consistent_completion(prompt: str, max_tokens: int | None):
    result = generate(prompt, max_tokens)
    assert 1 <= result.num_output_tokens <= MAX_TOKENS_LIMIT
    assert len(tokenize(result.text)) == result.num_output_tokens
    assert result.num_input_tokens == len(prompt.split())


def test_the_streamed_pieces_join_to_exactly_the_completion():
    text = generate("stream me", 6).text

    parts = pieces(text)

    assert "".join(parts) == text
    assert len(parts) == 6
    assert parts[0] == tokenize(text)[0]
    assert all(part.startswith(" ") for part in parts[1:])
