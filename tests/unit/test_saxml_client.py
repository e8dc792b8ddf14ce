"""The Saxml proxy client's pure parts: Sax names, listcell answers, and which proxy
answers are retried."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.errors import (
    DeploymentError,
    NotFoundError,
    OperationInProgressError,
    PermissionDeniedError,
    RateLimitedError,
    UnavailableError,
)
from shared.serving.saxml import (
    InvalidSaxNameError,
    SaxmlConflictError,
    SaxmlRejectedError,
    check_sax_model_name,
    error_code,
    parse_listcell,
    proxy_error,
    sax_cell_name,
    sax_model_name,
)

SAX_MODEL = re.compile(r"^/sax/[a-z]+[a-z0-9-_]*/[a-z]+[a-z0-9-_]*$")


# ------------------------------------------------------------------- names
def test_a_clean_model_and_version_make_a_readable_versioned_name():
    assert sax_model_name("test", "llama-7b", "v3") == "/sax/test/llama-7b-v3"


def test_v3_and_3_are_the_same_version():
    assert sax_model_name("/sax/test", "llama-7b", "3") == sax_model_name("test", "llama-7b",
                                                                         "v3")


def test_models_that_sanitise_alike_still_get_different_names():
    names = {sax_model_name("test", model, "v1") for model in ("Llama 7B", "llama-7b", "llama_7b")}
    assert len(names) == 3
    assert all(SAX_MODEL.match(name) for name in names)


def test_a_model_name_never_runs_into_another_models_version():
    assert sax_model_name("test", "llama", "v31") != sax_model_name("test", "llama-v3", "v1")


@given(model=st.text(max_size=80), version=st.text(max_size=30))
def test_any_model_and_version_text_yields_a_name_sax_accepts(model: str, version: str):
    name = sax_model_name("prod", model, version)
    assert SAX_MODEL.match(name), name
    assert name == sax_model_name("prod", model, version)


@pytest.mark.parametrize("cell", ["Test", "", "/sax/", "sax/test", "7cell", "/sax/a/b"])
def test_a_cell_is_validated_not_rewritten(cell: str):
    with pytest.raises(InvalidSaxNameError) as raised:
        sax_cell_name(cell)
    assert raised.value.retry is False


@pytest.mark.parametrize("name", ["/sax/test", "sax/test/m", "/sax/test/M", "/sax/test/m/x",
                                  "/other/test/m", "/sax/test/7b"])
def test_a_name_that_is_not_a_sax_model_name_is_refused_before_sending(name: str):
    with pytest.raises(InvalidSaxNameError):
        check_sax_model_name(name)


# ------------------------------------------------------------------- listcell
def test_a_listcell_answer_is_read_as_the_proxy_readme_shows_it():
    model = parse_listcell({
        "model": "/sax/test/lm2b",
        "model_path": "saxml.server.pax.lm.params.lm_cloud.LmCloudSpmd2BTest",
        "checkpoint": "None", "max_replicas": 2, "active_replicas": 1})

    assert (model.name, model.checkpoint) == ("/sax/test/lm2b", "None")
    assert model.model_path == "saxml.server.pax.lm.params.lm_cloud.LmCloudSpmd2BTest"
    assert (model.requested_replicas, model.active_replicas) == (2, 1)
    assert model.servable is None  # listcell alone cannot say


@pytest.mark.parametrize("body", [
    ["/sax/test/lm2b"], "oops", {"model": "/sax/test/lm2b"},
    {"model": "/sax/test/m", "model_path": "p", "checkpoint": "c", "max_replicas": "1",
     "active_replicas": 1},
    {"model": "/sax/test/m", "model_path": "p", "checkpoint": "c", "max_replicas": 1,
     "active_replicas": True},
])
def test_an_answer_that_is_not_a_listcell_answer_is_retried(body: object):
    with pytest.raises(UnavailableError):
        parse_listcell(body)


# ------------------------------------------------------------------- errors
@pytest.mark.parametrize(("text", "code"), [
    ("model /sax/test/x not found: rpc error: code = NotFound desc = NotFound", "NotFound"),
    ("NOT_FOUND: model /sax/test/x not found", "NotFound"),
    ("model /sax/test/x already exists: rpc error: code = AlreadyExists desc = AlreadyExists",
     "AlreadyExists"),
    ("Dial to admin failed: rpc error: code = Unavailable desc = Unavailable", "Unavailable"),
    ("CANCELLED: the call was cancelled", "Canceled"),
    ("Provide model for unpublish", None),
    ("'model_path'", None),
])
def test_the_grpc_status_is_read_from_either_client_rendering(text: str, code: str | None):
    assert error_code(text) == code


def _status(code: str, text: str = "x") -> str:
    return f"{text}: rpc error: code = {code} desc = {code}"


@pytest.mark.parametrize(("status", "text", "kind", "retry"), [
    (400, _status("NotFound"), NotFoundError, False),
    (400, _status("AlreadyExists"), SaxmlConflictError, False),
    (400, _status("AlreadyExists", "model /sax/t/m is being unpublished, please retry later"),
     OperationInProgressError, True),
    (400, _status("InvalidArgument", 'model path "a b" must match'), SaxmlRejectedError, False),
    (400, _status("PermissionDenied"), PermissionDeniedError, True),
    (400, _status("ResourceExhausted"), RateLimitedError, True),
    (400, _status("Unavailable"), UnavailableError, True),
    (400, _status("DeadlineExceeded"), UnavailableError, True),
    (400, _status("FailedPrecondition", "no admin server has ever run"), DeploymentError, True),
    (400, "Provide model, model path, checkpoint, and replica number for publish",
     SaxmlRejectedError, False),
    (500, _status("InvalidArgument"), SaxmlRejectedError, False),  # the FastAPI proxy
    (500, None, UnavailableError, True),
    (502, "<html>bad gateway</html>", UnavailableError, True),
    (404, None, DeploymentError, True),
    (400, None, DeploymentError, True),  # {"message": "Invalid Request"}: wrong path/method
])
def test_each_proxy_answer_is_retried_or_not_by_its_status(status: int, text: str | None,
                                                          kind: type, retry: bool):
    error = proxy_error(status, text, "publish /sax/t/m")
    assert type(error) is kind
    assert error.retry is retry
    assert "publish /sax/t/m" in error.message
