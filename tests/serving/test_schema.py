"""Property tests generated from the service's own OpenAPI schema
(schemathesis): whatever a client sends, the service answers with a
documented status and a body that matches the schema, never a 500.

Driven through hypothesis directly (one test per operation): schemathesis's
pytest plugin does not run under pytest 9."""

from __future__ import annotations

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.serving.helpers import settings_for

# bounded: each operation gets this many generated requests in `make test`
EXAMPLES = int(os.environ.get("STRATA_SCHEMA_EXAMPLES", "25"))
OPERATIONS = ["GET /health", "GET /indexes", "POST /search", "POST /ask",
              "GET /indexes/{name}/images/{node_id}", "GET /indexes/{name}/nodes/{node_id}",
              "GET /indexes/{name}/outline"]


@pytest.fixture(scope="module")
def operations(sample_index):
    from strata.service.app import create_app

    # the ASGI test transport calls from a non-loopback address and names the host
    # "testserver": allow both explicitly
    app = create_app(settings_for(sample_index, allow_unauthenticated=True,
                                  allowed_hosts="testserver"))
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    return {op.ok().label: op.ok() for op in schema.get_all_operations()}


def test_the_schema_lists_every_operation(operations):
    assert sorted(operations) == sorted(OPERATIONS)


@pytest.mark.parametrize("label", OPERATIONS)
def test_every_operation_honours_its_schema(operations, label):
    operation = operations[label]
    statuses: list[int] = []

    @given(case=operation.as_strategy())
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def check(case):
        response = case.call_and_validate()
        statuses.append(response.status_code)

    check()
    assert statuses and all(s < 500 for s in statuses)
