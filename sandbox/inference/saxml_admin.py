"""The Sax admin behind the proxy stand-in: publish, update, unpublish, list, load.

The Saxml HTTP proxy (``saxml-on-gke/httpserver/http_server.py`` in
GoogleCloudPlatform/ai-on-gke) turns each request into one call of Sax's Python
client, which asks the cell's admin server. What the admin does is what a rollout
sees, so this models the admin (``saxml/admin/mgr.go``, ``validator.go``,
``state.go`` and ``saxml/common/naming.go`` in google/saxml):

- **publish** validates the name (``/sax/<cell>/<model>``, names ``^[a-z]+[a-z0-9-_]*$``),
  the model path (``^[a-zA-Z]+[a-zA-Z0-9_.-]*$``), the checkpoint
  (``^(/|\\d|\\w|_|\\.|-|%|:|=)+$``) and replicas (>= 0); a name already published is
  ``AlreadyExists`` whatever its spec.
- **update** may change only the replicas: another model path or checkpoint is
  ``invalid model update: ... can't be changed`` (InvalidArgument); an unknown
  name is NotFound. **unpublish** of an unknown name is NotFound.
- **listcell** (``sax.ListDetail``) reports ``max_replicas`` (requested) and
  ``active_replicas`` = the number of model servers *assigned* to the model
  (``PublishedModel.modelet_addresses``, filled from the admin's assignment).
  A server counts from the moment it is assigned, while it loads, and after its
  load *failed*: the admin keeps a failed load assigned so that ``GetStatus`` can
  show the failure, and that failure reason never reaches ``ListDetail``. So
  listcell cannot tell loading from loaded from broken; neither can anything else
  the proxy offers.
- **generate** reaches a model server only once it has loaded the model. Before
  that, and for ever after a failed load, the model server answers NotFound
  (``<model> is still loading or already unloaded``) and the Go client retries
  NotFound and Unavailable with no deadline (``saxml/common/retrier.go``), so the
  real proxy never answers: a caller learns "not servable" from its own timeout.

The stand-in assigns every requested replica at once (the admin does it on its
next refresh, within 10 s, if idle model servers can serve the model path; here
there are always enough). Not simulated: model servers joining and leaving the cell.
The stand-in's servers are not the cluster's model-server pods, so a published model
keeps answering while its pods crash, are lost or are created again; whether a
version's servers run is read from the cluster (``reconcile_models`` does), never
from the proxy. A load takes ``load_seconds`` of real time (default 1 s)
and then succeeds or fails by the checkpoint rule below, once; ``/generate`` for a
published model waits up to ``pending_seconds`` for a servable replica and then
answers 400 with the model server's NotFound text (a guess at what the real proxy
would say if it ever gave up), or with the client's "unable to find server"
Unavailable text for a model with 0 replicas.

**Checkpoint rule** (read when the load finishes, like a model server):

- ``None`` (Sax's test mode, random weights) always loads;
- ``gs://BUCKET/PATH`` loads when at least one object exists under ``PATH/``,
  read from the Cloud Storage endpoint in ``STORAGE_EMULATOR_HOST`` (without it a
  ``gs://`` checkpoint cannot be read and fails);
- an absolute local path loads when it is a non-empty directory;
- and in every case a checkpoint that holds an object (file) named ``BROKEN``
  fails: it exists but cannot be loaded. A test or demo breaks a version by
  uploading ``PATH/BROKEN``, with the same tools it uploads the checkpoint.

The failure reason is logged (WARNING), as the model server logs it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BROKEN_MARKER", "NO_CHECKPOINT", "AdminError", "BadRequestError", "ModelSpec",
           "SaxmlAdmin", "UnknownModelError", "check_full_name", "checkpoint_problem", "params",
           "parse_spec"]

log = logging.getLogger("sandbox.inference.saxml")

BROKEN_MARKER = "BROKEN"
NO_CHECKPOINT = "None"
_NAME = re.compile(r"^[a-z]+[a-z0-9-_]*$")
_MODEL_PATH = re.compile(r"^[a-zA-Z]+[a-zA-Z0-9_.-]*$")
_CHECKPOINT = re.compile(r"^(/|\d|\w|_|\.|-|%|:|=)+$", re.ASCII)  # Go's \w is ASCII
_STORAGE_TIMEOUT = 5.0


class BadRequestError(ValueError):
    """The request cannot be served; the message goes back as 400 ``{"Error": ...}``."""


class UnknownModelError(BadRequestError):
    """The model is not published (or its path is not a Sax model path)."""


class AdminError(BadRequestError):
    """What the Sax admin answered, in the words Go prints for it."""


def _status(code: str) -> str:
    # How Go prints Sax's canonical errors (status.Error(code, code.String())).
    return f"rpc error: code = {code} desc = {code}"


def _invalid(message: str) -> AdminError:
    return AdminError(f"{message}: {_status('InvalidArgument')}")


def _q(text: str) -> str:
    return json.dumps(text)  # close enough to Go's %q for the names seen here


def check_full_name(name: str) -> str:
    """``name`` if it is ``/sax/<cell>/<model>``; AdminError in naming.go's words."""
    cell_path, slash, model = name.rpartition("/")
    if not slash:
        raise _invalid(f"model full name {_q(name)} should have the form "
                       "/sax/<cell name>/<model name>")
    if not _NAME.match(model):
        raise _invalid(f"model name {_q(model)} must match {_q(_NAME.pattern)}")
    parts = cell_path.split("/")
    if len(parts) != 3 or parts[:2] != ["", "sax"]:
        raise _invalid(f"cell full name {_q(cell_path)} should have the form /sax/<cell name>")
    if not _NAME.match(parts[2]):
        raise _invalid(f"cell name {_q(parts[2])} must match {_q(_NAME.pattern)}")
    return name


@dataclass(frozen=True)
class ModelSpec:
    model: str
    model_path: str
    checkpoint: str
    replicas: int


def params(body: bytes, keys: tuple[str, ...], usage: str) -> dict[str, Any]:
    """The JSON object of an admin request, with exactly ``keys`` (the proxy counts them)."""
    try:
        value = json.loads(body or b"null")
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BadRequestError(f"body is not valid JSON: {error}") from None
    if not isinstance(value, dict) or len(value) != len(keys):
        raise BadRequestError(usage)
    for key in keys:
        if key not in value:
            raise BadRequestError(repr(key))  # str(KeyError(key)), as the proxy answers
        if key != "replicas" and not isinstance(value[key], str):
            raise BadRequestError(f"{key} must be a string")
    return value


def parse_spec(body: bytes, verb: str) -> ModelSpec:
    """A ``/publish`` or ``/update`` body; BadRequestError in the proxy's words."""
    value = params(body, ("model", "model_path", "checkpoint", "replicas"),
                   f"Provide model, model path, checkpoint, and replica number for {verb}")
    try:
        replicas = int(value["replicas"])  # what the proxy does with it
    except (TypeError, ValueError) as error:
        raise BadRequestError(str(error)) from None
    return ModelSpec(value["model"], value["model_path"], value["checkpoint"], replicas)


# ---------------------------------------------------------------------------- checkpoints
def _storage_get(endpoint: str, path: str) -> dict[str, Any] | None:
    """A JSON API GET against the storage endpoint; None for 404."""
    try:
        with urllib.request.urlopen(endpoint.rstrip("/") + path,  # noqa: S310 (http only)
                                    timeout=_STORAGE_TIMEOUT) as response:
            answer: dict[str, Any] = json.load(response)
            return answer
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise


def _gcs_problem(checkpoint: str, endpoint: str | None) -> str | None:
    bucket, _, path = checkpoint[len("gs://"):].partition("/")
    if not endpoint:
        return f"cannot read {checkpoint}: STORAGE_EMULATOR_HOST is not set"
    prefix = path.rstrip("/") + "/" if path.strip("/") else ""
    quoted = urllib.parse.quote(bucket, safe="")
    try:
        marker = _storage_get(endpoint, f"/storage/v1/b/{quoted}/o/"
                                        f"{urllib.parse.quote(prefix + BROKEN_MARKER, safe='')}")
        listing = _storage_get(endpoint, f"/storage/v1/b/{quoted}/o?maxResults=1&prefix="
                                         f"{urllib.parse.quote(prefix, safe='')}")
    except (OSError, ValueError) as error:
        return f"cannot read {checkpoint}: {error}"
    if marker is not None:
        return f"checkpoint {checkpoint} cannot be loaded ({prefix}{BROKEN_MARKER} exists)"
    if not (listing or {}).get("items"):
        return f"checkpoint {checkpoint} not found"
    return None


def checkpoint_problem(checkpoint: str, storage_endpoint: str | None = None) -> str | None:
    """Why a model server could not load ``checkpoint``; None when it can (module rule)."""
    if checkpoint == NO_CHECKPOINT:
        return None
    if checkpoint.startswith("gs://"):
        return _gcs_problem(checkpoint, storage_endpoint)
    directory = Path(checkpoint)
    try:
        if not directory.is_absolute() or not directory.is_dir() or \
                not any(directory.iterdir()):
            return f"checkpoint {checkpoint} not found"
        if (directory / BROKEN_MARKER).exists():
            return f"checkpoint {checkpoint} cannot be loaded ({BROKEN_MARKER} exists)"
    except OSError as error:
        return f"cannot read {checkpoint}: {error}"
    return None


def _default_check(checkpoint: str) -> str | None:
    return checkpoint_problem(checkpoint, os.environ.get("STORAGE_EMULATOR_HOST"))


# ---------------------------------------------------------------------------- the admin
@dataclass
class _Published:
    spec: ModelSpec
    loads_at: float | None  # when the assigned replicas finish loading; None: no replica
    failure: str | None = None
    settled: bool = False  # the load has finished (failure says how)


class SaxmlAdmin:
    """The published models of every cell, for the life of the process."""

    def __init__(self, load_seconds: float = 1.0,
                 check: Callable[[str], str | None] = _default_check,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.load_seconds = load_seconds
        self._check = check
        self._clock = clock
        self._models: dict[str, _Published] = {}
        self._changed = threading.Condition()

    def preload(self, model: str, model_path: str, checkpoint: str = NO_CHECKPOINT) -> None:
        """Publish one replica that is already loaded (the models a target starts with)."""
        spec = ModelSpec(check_full_name(model), model_path, checkpoint, 1)
        with self._changed:
            self._models[model] = _Published(spec, self._clock(), settled=True)

    def publish(self, spec: ModelSpec) -> None:
        self._validate(spec)
        with self._changed:
            if spec.model in self._models:
                raise AdminError(f"model {spec.model} already exists: {_status('AlreadyExists')}")
            self._models[spec.model] = _Published(spec, self._load_time(spec.replicas))
            self._changed.notify_all()

    def update(self, spec: ModelSpec) -> None:
        self._validate(spec)
        with self._changed:
            entry = self._get(spec.model)
            for what, old, new in (("model path", entry.spec.model_path, spec.model_path),
                                   ("checkpoint path", entry.spec.checkpoint, spec.checkpoint)):
                if old != new:
                    raise _invalid(f"invalid model update: {what} can't be changed")
            if spec.replicas == 0:
                entry.loads_at, entry.settled, entry.failure = None, False, None
            elif entry.spec.replicas == 0:
                entry.loads_at = self._load_time(spec.replicas)
            entry.spec = spec
            self._changed.notify_all()

    def unpublish(self, model: str) -> None:
        check_full_name(model)
        with self._changed:
            self._get(model)
            del self._models[model]
            self._changed.notify_all()

    def list_detail(self, model: str) -> dict[str, Any]:
        """The proxy's ``/listcell`` answer for one model."""
        check_full_name(model)
        with self._changed:
            spec = self._get(model).spec
        return {"model": model, "model_path": spec.model_path, "checkpoint": spec.checkpoint,
                "max_replicas": spec.replicas, "active_replicas": spec.replicas}

    def list_all(self, cell: str) -> list[str]:
        """The proxy's ``/listall`` answer: the model names published in ``cell``."""
        parts = cell.split("/")
        if len(parts) != 3 or parts[:2] != ["", "sax"] or not _NAME.match(parts[2]):
            raise _invalid(f"cell full name {_q(cell)} should have the form /sax/<cell name>")
        with self._changed:
            return sorted(m for m in self._models if m.rpartition("/")[0] == cell)

    def await_servable(self, model: str, timeout: float) -> None:
        """Return once a replica of ``model`` serves; UnknownModelError if it is not
        published, AdminError if none serves within ``timeout`` seconds."""
        give_up = self._clock() + timeout
        while True:
            with self._changed:
                entry = self._models.get(model)
                if entry is None:
                    raise UnknownModelError(f"model {model} not found: {_status('NotFound')}")
                now = self._clock()
                due = entry.loads_at is not None and not entry.settled and now >= entry.loads_at
                if entry.settled and entry.failure is None and entry.spec.replicas > 0:
                    return
                if not due:
                    if now >= give_up:
                        raise self._not_servable(entry)
                    wake = give_up if entry.loads_at is None or entry.settled \
                        else min(give_up, entry.loads_at)
                    self._changed.wait(max(wake - now, 0.001))
                    continue
            self._finish_load(model, entry)

    def _finish_load(self, model: str, entry: _Published) -> None:
        failure = self._check(entry.spec.checkpoint)  # outside the lock: it may do I/O
        with self._changed:
            if self._models.get(model) is entry and not entry.settled:
                entry.settled, entry.failure = True, failure
                if failure is not None:
                    log.warning("Failed to load model %s: %s", model, failure)
                self._changed.notify_all()

    def _not_servable(self, entry: _Published) -> AdminError:
        model = entry.spec.model
        if entry.spec.replicas == 0:
            return AdminError(f"pick for model {model} unable to find server "
                              f"{_status('Unavailable')}")
        return AdminError(f"rpc error: code = NotFound desc = {model} is still loading or "
                          "already unloaded")

    def _validate(self, spec: ModelSpec) -> None:
        check_full_name(spec.model)
        if not _MODEL_PATH.match(spec.model_path):
            raise _invalid(f"model path {_q(spec.model_path)} must match "
                           f"{_q(_MODEL_PATH.pattern)}")
        if not _CHECKPOINT.match(spec.checkpoint):
            raise _invalid(f"checkpoint path {_q(spec.checkpoint)} must match "
                           f"{_q(_CHECKPOINT.pattern)}")
        if spec.replicas < 0:
            raise _invalid(f"number of replicas {spec.replicas} must be non-negative")

    def _get(self, model: str) -> _Published:
        entry = self._models.get(model)
        if entry is None:
            raise AdminError(f"model {model} not found: {_status('NotFound')}")
        return entry

    def _load_time(self, replicas: int) -> float | None:
        return self._clock() + self.load_seconds if replicas > 0 else None
