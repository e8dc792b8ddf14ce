"""`accelops models upload`'s accelerator flags become the manifest's ``accelerator``, and a
flag that would be dropped is refused instead of ignored."""

from __future__ import annotations

import pytest

from shared.errors import PermanentError
from shared.serving.cli import accelerator


def test_a_gpu_type_gives_one_gpu_unless_a_count_is_given() -> None:
    assert accelerator("nvidia-l4", None, None) == {"gpu": {"type": "nvidia-l4", "count": 1}}
    assert accelerator("nvidia-l4", 4, None) == {"gpu": {"type": "nvidia-l4", "count": 4}}


def test_a_tpu_type_is_the_accelerator_and_no_flag_keeps_the_manifests() -> None:
    assert accelerator(None, None, "v5litepod-4") == {"tpu": "v5litepod-4"}
    assert accelerator(None, None, None) is None


def test_a_gpu_count_without_a_gpu_type_is_refused_naming_the_flag() -> None:
    with pytest.raises(PermanentError, match="--gpu-count needs --gpu") as raised:
        accelerator(None, 2, None)
    assert raised.value.field == "--gpu-count"


def test_a_gpu_and_a_tpu_together_are_refused() -> None:
    with pytest.raises(PermanentError, match="not both"):
        accelerator("nvidia-l4", None, "v5litepod-4")
