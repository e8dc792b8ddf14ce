"""The toy LM as the files of a Triton model: what a sandbox user uploads.

``model_files()`` gives the artifacts of one version the way the upload convention
lays them out below ``gs://BUCKET/models/triton/<model>/<version>/`` --
``config.pbtxt`` and ``model.py`` -- so demos and tests upload exactly what a user
would. A release snapshot puts ``model.py`` into ``<model>/<N>/`` and the config
beside it.

The files are the ones in this directory, read as bytes, with markers rewritten
(``BROKEN``, the version label, ``MS_PER_TOKEN``), so the variants are always the real
model and not a second copy that could drift: a *broken* variant raises in
``initialize`` (Triton refuses to load it; with ``--exit-on-error=true`` the server
exits), the version label shows in the server log and the model's config
(``parameters.version_label``) while the generated text stays the same for every
label, and a *slowdown* multiplies the time each output token takes (the same text,
answered later).
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["BASE_MS_PER_TOKEN", "CONFIG_NAME", "MODEL_NAME", "model_files"]

CONFIG_NAME = "config.pbtxt"
MODEL_NAME = "model.py"
_HERE = Path(__file__).resolve().parent
# A label lands inside a Python string literal and a pbtxt string: keep it plain.
_LABEL = re.compile(r"^[A-Za-z0-9._-]{1,32}$")


def _replace_once(text: str, old: str, new: str, what: str) -> str:
    if text.count(old) != 1:
        raise RuntimeError(f"{what} must contain {old!r} exactly once")
    return text.replace(old, new)


BASE_MS_PER_TOKEN = 2.0


def model_files(broken: bool = False, version_label: str = "v1",
                slowdown: float = 1.0) -> dict[str, bytes]:
    """Relative path (below the version directory) → content, for one upload.

    Raises ValueError for a label that is not 1-32 of ``[A-Za-z0-9._-]``, or a
    slowdown that is not positive.
    """
    if not slowdown > 0:
        raise ValueError(f"slowdown {slowdown!r} must be positive")
    if not _LABEL.match(version_label):
        raise ValueError(f"version label {version_label!r} must be 1-32 of [A-Za-z0-9._-]")
    config = (_HERE / CONFIG_NAME).read_text(encoding="utf-8")
    model = (_HERE / MODEL_NAME).read_text(encoding="utf-8")
    config = _replace_once(config, 'string_value: "v1"',
                           f'string_value: "{version_label}"', CONFIG_NAME)
    model = _replace_once(model, '\nVERSION_LABEL = "v1"\n',
                          f'\nVERSION_LABEL = "{version_label}"\n', MODEL_NAME)
    if broken:
        model = _replace_once(model, "\nBROKEN = False\n", "\nBROKEN = True\n", MODEL_NAME)
    if slowdown != 1.0:
        model = _replace_once(model, f"\nMS_PER_TOKEN = {BASE_MS_PER_TOKEN!r}\n",
                              f"\nMS_PER_TOKEN = {BASE_MS_PER_TOKEN * slowdown!r}\n",
                              MODEL_NAME)
    return {CONFIG_NAME: config.encode("utf-8"), MODEL_NAME: model.encode("utf-8")}
