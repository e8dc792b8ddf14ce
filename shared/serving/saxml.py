"""The Saxml HTTP proxy: publish, update, unpublish and observe Sax models.

The one module that talks to the proxy (``saxml-on-gke/httpserver/http_server.py``
in GoogleCloudPlatform/ai-on-gke), which turns each JSON request into one call of
Sax's client against the cell's admin server. Failures come back as an error text
(400 ``{"Error": ...}``; its FastAPI successor answers 500 ``{"detail": ...}``),
which carries the gRPC status of the admin's answer -- Go prints it as ``rpc error:
code = NotFound desc = ...``, the Python client as ``NOT_FOUND: ...``. The status
decides the domain error, in :func:`proxy_error` and nowhere else: Unavailable and
other passing states, timeouts, refused connections and 5xx without a status are
retried; InvalidArgument, and an error text without a status (the proxy's own checks
of the body), are permanent; a missing cell or admin server (FailedPrecondition) and an
answer that is not the proxy's (404, or its ``Invalid Request`` for a path it does not
serve) are deployment errors: retried, logged as errors, someone must fix them.

What "servable" means. ``/listcell`` answers ``active_replicas``, but the admin
counts model servers *assigned* to the model -- loading, loaded, or failed to load
(it keeps a failed load assigned) -- and no failure reason reaches it. Only a
generation tells: :meth:`SaxmlProxy.probe` asks ``/generate`` and waits
``probe_timeout`` seconds. Until a replica has loaded, and for ever after a failed
load, the proxy does not answer at all (Sax's client retries the model server's
NotFound with no deadline), so "no answer in time" means "not servable (yet)".
Loading and broken look the same from outside: a rollout gives up on a version by
its own deadline. ``error`` is set only for answers that waiting cannot change
(e.g. the model does not support ``lm.generate``).

Idempotency. Publishing a name already published with the same model path and
checkpoint succeeds; with other replicas it becomes an update (Sax lets an update
change only the replicas); with another model path or checkpoint it is a
:class:`SaxmlConflictError` -- a versioned name stands for one spec. Unpublishing a
name that is not published succeeds.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, replace
from typing import Any

import requests

from shared.errors import (
    AccelopsError,
    ConflictError,
    DeploymentError,
    NotFoundError,
    OperationInProgressError,
    PermanentError,
    PermissionDeniedError,
    RateLimitedError,
    UnavailableError,
)
from shared.names import dns_label, short_hash

__all__ = [
    "DEFAULT_PROBE_TIMEOUT",
    "InvalidSaxNameError",
    "Probe",
    "SaxmlConflictError",
    "SaxmlModel",
    "SaxmlProxy",
    "SaxmlRejectedError",
    "check_sax_model_name",
    "error_code",
    "parse_listcell",
    "proxy_error",
    "sax_cell_name",
    "sax_model_name",
]

DEFAULT_PROBE_TIMEOUT = 3.0
PROBE_QUERY = "ping"
# Sax's rule for cell and model names (saxml/common/naming.go).
_SAX_NAME = re.compile(r"^[a-z]+[a-z0-9-_]*$")
_VERSION = re.compile(r"^v?0*([0-9]{1,9})$")
_MODEL_STEM_MAX = 40
_GO_CODE = re.compile(r"code = ([A-Za-z]+) desc")
_ABSL_CODE = re.compile(r"\b([A-Z]+(?:_[A-Z]+)*)\b")
_CODES = ("Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
          "AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
          "Aborted", "OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss",
          "Unauthenticated")
_ABSL = {re.sub(r"(?<!^)([A-Z])", r"_\1", code).upper(): code for code in _CODES}
_ABSL["CANCELLED"] = "Canceled"
# Answers to a probe that waiting cannot change.
_FINAL_CODES = frozenset({"InvalidArgument", "PermissionDenied", "Unauthenticated",
                          "Unimplemented", "OutOfRange"})


class InvalidSaxNameError(PermanentError):
    """A Sax cell or model name that breaks Sax's naming rule."""


class SaxmlRejectedError(PermanentError):
    """The proxy or the Sax admin refused the request as invalid: retrying cannot help."""


class SaxmlConflictError(ConflictError):
    """The name is published with another model path or checkpoint."""


# ---------------------------------------------------------------------------- names
def sax_cell_name(cell: str) -> str:
    """``/sax/<cell>`` from ``cell`` or ``/sax/<cell>``; InvalidSaxNameError otherwise.

    A cell is validated, not sanitised: it names an admin server that exists, and a
    rewritten name would publish into a cell nobody serves.
    """
    name = cell.removeprefix("/sax/")
    if not _SAX_NAME.match(name):
        raise InvalidSaxNameError(f"Sax cell {cell!r} is not /sax/<cell> with a cell name "
                                  f"matching {_SAX_NAME.pattern}", field="cell",
                                  rule=_SAX_NAME.pattern)
    return f"/sax/{name}"


def sax_model_name(cell: str, model: str, version: str) -> str:
    """``/sax/<cell>/<model>-v<N>``: the Sax name one version is published under.

    ``v3`` and ``3`` are the same version (the upload convention's rule). The model is
    sanitised to a DNS label (which Sax's rule admits) of at most 40 characters; when
    sanitising changed the model or the version is not ``v<N>``, a short hash of the
    raw parts keeps two inputs that sanitise alike apart. Names always end in
    ``-v<N>`` (``-v-<label>`` for a version that is not a number), so a model name
    never runs into another's version.
    """
    cell_name = sax_cell_name(cell)
    stem = dns_label(model, _MODEL_STEM_MAX)
    if not stem or not stem[0].isalpha():
        stem = dns_label(f"m-{stem}", _MODEL_STEM_MAX)
    match = _VERSION.match(version)
    tail = f"v{int(match.group(1))}" if match else f"v-{dns_label(version, 20) or 'x'}"
    if stem != model or match is None:
        stem = f"{stem}-{short_hash(model, version)}"
    return check_sax_model_name(f"{cell_name}/{stem}-{tail}")


def check_sax_model_name(name: str) -> str:
    """``name`` if it is a valid ``/sax/<cell>/<model>``; InvalidSaxNameError otherwise."""
    parts = name.split("/")
    if len(parts) != 4 or parts[:2] != ["", "sax"] or not all(
            _SAX_NAME.match(part) for part in parts[2:]):
        raise InvalidSaxNameError(f"{name[:120]!r} is not a Sax model name /sax/<cell>/<model>"
                                  f" with names matching {_SAX_NAME.pattern}", field="model",
                                  rule=_SAX_NAME.pattern)
    return name


# ---------------------------------------------------------------------------- answers
@dataclass(frozen=True, slots=True)
class Probe:
    """What a generation through the proxy showed."""

    servable: bool
    #: What the proxy answered (or did not) when the model is not servable.
    detail: str | None = None
    #: Set when waiting cannot make it servable as published.
    error: str | None = None


@dataclass(frozen=True, slots=True)
class SaxmlModel:
    """One published model as ``/listcell`` reports it, with a probe's verdict."""

    name: str
    model_path: str
    checkpoint: str
    requested_replicas: int
    #: Model servers assigned by the admin: loading, loaded or failed (see module doc).
    active_replicas: int
    #: None when not probed.
    servable: bool | None = None
    detail: str | None = None
    error: str | None = None


def error_code(text: str) -> str | None:
    """The gRPC status named in an error text (``NotFound``...), None if there is none."""
    match = _GO_CODE.search(text)
    if match and match.group(1) in _CODES:
        return match.group(1)
    return next((_ABSL[word] for word in _ABSL_CODE.findall(text) if word in _ABSL), None)


def _integer(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UnavailableError(f"the Saxml proxy answered a non-integer {field}: {value!r}")
    return value


def parse_listcell(body: Any) -> SaxmlModel:
    """A ``/listcell`` answer; UnavailableError if it is not one (a proxy mid-upgrade)."""
    if not isinstance(body, dict):
        raise UnavailableError(f"the Saxml proxy answered {str(body)[:200]!r} to listcell")
    strings = {key: body.get(key) for key in ("model", "model_path", "checkpoint")}
    if not all(isinstance(value, str) for value in strings.values()):
        raise UnavailableError(f"the Saxml proxy's listcell answer lacks a field: {body!r}")
    return SaxmlModel(name=str(strings["model"]), model_path=str(strings["model_path"]),
                      checkpoint=str(strings["checkpoint"]),
                      requested_replicas=_integer(body.get("max_replicas"), "max_replicas"),
                      active_replicas=_integer(body.get("active_replicas"), "active_replicas"))


def _error_text(response: requests.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    if isinstance(body, dict):
        text = body.get("Error", body.get("detail"))
        return text if isinstance(text, str) else None
    return None


def proxy_error(status: int, text: str | None, what: str) -> AccelopsError:
    """The domain error for a failed answer: the one place retry-or-not is decided."""
    code = error_code(text) if text else None
    message = f"Saxml proxy, {what}: {text or f'HTTP {status}'}"
    if code == "NotFound":
        return NotFoundError(message)
    if code == "AlreadyExists":
        if "being unpublished" in (text or ""):
            return OperationInProgressError(message)
        return SaxmlConflictError(message)
    if code in ("InvalidArgument", "OutOfRange", "Unimplemented"):
        return SaxmlRejectedError(message)
    if code in ("PermissionDenied", "Unauthenticated"):
        return PermissionDeniedError(message)
    if code == "ResourceExhausted":
        return RateLimitedError(message)
    if code == "FailedPrecondition":
        # The cell's directory is missing or no admin server has run in it (addr.go):
        # retried, but someone has to deploy the admin server.
        return DeploymentError(message)
    if code is not None or status >= 500:
        return UnavailableError(message)
    if status == 404 or text is None:
        # Not an answer of the proxy's handlers: the URL or the proxy's version is wrong.
        return DeploymentError(message)
    return SaxmlRejectedError(message)


# ---------------------------------------------------------------------------- the client
class SaxmlProxy:
    """A client of one proxy; every method raises domain errors (module docstring)."""

    def __init__(self, base_url: str, timeout: float = 10.0,
                 probe_timeout: float = DEFAULT_PROBE_TIMEOUT,
                 session: requests.Session | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.probe_timeout = probe_timeout
        self._session = session or requests.Session()

    def publish(self, model: str, model_path: str, checkpoint: str, replicas: int) -> None:
        """Publish ``model``; success if it is published already with this model path and
        checkpoint (updated to ``replicas`` if needed). SaxmlConflictError if it is
        published with another; OperationInProgressError while its unpublishing ends."""
        body = self._spec(model, model_path, checkpoint, replicas)
        try:
            self._call("POST", "/publish", body, f"publish {model}")
        except SaxmlConflictError:
            current = self.model_status(model, probe=False)
            if current is None:
                raise OperationInProgressError(
                    f"{model} was published and unpublished meanwhile; retry") from None
            if (current.model_path, current.checkpoint) != (model_path, checkpoint):
                raise SaxmlConflictError(
                    f"{model} is published with model path {current.model_path!r} and "
                    f"checkpoint {current.checkpoint!r}, not {model_path!r} and "
                    f"{checkpoint!r}", field="model") from None
            if current.requested_replicas != replicas:
                self.update(model, model_path, checkpoint, replicas)

    def update(self, model: str, model_path: str, checkpoint: str, replicas: int) -> None:
        """Change the replicas of a published model (Sax refuses any other change:
        SaxmlRejectedError); NotFoundError if it is not published."""
        self._call("PUT", "/update", self._spec(model, model_path, checkpoint, replicas),
                   f"update {model}")

    def unpublish(self, model: str) -> None:
        """Unpublish ``model``; success if it is not published."""
        with contextlib.suppress(NotFoundError):
            self._call("POST", "/unpublish", {"model": check_sax_model_name(model)},
                       f"unpublish {model}")

    def model_status(self, model: str, *, probe: bool = True) -> SaxmlModel | None:
        """``model`` as listcell reports it (and, with ``probe``, whether it serves);
        None if it is not published."""
        try:
            body = self._call("GET", "/listcell", {"model": check_sax_model_name(model)},
                              f"listcell {model}")
        except NotFoundError:
            return None
        status = parse_listcell(body)
        if not probe:
            return status
        seen = self.probe(model)
        return replace(status, servable=seen.servable, detail=seen.detail, error=seen.error)

    def list_models(self, cell: str) -> list[str]:
        """The names published in ``cell`` (``/listall``)."""
        body = self._call("GET", "/listall", {"sax_cell": sax_cell_name(cell)},
                          f"listall {cell}")
        if not isinstance(body, list) or not all(isinstance(name, str) for name in body):
            raise UnavailableError(f"the Saxml proxy answered {str(body)[:200]!r} to listall")
        return list(body)

    def list_cell(self, cell: str) -> list[SaxmlModel]:
        """Every model published in ``cell`` as listcell reports it (not probed)."""
        found = (self.model_status(name, probe=False) for name in self.list_models(cell))
        return [status for status in found if status is not None]

    def probe(self, model: str) -> Probe:
        """Whether a generation for ``model`` answers within ``probe_timeout`` seconds.
        Raises UnavailableError only when the proxy itself cannot be reached."""
        body = {"model": check_sax_model_name(model), "query": PROBE_QUERY}
        try:
            response = self._session.post(f"{self.base_url}/generate", json=body,
                                          timeout=(self.timeout, self.probe_timeout))
        except requests.ReadTimeout:
            return Probe(False, f"no answer within {self.probe_timeout:g} s: no replica has "
                                "loaded it (loading, or the load failed)")
        except requests.RequestException as exc:
            raise UnavailableError(f"Saxml proxy unreachable: {exc}") from exc
        if response.status_code == 200:
            return Probe(True)
        text = _error_text(response)
        if text is None:
            raise proxy_error(response.status_code, None, f"generate {model}")
        final = error_code(text) in _FINAL_CODES
        return Probe(False, text, text if final else None)

    # ------------------------------------------------------------------------ transport
    @staticmethod
    def _spec(model: str, model_path: str, checkpoint: str, replicas: int) -> dict[str, Any]:
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
            raise SaxmlRejectedError(f"replicas must be a whole number >= 0, not {replicas!r}",
                                     field="replicas")
        return {"model": check_sax_model_name(model), "model_path": model_path,
                "checkpoint": checkpoint, "replicas": replicas}

    def _call(self, method: str, path: str, body: dict[str, Any], what: str) -> Any:
        try:
            response = self._session.request(method, f"{self.base_url}{path}", json=body,
                                             timeout=self.timeout)
        except requests.RequestException as exc:
            raise UnavailableError(f"Saxml proxy, {what}: {exc}") from exc
        if response.status_code != 200:
            raise proxy_error(response.status_code, _error_text(response), what)
        try:
            return response.json()
        except ValueError as exc:
            raise UnavailableError(f"Saxml proxy, {what}: the answer is not JSON") from exc
