from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from shared.names import JOBSET_NAME_MAX, dns_label, jobset_name

RFC1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def test_the_same_name_and_request_id_always_give_the_same_jobset_name():
    assert jobset_name("llama-pretrain", "msg-1") == jobset_name("llama-pretrain", "msg-1")


def test_another_request_id_gives_another_jobset_name():
    assert jobset_name("llama-pretrain", "msg-1") != jobset_name("llama-pretrain", "msg-2")


def test_names_that_sanitise_alike_still_get_distinct_jobset_names():
    assert jobset_name("Llama Pretrain", "1") != jobset_name("llama-pretrain", "1")


def test_a_readable_name_keeps_its_words():
    assert jobset_name("Llama Pretrain_v2", "1").startswith("llama-pretrain-v2-")


def test_a_name_starting_with_a_digit_is_prefixed_with_a_letter():
    assert jobset_name("7b-run", "1").startswith("j-7b-run-")


def test_dns_label_strips_symbols_and_collapses_dashes():
    assert dns_label("--Hello__World!!--") == "hello-world"


@given(name=st.text(max_size=300), request_id=st.text(max_size=300))
def test_any_input_gives_a_valid_jobset_name_within_the_limit(name: str, request_id: str):
    result = jobset_name(name, request_id)
    assert len(result) <= JOBSET_NAME_MAX
    assert RFC1123_LABEL.match(result), result
    assert result[0].isalpha()


@given(text=st.text(max_size=300), limit=st.integers(min_value=1, max_value=63))
def test_dns_label_is_empty_or_a_valid_label_within_its_limit(text: str, limit: int):
    label = dns_label(text, limit)
    assert len(label) <= limit
    assert label == "" or RFC1123_LABEL.match(label)
