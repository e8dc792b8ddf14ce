"""The jobs API as the definition deploys it and as its document describes it."""

from __future__ import annotations

import importlib
import re

from sandbox.topology import PARTS, SERVICES
from services.jobs_api import create_app
from services.jobs_api.openapi import openapi_document
from shared.config import Topics
from shared.deployment import system
from shared.jobs.api import AUDIENCE_ENV

JOBS_API = next(s for s in system.SERVICES if s.name == "jobs_api")


def test_the_jobs_api_publishes_where_submit_job_listens_and_reads_its_audience():
    assert JOBS_API.publishes_to == (Topics().job_requests,)
    assert system.function("submit_job").trigger_topic == Topics().job_requests
    assert AUDIENCE_ENV in JOBS_API.env
    # People and CI call it from their machines; IAM still checks every caller.
    assert JOBS_API.ingress == "all"
    assert all(s.ingress == "internal" for s in system.SERVICES if s is not JOBS_API)


def test_the_sandbox_serves_each_service_of_a_part_it_has_by_its_wsgi_app():
    assert {s.name for s in SERVICES} == {"jobs_api"}
    for spec in SERVICES:
        assert spec.part in PARTS
        module, _, attribute = spec.wsgi_app.partition(":")
        assert callable(getattr(importlib.import_module(module), attribute))


def test_every_route_of_the_app_is_in_the_document_with_its_methods_and_no_other():
    app = create_app()
    served: dict[str, set[str]] = {}
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
        served.setdefault(path, set()).update(
            m.lower() for m in rule.methods or () if m not in ("HEAD", "OPTIONS"))

    documented = {path: set(operations) for path, operations in
                  openapi_document()["paths"].items()}

    assert served == documented


def test_every_operation_documents_its_errors_with_the_error_schema():
    document = openapi_document()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")):
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ApiError"}, (path, method)
            if path.startswith("/v1/"):
                assert operation["security"] == [{"googleIdToken": []}], (path, method)
                assert {"401", "403"} <= set(operation["responses"]), (path, method)
