from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.errors import PermanentError
from shared.serving.triton_config import (
    DATA_TYPES,
    MAX_BYTES,
    MAX_DEPTH,
    MAX_TOKENS,
    ConfigPbtxtError,
    Field,
    Item,
    Message,
    Scalar,
    Symbol,
    Value,
    check,
    parse,
    pin,
    pin_message,
    render,
)

PYTHON_CONFIG = """\
# A text-generation model on the Python backend.
name: "toy-lm"
backend: "python"
max_batch_size: 16

input [
  {
    name: "PROMPT"
    data_type: TYPE_STRING
    dims: [ 1 ]
  },
  {
    name: "MAX_TOKENS"
    data_type: TYPE_INT32
    dims: [ 1 ]
    optional: true
  }
]
output [
  {
    name: "TEXT"
    data_type: TYPE_STRING
    dims: [ -1 ]
  }
]

dynamic_batching {
  preferred_batch_size: [ 4, 8, 16 ]
  max_queue_delay_microseconds: 5000
}

instance_group [ { kind: KIND_CPU, count: 2 } ]

parameters: {
  key: "EXECUTION_ENV_PATH",
  value: { string_value: "$$TRITON_MODEL_DIRECTORY/toy-lm-env.tar.gz" }
}
version_policy: { latest: { num_versions: 2 } }
"""

ONNX_CONFIG = """\
name: "resnet50"
backend: "onnxruntime"
max_batch_size: 32
input [
  {
    name: "input"
    data_type: TYPE_FP32
    format: FORMAT_NCHW
    dims: [ 3, 224, 224 ]
  }
]
output [
  {
    name: "logits"
    data_type: TYPE_FP32
    dims: [ 1000 ]
    label_filename: "labels.txt"
  }
]
instance_group [ { kind: KIND_GPU count: 1 } ]
optimization { execution_accelerators {
  gpu_execution_accelerator : [ {
    name : "tensorrt"
    parameters { key: "precision_mode" value: "FP16" }
    parameters { key: "max_workspace_size_bytes" value: "1073741824" }
  } ]
}}
model_warmup [
  {
    name: "zeros"
    batch_size: 1
    inputs { key: "input" value: { data_type: TYPE_FP32 dims: [ 3, 224, 224 ] zero_data: true } }
  }
]
"""

ENSEMBLE_CONFIG = """\
platform: "ensemble"   # no name: the directory names the model
max_batch_size: 8
input [ { name: "RAW_TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "SCORES" data_type: TYPE_FP32 dims: [ -1, 2 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "tokenizer"
      model_version: -1
      input_map { key: "TEXT" value: "RAW_TEXT" }
      output_map { key: "IDS" value: "token_ids" }
    },
    {
      model_name: "classifier"
      model_version: 3
      input_map { key: "INPUT_IDS" value: "token_ids" }
      output_map { key: "LOGITS" value: "SCORES" }
    }
  ]
}
"""

REALISTIC = [
    pytest.param(PYTHON_CONFIG, "toy-lm", id="python"),
    pytest.param(ONNX_CONFIG, "resnet50", id="onnxruntime"),
    pytest.param(ENSEMBLE_CONFIG, "pipeline", id="ensemble"),
]

MINIMAL = 'backend: "python"\n'


def _rejection(text: str, model: str = "toy-lm") -> ConfigPbtxtError:
    with pytest.raises(ConfigPbtxtError) as caught:
        check(text, model)
    return caught.value


def _syntax_error(text: str) -> ConfigPbtxtError:
    with pytest.raises(ConfigPbtxtError) as caught:
        parse(text)
    return caught.value


def _io(entry: str) -> str:
    return f'backend: "python"\ninput [ {{ {entry} }} ]\n'


# ------------------------------------------------------------------- realistic configs
@pytest.mark.parametrize(("text", "model"), REALISTIC)
def test_realistic_configs_pass_the_check(text: str, model: str) -> None:
    check(text, model)


@pytest.mark.parametrize(("text", "model"), REALISTIC)
def test_a_pinned_realistic_config_passes_the_check_again(text: str, model: str) -> None:
    check(pin(text, model, 4), model)


def test_the_pinned_config_names_the_model_and_serves_exactly_one_version() -> None:
    pinned = parse(pin(PYTHON_CONFIG, "toy-lm", 7))

    assert pinned.get("name")[0].value == "toy-lm"
    policy = Message((Field("specific", Message((Field("versions", (7,)),))),))
    assert [f.value for f in pinned.get("version_policy")] == [policy]


def test_pinning_replaces_the_users_name_and_version_policy_and_keeps_the_rest_in_order() -> None:
    text = ('name: "old"\nbackend: "python"\nversion_policy: { all { } }\n'
            'max_batch_size: 4\nname: "again"\n')

    assert pin(text, "toy-lm", 2) == (
        'name: "toy-lm"\n'
        "version_policy {\n"
        "  specific {\n"
        "    versions: [ 2 ]\n"
        "  }\n"
        "}\n"
        'backend: "python"\n'
        "max_batch_size: 4\n"
    )


def test_pinning_a_config_without_name_adds_it() -> None:
    pinned = parse(pin(ENSEMBLE_CONFIG, "pipeline", 1))

    assert pinned.fields[0] == Field("name", "pipeline")
    assert pinned.without("name", "version_policy") == parse(ENSEMBLE_CONFIG)


def test_pinning_renders_a_readable_canonical_layout() -> None:
    text = ('backend: "onnxruntime" instance_group [ { kind: KIND_GPU count: 1 } ]\n'
            "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ -1, 3 ] }, "
            "{ name: \"y\" data_type: TYPE_INT64 dims: 1 } ] dynamic_batching { }")

    assert pin(text, "m", 3).splitlines()[6:] == [
        'backend: "onnxruntime"',
        "instance_group [",
        "  {",
        "    kind: KIND_GPU",
        "    count: 1",
        "  }",
        "]",
        "input [",
        "  {",
        '    name: "x"',
        "    data_type: TYPE_FP32",
        "    dims: [ -1, 3 ]",
        "  },",
        "  {",
        '    name: "y"',
        "    data_type: TYPE_INT64",
        "    dims: 1",
        "  }",
        "]",
        "dynamic_batching {}",
    ]


@pytest.mark.parametrize(("text", "model"), REALISTIC)
def test_protobuf_reads_the_pinned_config_as_the_original_with_name_and_version_replaced(
    text: str, model: str
) -> None:
    model_config = pytest.importorskip("tritonclient.grpc.model_config_pb2")
    text_format = pytest.importorskip("google.protobuf.text_format")

    expected = text_format.Parse(text, model_config.ModelConfig())
    expected.name = model
    expected.ClearField("version_policy")
    expected.version_policy.specific.versions.append(5)

    assert text_format.Parse(pin(text, model, 5), model_config.ModelConfig()) == expected


def test_the_accepted_data_types_are_tritons_less_type_invalid() -> None:
    model_config = pytest.importorskip("tritonclient.grpc.model_config_pb2")

    assert set(model_config.DataType.keys()) - {"TYPE_INVALID"} == DATA_TYPES


def test_pinning_refuses_a_version_below_one_or_an_empty_model_name() -> None:
    with pytest.raises(ValueError, match="version"):
        pin(MINIMAL, "m", 0)
    with pytest.raises(ValueError, match="version"):
        pin(MINIMAL, "m", True)
    with pytest.raises(ValueError, match="model name"):
        pin(MINIMAL, "", 1)


def test_pinning_a_config_that_does_not_parse_raises_the_syntax_error() -> None:
    with pytest.raises(ConfigPbtxtError, match="line 1: unbalanced"):
        pin('backend: "python" input [ {', "m", 1)


# -------------------------------------------------------------------------- the rules
def test_a_name_other_than_the_models_is_refused() -> None:
    error = _rejection('name: "other"\nbackend: "python"\n')

    assert str(error) == "config.pbtxt: 'name' is \"other\" but the model is \"toy-lm\""
    assert error.rule == "'name' must be absent or the model's name"


def test_a_name_that_is_not_a_string_is_refused() -> None:
    assert "'name' must be a string" in str(_rejection('name: toy_lm backend: "python"'))


def test_a_field_that_takes_one_value_set_twice_is_refused() -> None:
    error = _rejection('name: "toy-lm" name: "toy-lm" backend: "python"')

    assert str(error) == "config.pbtxt: 'name' is set 2 times"


def test_a_config_with_neither_backend_nor_platform_is_refused() -> None:
    error = _rejection('name: "toy-lm"\nmax_batch_size: 1\n')

    assert str(error) == "config.pbtxt: neither 'backend' nor 'platform' is set"


def test_a_config_with_both_backend_and_platform_is_refused() -> None:
    error = _rejection('backend: "onnxruntime" platform: "onnxruntime_onnx"')

    assert "both 'backend' and 'platform' are set" in str(error)


@pytest.mark.parametrize("value", ['""', '"  "', "PYTHON", "1", "{ }", '[ "python" ]'])
def test_a_backend_that_is_not_a_non_empty_string_is_refused(value: str) -> None:
    error = _rejection(f"backend: {value}" if "{" not in value else f"backend {value}")

    assert "'backend' must be a non-empty string" in str(error)


@pytest.mark.parametrize("value", ["-1", "1.5", '"8"', "2147483648", "true"])
def test_a_max_batch_size_that_is_not_a_non_negative_integer_is_refused(value: str) -> None:
    error = _rejection(f"{MINIMAL}max_batch_size: {value}\n")

    assert "'max_batch_size' is" in str(error)
    assert "non-negative integer" in str(error)


def test_a_max_batch_size_of_zero_is_accepted() -> None:
    check(f"{MINIMAL}max_batch_size: 0\n", "toy-lm")


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("data_type: TYPE_FP32 dims: [ 1 ]", "'input[0].name' is missing"),
        ('name: "x" dims: [ 1 ]', "'input[0].data_type' is missing"),
        ('name: "x" data_type: TYPE_FP32', "'input[0].dims' is missing"),
        ('name: "" data_type: TYPE_FP32 dims: [ 1 ]', "'input[0].name' must be a non-empty"),
        ('name: "x" data_type: TYPE_FLOAT dims: [ 1 ]', "'input[0].data_type' is TYPE_FLOAT"),
        ('name: "x" data_type: "TYPE_FP32" dims: [ 1 ]', "'input[0].data_type' is \"TYPE_FP32\""),
        ('name: "x" data_type: 11 dims: [ 1 ]', "'input[0].data_type' is 11"),
        ('name: "x" data_type: TYPE_FP32 dims: [ -2 ]', "'input[0].dims' holds -2"),
        ('name: "x" data_type: TYPE_FP32 dims: [ 1.5 ]', "'input[0].dims' holds 1.5"),
        ('name: "x" data_type: TYPE_FP32 dims: [ "3" ]', "'input[0].dims' holds \"3\""),
    ],
)
def test_an_input_without_name_data_type_or_integer_dims_is_refused(
    entry: str, problem: str
) -> None:
    error = _rejection(_io(entry))

    assert problem in str(error)
    assert "TYPE_*" in (error.rule or "")


def test_the_data_type_message_lists_what_is_accepted() -> None:
    error = _rejection(_io('name: "x" data_type: TYPE_FLOAT dims: [ 1 ]'))

    assert "TYPE_FP32" in str(error)
    assert "TYPE_BF16" in str(error)


def test_the_second_output_is_named_when_it_is_the_bad_one() -> None:
    text = (f'{MINIMAL}output {{ name: "a" data_type: TYPE_FP32 dims: 1 }}\n'
            'output { name: "b" data_type: TYPE_FP32 }\n')

    assert "'output[1].dims' is missing" in str(_rejection(text))


def test_an_output_that_is_not_a_message_is_refused() -> None:
    assert "'output[0]' must be a message" in str(_rejection(f'{MINIMAL}output: "logits"'))


def test_dims_written_as_repeated_fields_are_accepted() -> None:
    check(_io('name: "x" data_type: TYPE_FP32 dims: -1 dims: 3'), "toy-lm")


def test_model_repository_agents_are_refused_with_the_reason() -> None:
    text = (f"{MINIMAL}model_repository_agents {{ agents [ {{ name: \"checksum\" "
            "parameters { key: \"MD5:model.onnx\" value: \"abc\" } } ] }\n")

    error = _rejection(text)

    assert "'model_repository_agents' is not accepted" in str(error)
    assert "fetches model files" in str(error)
    assert error.rule == "'model_repository_agents' must not be set"


@pytest.mark.parametrize(
    "path",
    [
        "/opt/conda/envs/py310.tar.gz",
        "env.tar.gz",
        "$$TRITON_MODEL_DIRECTORY/../other-model/env.tar.gz",
        "$$TRITON_MODEL_DIRECTORY/1/..\\\\..\\\\x",
        "$$TRITON_MODEL_DIRECTORY/",
        "$$TRITON_MODEL_DIRECTORYX/env.tar.gz",
        "gs://bucket/env.tar.gz",
    ],
)
def test_an_execution_env_path_outside_the_model_directory_is_refused(path: str) -> None:
    text = (f'{MINIMAL}parameters {{ key: "EXECUTION_ENV_PATH" '
            f'value: {{ string_value: "{path}" }} }}\n')

    error = _rejection(text)

    assert "EXECUTION_ENV_PATH is" in str(error)
    assert "outside the model directory" in str(error)
    assert error.rule == "EXECUTION_ENV_PATH must be a path under $$TRITON_MODEL_DIRECTORY/"


def test_an_execution_env_path_inside_the_model_directory_is_accepted() -> None:
    text = (f'{MINIMAL}parameters [ {{ key: "OTHER" value {{ string_value: "/anything" }} }}, '
            '{ key: "EXECUTION_ENV_PATH" value { string_value: '
            '"$$TRITON_MODEL_DIRECTORY/envs/py311.tar.gz" } } ]\n')

    check(text, "toy-lm")


def test_an_execution_env_path_without_a_string_value_is_refused() -> None:
    text = f'{MINIMAL}parameters {{ key: "EXECUTION_ENV_PATH" value {{ }} }}\n'

    assert "needs one 'value { string_value }'" in str(_rejection(text))


def test_any_version_policy_is_accepted_because_pinning_replaces_it() -> None:
    check(f"{MINIMAL}version_policy: {{ all: {{}} }} version_policy: 3\n", "toy-lm")


def test_a_rule_error_is_a_permanent_error_on_config_pbtxt() -> None:
    error = _rejection('name: "other" backend: "python"')

    assert isinstance(error, PermanentError)
    assert not error.retry
    assert error.field == "config.pbtxt"
    assert error.line is None
    assert error.as_fields()["field"] == "config.pbtxt"


def test_a_long_or_odd_name_is_quoted_and_clipped_in_the_message() -> None:
    error = _rejection(f'name: "{"x" * 5000}\\n\\001" backend: "python"')

    assert len(str(error)) < 300
    assert "\n" not in str(error)


# ---------------------------------------------------------------------- syntax errors
def test_an_unclosed_brace_is_reported_at_the_line_that_opened_it() -> None:
    text = 'backend: "python"\n\n\n\n\n\ndynamic_batching {\n  max_queue_delay_microseconds: 1\n'

    error = _syntax_error(text)

    assert str(error) == "config.pbtxt line 7: unbalanced '{'"
    assert error.line == 7
    assert error.field == "config.pbtxt"
    assert error.rule == "must be protobuf text format"


def test_an_unclosed_list_is_reported_at_the_line_that_opened_it() -> None:
    assert str(_syntax_error('backend: "python"\ninput [\n { }')) == (
        "config.pbtxt line 2: unbalanced '['")


def test_a_stray_closing_brace_is_reported_at_its_line() -> None:
    assert str(_syntax_error('backend: "python"\n}\n')) == "config.pbtxt line 2: unbalanced '}'"


def test_a_bracket_closing_the_wrong_opener_names_both_lines() -> None:
    assert str(_syntax_error('input [\n  { name: "x"\n]\n')) == (
        "config.pbtxt line 3: ']' does not close the '{' of line 2")


def test_an_unterminated_string_is_reported_at_its_line() -> None:
    assert str(_syntax_error('backend: "python"\nname: "toy-lm\n')) == (
        "config.pbtxt line 2: unterminated string")


def test_a_nul_byte_is_refused_where_it_is() -> None:
    assert str(_syntax_error('backend: "python"\n\x00')) == (
        "config.pbtxt line 2: unexpected character '\\x00'")


def test_a_lone_surrogate_in_a_string_is_refused_not_crashed_on() -> None:
    assert str(_syntax_error('name: "toy\udcff"')) == (
        "config.pbtxt line 1: string is not valid UTF-8")


def test_a_lone_surrogate_outside_a_string_is_refused_and_the_message_is_encodable() -> None:
    error = _syntax_error("backend: \ud800")

    assert "unexpected character '\\ud800'" in str(error)
    str(error).encode("utf-8")


def test_a_lone_surrogate_in_a_comment_is_harmless() -> None:
    assert parse("# caf\udce9\nbackend: \"python\"") == parse('backend: "python"')


def test_escapes_that_do_not_make_utf8_are_refused() -> None:
    assert "not valid UTF-8" in str(_syntax_error(r'name: "\377"'))
    assert "invalid escape" in str(_syntax_error(r'name: "\q"'))
    assert "invalid escape" in str(_syntax_error(r'name: "\ud800"'))
    assert "invalid escape" in str(_syntax_error(r'name: "\777"'))


def test_text_over_the_size_limit_is_refused_before_it_is_read() -> None:
    error = _syntax_error("#" * (MAX_BYTES + 1))

    assert str(error) == "config.pbtxt: larger than 65,536 bytes"
    assert error.rule == "must be at most 65,536 bytes"


def test_the_size_limit_counts_utf8_bytes_not_characters() -> None:
    with pytest.raises(ConfigPbtxtError, match="larger than"):
        parse("#" + "é" * (MAX_BYTES // 2))


def test_nesting_deeper_than_the_limit_is_refused() -> None:
    deep = "".join(f"a{i} {{ " for i in range(MAX_DEPTH + 1)) + "} " * (MAX_DEPTH + 1)

    error = _syntax_error(deep)

    assert "nested deeper than 32 levels" in str(error)
    assert error.rule == "must nest at most 32 levels"


def test_nesting_up_to_the_limit_is_accepted() -> None:
    parse("".join(f"a{i} {{ " for i in range(MAX_DEPTH)) + "} " * MAX_DEPTH)


def test_nested_lists_count_towards_the_depth_limit() -> None:
    text = "".join(f"a{i} [ {{ " for i in range(MAX_DEPTH // 2)) + "x {}" + " } ]" * 16

    assert "nested deeper" in str(_syntax_error(text))


def test_too_many_tokens_are_refused() -> None:
    error = _syntax_error("dims: 1\n" * (MAX_TOKENS // 3 + 1))

    assert "more than 10,000 tokens" in str(error)
    assert error.rule == "must have at most 10,000 tokens"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("max_batch_size 8", "line 1: expected ':' after 'max_batch_size', found '8'"),
        ("dims: [ 1, 2, ]", "expected a value, found ']'"),
        ("dims: [ 1 2 ]", "expected ',' or ']', found '2'"),
        ("dims: [ [ 1 ] ]", "expected a value, found '['"),
        ("x {}\ndims [ 1, 2 ]", "line 2: expected ':' after 'dims': a list of values needs one"),
        ("x: [ 1, { } ]", "a list mixes messages and values"),
        ("x: 1.2.3", "invalid number '1.2.3'"),
        ("x: 12abc", "invalid number '12abc'"),
        ("x: 08", "invalid number '08'"),
        ("x: 99999999999999999999", "does not fit in 64 bits"),
        ("x: -9223372036854775809", "does not fit in 64 bits"),
        ("x: 1e999", "out of range"),
        ("x: - 1", "unexpected character '-'"),
        ("x: -foo", "unexpected character '-'"),
        ("x:", "expected a value, found the end of the file"),
        (": 1", "expected a field name, found ':'"),
        ('"name": 1', "expected a field name, found a string"),
        ("[extension]: 1", "expected a field name, found '['"),
        ("x < y: 1 >", "unexpected character '<'"),
    ],
)
def test_malformed_text_is_refused_with_the_line_and_what_was_found(
    text: str, problem: str
) -> None:
    assert problem in str(_syntax_error(text))


# --------------------------------------------------------------------------- parsing
def test_the_text_format_forms_triton_configs_use_are_read() -> None:
    text = """
        # comment
        s: "a\\"b\\n\\t\\101\\x42\\u00e9\\U0001F600" 'c' "d"   # adjacent literals join
        i: -1 h: 0x1F o: 017 f: 1.5e-3 g: .5 k: 2f nh: -0x10 no: -010 nf: -.5
        e: KIND_GPU, b: true;
        m: { x: 1 } n { }
        l: [ ] v: [ -1, 2 ]
        ms [ { a: 1 }, { a: 2 } ]
    """

    assert parse(text) == Message((
        Field("s", 'a"b\n\tABé😀cd'),
        Field("i", -1), Field("h", 31), Field("o", 15), Field("f", 0.0015),
        Field("g", 0.5), Field("k", 2.0), Field("nh", -16), Field("no", -8), Field("nf", -0.5),
        Field("e", Symbol("KIND_GPU")), Field("b", Symbol("true")),
        Field("m", Message((Field("x", 1),))), Field("n", Message()),
        Field("l", ()), Field("v", (-1, 2)),
        Field("ms", (Message((Field("a", 1),)), Message((Field("a", 2),)))),
    ))


def test_fields_remember_the_line_they_were_read_from() -> None:
    assert [f.line for f in parse('a: 1\n\n# c\nb {\n c: 2 }').fields] == [1, 4]


def test_an_empty_config_parses_to_an_empty_message() -> None:
    assert parse("  # nothing\n") == Message()
    assert render(Message()) == ""


def test_entries_read_a_repeated_field_however_it_is_written() -> None:
    assert parse("d: 1 d: [ 2, 3 ] e: 4 d: 5").entries("d") == [1, 2, 3, 5]


def test_render_escapes_what_cannot_stand_in_a_string() -> None:
    assert render(Message((Field("s", 'q"\\\n\r\t\x00\x7fé'),))) == (
        's: "q\\"\\\\\\n\\r\\t\\000\\177é"\n')


def test_render_refuses_a_list_that_mixes_messages_and_values() -> None:
    with pytest.raises(ValueError, match="mixes"):
        render(Message((Field("x", (1, Message())),)))


# ------------------------------------------------------------------------- properties
_IDENTIFIERS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)
_FIELD_NAMES = st.one_of(
    st.sampled_from(["name", "version_policy", "input", "dims", "backend", "parameters"]),
    _IDENTIFIERS,
)
_STRINGS = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
_SCALARS: st.SearchStrategy[Scalar] = st.one_of(
    _STRINGS,
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    _IDENTIFIERS.map(Symbol),
)
_FLAT_VALUES: st.SearchStrategy[Value] = st.one_of(
    _SCALARS, st.lists(_SCALARS, max_size=4).map(tuple)
)


def _messages_of(values: st.SearchStrategy[Value]) -> st.SearchStrategy[Message]:
    fields = st.builds(Field, _FIELD_NAMES, values)
    return st.lists(fields, max_size=5).map(lambda found: Message(tuple(found)))


def _nested(children: st.SearchStrategy[Message]) -> st.SearchStrategy[Message]:
    lists: st.SearchStrategy[Value] = st.lists(children, min_size=1, max_size=3).map(tuple)
    return _messages_of(st.one_of(_FLAT_VALUES, children, lists))


CONFIGS = st.recursive(_messages_of(_FLAT_VALUES), _nested, max_leaves=25)
MODELS = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=20)
VERSIONS = st.integers(1, 2**63 - 1)


def _noisy_string(text: str, rnd: random.Random) -> str:
    """``text`` as a literal protobuf also reads: escapes of every kind, either quote,
    split into adjacent literals."""
    quote = rnd.choice("\"'")
    out = [quote]
    for char in text:
        raw = char.encode("utf-8")
        form = rnd.randrange(5)
        if char in "\\\"'\n" or form == 0:
            out.append("".join(f"\\{byte:03o}" for byte in raw))
        elif form == 1:
            out.append("".join(f"\\x{byte:02x}" for byte in raw))
        elif form == 2:
            out.append(f"\\U{ord(char):08x}")
        else:
            out.append(char)
        if rnd.random() < 0.1:
            out.append(f"{quote} {quote}")
    return "".join(out) + quote


def _noisy_scalar(value: Scalar, rnd: random.Random) -> str:
    if isinstance(value, str):
        return _noisy_string(value, rnd)
    if isinstance(value, Symbol):
        return value.name
    if isinstance(value, int) and value > 0 and rnd.random() < 0.3:
        return rnd.choice([hex(value), "0" + oct(value)[2:]])
    return repr(value)


def _noisy(message: Message, rnd: random.Random) -> str:
    """``message`` written as people write it: optional colons and separators,
    comments, odd whitespace, repeated fields and lists on one line or several."""

    def gap() -> str:
        return rnd.choice([" ", "\n", "\t", "  # note {\n", "\r\n", " \f"])

    parts: list[str] = []
    for f in message.fields:
        colon = rnd.choice([":", ""])
        parts.append(f.name + gap())
        value = f.value
        if isinstance(value, Message):
            parts.append(f"{colon}{{{gap()}{_noisy(value, rnd)}{gap()}}}")
        elif isinstance(value, tuple):
            items = [_noisy_item(item, rnd) for item in value]
            if not value or not isinstance(value[0], Message):
                colon = ":"
            parts.append(f"{colon}[{gap()}{(',' + gap()).join(items)}{gap()}]")
        else:
            parts.append(f":{gap()}{_noisy_scalar(value, rnd)}")
        parts.append(rnd.choice(["", ",", ";"]) + gap())
    return "".join(parts)


def _noisy_item(item: Item, rnd: random.Random) -> str:
    if isinstance(item, Message):
        return "{" + _noisy(item, rnd) + "}"
    return _noisy_scalar(item, rnd)


@given(CONFIGS)
def test_rendered_text_parses_back_to_the_same_tree(config: Message) -> None:
    assert parse(render(config)) == config


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(CONFIGS, st.randoms(use_true_random=False))
def test_text_written_in_any_accepted_layout_parses_to_the_same_tree(
    config: Message, rnd: random.Random
) -> None:
    assert parse(_noisy(config, rnd)) == config


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(CONFIGS, st.randoms(use_true_random=False), MODELS, VERSIONS)
def test_pinning_changes_only_the_name_and_the_version_policy(
    config: Message, rnd: random.Random, model: str, version: int
) -> None:
    text = _noisy(config, rnd)

    assert parse(pin(text, model, version)) == pin_message(parse(text), model, version)


@given(CONFIGS, MODELS, VERSIONS)
def test_pinning_twice_gives_the_same_text(config: Message, model: str, version: int) -> None:
    once = pin(render(config), model, version)

    assert pin(once, model, version) == once


_PBTXT_ALPHABET = [*'{}[]:,;-."\'#\\\n\t abcxyzE01789_', "\x00", "\udc80", "é"]


@given(st.one_of(st.text(max_size=200), st.text(_PBTXT_ALPHABET, max_size=200)))
def test_any_text_is_read_or_refused_with_a_config_error(text: str) -> None:
    try:
        check(text, "toy-lm")
    except ConfigPbtxtError as error:
        str(error).encode("utf-8")


@given(st.sampled_from([PYTHON_CONFIG, ONNX_CONFIG, ENSEMBLE_CONFIG]), st.data())
def test_a_damaged_realistic_config_is_read_or_refused_with_a_config_error(
    text: str, data: st.DataObject
) -> None:
    position = data.draw(st.integers(0, len(text)))
    cut = data.draw(st.integers(0, 3))
    insert = data.draw(st.text(_PBTXT_ALPHABET, max_size=3))
    damaged = text[:position] + insert + text[position + cut:]
    try:
        check(damaged, "toy-lm")
    except ConfigPbtxtError as error:
        str(error).encode("utf-8")


@settings(max_examples=30)
@given(st.sampled_from(REALISTIC), st.randoms(use_true_random=False))
def test_protobuf_agrees_with_the_parser_on_any_layout_of_a_realistic_config(
    case: object, rnd: random.Random
) -> None:
    model_config = pytest.importorskip("tritonclient.grpc.model_config_pb2")
    text_format = pytest.importorskip("google.protobuf.text_format")
    text = case.values[0]  # type: ignore[attr-defined]
    noisy = _noisy(parse(text), rnd)

    assert parse(noisy) == parse(text)
    assert (text_format.Parse(noisy, model_config.ModelConfig())
            == text_format.Parse(text, model_config.ModelConfig()))
