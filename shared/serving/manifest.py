"""The deployment manifest (``deploy.yaml``), written last into a version directory.

::

    server: triton                 # triton | saxml; must match the path
    model: toy-lm                  # must match the path
    version: v2                    # must match the path
    deployment: toy-lm             # the Deployment that serves it (default: the model)
    accelerator:
      gpu: {type: nvidia-l4, count: 1}     # Triton; Saxml names a TPU type:
      # tpu: v5litepod-4
    replicas: {min: 1, max: 3}     # the autoscaler's bounds; rollouts start at min
    autoscaling: {metric: nv_inference_pending_request_count, target: 10}   # optional
    canary: {steps: [10, 50, 100], max_p99_ratio: 1.2}   # Triton, optional: overrides
                                   # serving.canary of the config for this upload
    files:                         # every artifact below the version directory
      - {path: config.pbtxt, md5: 3f1c...}          # hex or base64; or crc32c
      - {path: model.py, crc32c: AAAAAA==}
    saxml:                         # Saxml only
      model_path: saxml.server.lm.params.lm_cloud.LmCloudSpmd2B
      checkpoint: checkpoint       # a directory of the listed files
      replicas: 1
      env: {LIBTPU_INIT_ARGS: "--xla_tpu_enable_async_all_gather=true"}   # optional

A manifest is parsed here and nowhere else; every refusal names the field and the
rule. YAML anchors and aliases are refused (a few hundred bytes of aliases expand to
gigabytes).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from shared.config import CanaryPolicy, CanarySteps, format_validation_error
from shared.errors import PermanentError
from shared.jobspec.tpu import lookup
from shared.serving.convention import (
    MANIFEST_NAME,
    MODEL_PATTERN,
    UploadPath,
    check_relpath,
    version_number,
)

__all__ = ["MAX_MANIFEST_BYTES", "DeployManifest", "FileEntry", "ManifestError",
           "read_manifest"]

MAX_MANIFEST_BYTES = 64 * 1024
MAX_FILES = 1000
_GPU_TYPE = re.compile(r"^nvidia-[a-z0-9-]{1,40}$")
_METRIC = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]{0,127}$")
_SAX_MODEL_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,255}$")
_HEX = re.compile(r"^[0-9a-fA-F]+$")


class ManifestError(PermanentError):
    """A manifest that cannot be deployed; ``field`` and ``rule`` say why."""


def _digest(value: str, size: int, what: str) -> str:
    """A checksum as Cloud Storage reports it (base64 of the raw digest), from hex or
    base64."""
    text = value.strip()
    if len(text) == size * 2 and _HEX.match(text):
        return base64.b64encode(bytes.fromhex(text)).decode()
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise ValueError(f"{what} must be {size * 2} hex digits or the base64 of "
                         f"{size} bytes (as `gcloud storage hash` prints it)")
    return base64.b64encode(raw).decode()


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FileEntry(_Strict):
    """One artifact below the version directory, with its checksum."""

    path: Annotated[str, Field(max_length=512)]
    md5: str | None = None
    crc32c: str | None = None

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        try:
            check_relpath(value, field="path")
        except PermanentError as exc:
            raise ValueError(exc.message) from exc
        if value == MANIFEST_NAME:
            raise ValueError(f"the manifest {MANIFEST_NAME} is not an artifact")
        return value

    @field_validator("md5")
    @classmethod
    def _md5(cls, value: str | None) -> str | None:
        return None if value is None else _digest(value, 16, "md5")

    @field_validator("crc32c")
    @classmethod
    def _crc32c(cls, value: str | None) -> str | None:
        return None if value is None else _digest(value, 4, "crc32c")

    @model_validator(mode="after")
    def _checksum(self) -> FileEntry:
        if self.md5 is None and self.crc32c is None:
            raise ValueError("every file needs a checksum: md5 or crc32c")
        return self


class Gpu(_Strict):
    type: Annotated[str, Field(pattern=_GPU_TYPE.pattern)]
    count: Annotated[int, Field(ge=1, le=16)] = 1


class Accelerator(_Strict):
    gpu: Gpu | None = None
    tpu: str | None = None

    @field_validator("tpu")
    @classmethod
    def _tpu(cls, value: str | None) -> str | None:
        if value is None:
            return None

        try:
            return lookup(value).type
        except PermanentError as exc:
            raise ValueError(exc.message) from exc

    @model_validator(mode="after")
    def _one(self) -> Accelerator:
        if (self.gpu is None) == (self.tpu is None):
            raise ValueError("name exactly one of gpu or tpu")
        return self


class Replicas(_Strict):
    min: Annotated[int, Field(ge=1, le=100)] = 1
    max: Annotated[int, Field(ge=1, le=100)] = 1

    @model_validator(mode="after")
    def _order(self) -> Replicas:
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) is below min ({self.min})")
        return self


class Autoscaling(_Strict):
    # A Triton metric scraped by managed Prometheus (PodMonitoring), per pod.
    metric: Annotated[str, Field(pattern=_METRIC.pattern)] = "nv_inference_pending_request_count"
    target: Annotated[int, Field(ge=1, le=1_000_000)] = 10


_EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
_EnvValue = Annotated[str, StringConstraints(max_length=4096)]
# Set by the deployment for every model server (the cell's state), not by a version.
_RESERVED_ENV = frozenset({"SAX_ROOT"})


class Saxml(_Strict):
    model_path: Annotated[str, Field(pattern=_SAX_MODEL_PATH.pattern)]
    checkpoint: Annotated[str, Field(max_length=512)]
    replicas: Annotated[int, Field(ge=1, le=16)] = 1
    # The model servers' environment (XLA or libtpu flags, say): plain strings, as a
    # job request's, and never the deployment's own.
    env: Annotated[dict[_EnvName, _EnvValue], Field(max_length=32)] = Field(
        default_factory=dict)

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        reserved = sorted(_RESERVED_ENV & value.keys())
        if reserved:
            raise ValueError(f"{', '.join(reserved)} is set by the deployment, not by a "
                             f"version")
        return value

    @field_validator("checkpoint")
    @classmethod
    def _checkpoint(cls, value: str) -> str:
        try:
            return check_relpath(value, field="saxml.checkpoint")
        except PermanentError as exc:
            raise ValueError(exc.message) from exc


class CanaryOverride(_Strict):
    """A model's own canary SLO: any field of the config's ``serving.canary``."""

    steps: CanarySteps | None = None
    min_seconds: Annotated[float, Field(ge=0, le=86400)] | None = None
    min_requests: Annotated[int, Field(ge=1, le=10_000_000)] | None = None
    max_error_rate_increase: Annotated[float, Field(ge=0, le=1)] | None = None
    max_p99_ratio: Annotated[float, Field(ge=1, le=100)] | None = None
    p99_slack_ms: Annotated[float, Field(ge=0, le=600_000)] | None = None
    max_p99_ms: Annotated[float, Field(gt=0, le=600_000)] | None = None

    def over(self, defaults: CanaryPolicy) -> CanaryPolicy:
        """The policy for this upload: the config's, with what this section sets."""
        return defaults.model_copy(update=self.model_dump(exclude_none=True))


class DeployManifest(_Strict):
    """A validated manifest; see the module docstring for the format."""

    server: Literal["triton", "saxml"]
    model: Annotated[str, Field(pattern=MODEL_PATTERN.pattern)]
    version: str
    deployment: Annotated[str, Field(pattern=MODEL_PATTERN.pattern)] | None = None
    accelerator: Accelerator
    replicas: Replicas = Field(default_factory=Replicas)
    autoscaling: Autoscaling = Field(default_factory=Autoscaling)
    files: Annotated[tuple[FileEntry, ...], Field(min_length=1, max_length=MAX_FILES)]
    saxml: Saxml | None = None
    canary: CanaryOverride | None = None

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> str:
        text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
        if not isinstance(text, str):
            raise ValueError("version must be v<N> or <N>")
        try:
            version_number(text)
        except PermanentError as exc:
            raise ValueError(exc.message) from exc
        return text

    @property
    def target(self) -> str:
        """The Deployment (Triton) or Sax model family (Saxml) this version goes to."""
        return self.deployment or self.model

    @property
    def version_number(self) -> int:
        return version_number(self.version)


def _cross_check(manifest: DeployManifest) -> None:
    """Rules that tie fields together, each refusal naming the field to change."""
    paths = [f.path for f in manifest.files]
    if len(set(paths)) != len(paths):
        raise ManifestError(f"{MANIFEST_NAME}: files lists a path twice", field="files",
                            rule="each path once")
    if manifest.server == "triton":
        if manifest.accelerator.gpu is None:
            raise ManifestError(f"{MANIFEST_NAME}: a Triton deployment needs accelerator.gpu",
                                field="accelerator.gpu", rule="required for server: triton")
        if "config.pbtxt" not in paths:
            raise ManifestError(f"{MANIFEST_NAME}: a Triton model needs config.pbtxt in files",
                                field="files", rule="config.pbtxt is listed")
        if manifest.saxml is not None:
            raise ManifestError(f"{MANIFEST_NAME}: the saxml section is for server: saxml",
                                field="saxml", rule="only for server: saxml")
        return
    if manifest.canary is not None:
        raise ManifestError(f"{MANIFEST_NAME}: the canary section is for server: triton",
                            field="canary", rule="only for server: triton (a Saxml version "
                                                 "switches when its servers are ready)")
    if manifest.accelerator.tpu is None:
        raise ManifestError(f"{MANIFEST_NAME}: a Saxml deployment needs accelerator.tpu",
                            field="accelerator.tpu", rule="required for server: saxml")
    if manifest.saxml is None:
        raise ManifestError(f"{MANIFEST_NAME}: server: saxml needs the saxml section",
                            field="saxml", rule="required for server: saxml")
    prefix = manifest.saxml.checkpoint.rstrip("/") + "/"
    if not any(p.startswith(prefix) for p in paths):
        raise ManifestError(f"{MANIFEST_NAME}: no listed file is under the checkpoint "
                            f"{prefix!r}", field="saxml.checkpoint",
                            rule="a directory of listed files")


def _no_aliases(text: str) -> None:
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise ManifestError("the manifest uses YAML anchors or aliases",
                                field=MANIFEST_NAME, rule="no YAML anchors or aliases")


def read_manifest(data: bytes, upload: UploadPath) -> DeployManifest:
    """Parse and validate a manifest's bytes for the upload it was found at.

    Raises ManifestError naming the field and the rule.
    """
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"{MANIFEST_NAME} is {len(data):,} bytes",
                            field=MANIFEST_NAME, rule=f"at most {MAX_MANIFEST_BYTES:,} bytes")
    try:
        text = data.decode("utf-8")
        _no_aliases(text)
        document = yaml.safe_load(text)
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{MANIFEST_NAME} is not UTF-8", field=MANIFEST_NAME,
                            rule="UTF-8 YAML") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ManifestError(f"{MANIFEST_NAME} is not valid YAML{where}",
                            field=MANIFEST_NAME, rule="valid YAML") from exc
    if not isinstance(document, dict):
        raise ManifestError(f"{MANIFEST_NAME} must be a mapping", field=MANIFEST_NAME,
                            rule="a YAML mapping of the manifest's fields")
    try:
        manifest = DeployManifest.model_validate(document)
    except ValidationError as exc:
        message, field, rule = format_validation_error(exc)
        raise ManifestError(f"{MANIFEST_NAME}: {message}", field=field, rule=rule) from exc
    for name in ("server", "model"):
        if getattr(manifest, name) != getattr(upload, name):
            raise ManifestError(
                f"{MANIFEST_NAME}: {name} is {getattr(manifest, name)!r} but the manifest "
                f"is under {upload.version_prefix}", field=name,
                rule="must match the manifest's path")
    if manifest.version_number != version_number(upload.version):
        raise ManifestError(
            f"{MANIFEST_NAME}: version is {manifest.version!r} but the manifest is under "
            f"{upload.version_prefix}", field="version", rule="must match the manifest's path")
    _cross_check(manifest)
    return manifest
