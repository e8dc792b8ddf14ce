"""The jobs API's OpenAPI document against the implementation: schemathesis generates
requests from the document (valid and invalid bodies, ids, query parameters; with and
without a token) and checks every answer against it — status codes, content types,
headers and bodies — through the app's WSGI interface, with the backends stand-ins over
sockets. Deterministic (derandomized) and bounded."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from services.jobs_api import create_app
from tests.jobs_api_fixtures import OPS, JobsApiWorld, jobs_api_world

EXAMPLES = 25

# Creating the app reads no configuration: the world fixture sets the environment
# it reads on each request.
APP = create_app()
# Beyond what the document can say: a schema-valid request may break the team policy
# (400, with the field and rule: the policy is configuration) or the request limits
# (413); a schema-violating one may be refused for its size first (413).
CONFIG = SchemathesisConfig.from_dict({"checks": {
    "positive_data_acceptance": {"expected-statuses": [
        "2xx", "400", "401", "403", "404", "409", "413", "5xx"]},
    "negative_data_rejection": {"expected-statuses": [
        "400", "401", "403", "404", "405", "409", "413"]},
}})
schema = schemathesis.openapi.from_wsgi("/openapi.json", APP, config=CONFIG)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory,
          bigquery_endpoint: str) -> Iterator[JobsApiWorld]:
    with jobs_api_world(tmp_path_factory.mktemp("jobs-api-openapi"), bigquery_endpoint) as world:
        world.create_job("research", "alice-run-1")
        yield world


@schema.parametrize()
@settings(max_examples=EXAMPLES, derandomize=True, deadline=None,
          suppress_health_check=list(HealthCheck))
def test_every_answer_matches_the_openapi_document(case, world):
    case.call_and_validate(headers=world.headers(OPS))
