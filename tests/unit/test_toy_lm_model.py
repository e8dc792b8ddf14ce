"""The toy LM's Triton model files, run here with a fake ``triton_python_backend_utils``.

model.py runs in Triton's stub from a copied directory, so it carries its own copy of
the generation; these tests hold that copy to ``toy_lm.generate`` and check the
variants ``model_files`` produces (the files, as bytes, are what gets uploaded).
"""

from __future__ import annotations

import json
import sys
import time
import types
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox.inference import toy_lm
from sandbox.inference.toy_lm_model import BASE_MS_PER_TOKEN, model_files


class _Tensor:
    def __init__(self, name: str, value: Any) -> None:
        self.name, self.value = name, np.asarray(value)

    def as_numpy(self) -> Any:
        return self.value


class _Response:
    def __init__(self, output_tensors: list[_Tensor], error: Any = None) -> None:
        self.outputs = {tensor.name: tensor.value for tensor in output_tensors}
        self.error = error


class _Logger:
    lines: list[str] = []

    @classmethod
    def log_info(cls, message: str) -> None:
        cls.lines.append(message)


def _fake_backend_utils() -> types.ModuleType:
    module = types.ModuleType("triton_python_backend_utils")
    module.Tensor = _Tensor  # type: ignore[attr-defined]
    module.InferenceResponse = _Response  # type: ignore[attr-defined]
    module.TritonError = str  # type: ignore[attr-defined]
    module.Logger = _Logger  # type: ignore[attr-defined]
    module.get_input_tensor_by_name = (  # type: ignore[attr-defined]
        lambda request, name: request.get(name))
    return module


@pytest.fixture(autouse=True)
def backend_utils(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", _fake_backend_utils())
    _Logger.lines.clear()


def _load(source: bytes) -> types.ModuleType:
    """model.py as Triton's stub loads it: a module of its own, from the file's bytes."""
    module = types.ModuleType("toy_lm_uploaded_model")
    exec(compile(source, "model.py", "exec"), module.__dict__)
    return module


def _config(label: str = "v1") -> str:
    return json.dumps({"parameters": {"version_label": {"string_value": label}}})


@pytest.fixture
def model() -> types.ModuleType:
    return _load(model_files()["model.py"])


@pytest.mark.parametrize(("prompt", "max_tokens"), [
    ("hello world", None), ("hello world", 8), ("", 1), ("x", 1000), ("x", 0), ("x", -5),
    ("naïve café ☕", 3), ("  the quick\tbrown\nfox  ", 16),
])
def test_the_uploaded_model_writes_the_toy_lms_text(model: types.ModuleType, prompt: str,
                                                    max_tokens: int | None):
    expected = toy_lm.generate(prompt, max_tokens)
    assert model.generate(prompt, max_tokens) == (
        expected.text, expected.num_input_tokens, expected.num_output_tokens)


@given(prompt=st.text(max_size=200), max_tokens=st.none() | st.integers(-10, 300))
def test_any_prompt_gets_the_same_completion_from_model_and_toy_lm(prompt: str,
                                                                   max_tokens: int | None):
    model = _load(model_files()["model.py"])
    expected = toy_lm.generate(prompt, max_tokens)
    assert model.generate(prompt, max_tokens)[0] == expected.text


def test_a_batch_is_answered_request_by_request_with_text_and_token_counts(
        model: types.ModuleType):
    triton_model = model.TritonPythonModel()
    triton_model.initialize({"model_config": _config()})
    requests = [
        {"text_input": _Tensor("text_input", np.array([[b"hello world"]], dtype=np.object_))},
        {"text_input": _Tensor("text_input", np.array([[b"a"], [b"b c"]], dtype=np.object_)),
         "max_tokens": _Tensor("max_tokens", np.array([[2], [300]], dtype=np.int32))},
    ]
    first, second = triton_model.execute(requests)
    assert first.outputs["text_output"].tolist() == [
        [toy_lm.generate("hello world").text.encode()]]
    assert first.outputs["num_input_tokens"].tolist() == [[2]]
    assert first.outputs["num_output_tokens"].tolist() == [[16]]
    assert second.outputs["text_output"].tolist() == [
        [toy_lm.generate("a", 2).text.encode()], [toy_lm.generate("b c", 300).text.encode()]]
    assert second.outputs["num_output_tokens"].tolist() == [[2], [256]]


def test_mismatched_max_tokens_rows_fail_only_that_request(model: types.ModuleType):
    triton_model = model.TritonPythonModel()
    requests = [
        {"text_input": _Tensor("text_input", np.array([[b"a"], [b"b"]], dtype=np.object_)),
         "max_tokens": _Tensor("max_tokens", np.array([[2]], dtype=np.int32))},
        {"text_input": _Tensor("text_input", np.array([[b"ok"]], dtype=np.object_))},
    ]
    bad, good = triton_model.execute(requests)
    assert "max_tokens has 1 rows" in bad.error
    assert good.error is None
    assert good.outputs["text_output"].tolist() == [[toy_lm.generate("ok").text.encode()]]


def test_the_broken_variant_refuses_to_initialize():
    broken = _load(model_files(broken=True)["model.py"])
    with pytest.raises(RuntimeError, match="broken on purpose"):
        broken.TritonPythonModel().initialize({"model_config": _config()})


def test_the_version_label_shows_in_config_and_log_but_not_in_the_text():
    files = model_files(version_label="v7")
    assert b'string_value: "v7"' in files["config.pbtxt"]
    labelled = _load(files["model.py"])
    labelled.TritonPythonModel().initialize({"model_config": _config("v7")})
    assert _Logger.lines == ["toy-lm v7 loaded (config version_label=v7)"]
    assert labelled.generate("hello", 4) == _load(model_files()["model.py"]).generate("hello", 4)


def test_the_files_are_a_config_and_a_model_below_the_version_directory():
    files = model_files()
    assert sorted(files) == ["config.pbtxt", "model.py"]
    assert b'backend: "python"' in files["config.pbtxt"]
    assert b"\nBROKEN = False\n" in files["model.py"]


@pytest.mark.parametrize("label", ["", 'v1"\nimport os', "a/b", "x" * 33])
def test_a_version_label_that_could_break_the_files_is_refused(label: str):
    with pytest.raises(ValueError, match="version label"):
        model_files(version_label=label)


def test_the_slow_variant_answers_the_same_text_later_by_its_factor():
    def timed(files: dict[str, bytes]) -> tuple[list[Any], float]:
        triton_model = _load(files["model.py"]).TritonPythonModel()
        request = {"text_input": _Tensor("text_input",
                                         np.array([[b"hello"]], dtype=np.object_))}
        started = time.perf_counter()
        [response] = triton_model.execute([request])
        return response.outputs["text_output"].tolist(), time.perf_counter() - started

    text, _ = timed(model_files())
    slow_text, slow_seconds = timed(model_files(slowdown=3))
    assert slow_text == text
    assert slow_seconds >= 3 * BASE_MS_PER_TOKEN * 16 / 1000  # 16 tokens by default
    with pytest.raises(ValueError, match="must be positive"):
        model_files(slowdown=0)
