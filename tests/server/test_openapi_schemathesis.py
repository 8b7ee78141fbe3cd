"""Property-based API tests: schemathesis against ``/openapi.json`` (no 5xx, responses
match the documented schemas and status codes). Capped examples keep it to seconds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from signoff.server.openapi import openapi_document
from signoff.store import MemoryStore
from tests.server.conftest import Server, start_server

CHECKS: list[Any] = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def live() -> Iterator[Server]:
    srv = start_server(MemoryStore())
    srv.pending()  # something to read, wait on and decide
    yield srv
    srv.close()


# The document the server serves, built from the same code; the event stream never ends by
# design and has its own tests.
schema = schemathesis.openapi.from_dict(openapi_document("http://127.0.0.1")).exclude(
    path="/v1/events"
)


SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None
)


def _call(case: Any, live: Server, who: str) -> None:
    case.call_and_validate(
        base_url=live.url,
        headers={"Authorization": f"Bearer {live.tokens[who]}"},
        checks=CHECKS,
        timeout=30,
    )


@pytest.mark.slow
@schema.parametrize()
@SETTINGS
def test_api_conforms_to_its_openapi_document_as_an_agent(case: Any, live: Server) -> None:
    _call(case, live, "bot")


@pytest.mark.slow
@schema.parametrize()
@SETTINGS
def test_api_conforms_to_its_openapi_document_as_an_admin(case: Any, live: Server) -> None:
    _call(case, live, "alice")


def test_openapi_document_lists_every_v1_route(live: Server) -> None:
    doc = live.client().get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    assert set(doc["paths"]) >= {
        "/v1/requests",
        "/v1/requests/{id}",
        "/v1/requests/{id}/decisions",
        "/v1/requests/{id}/wait",
        "/v1/requests/{id}/cancel",
        "/v1/events",
        "/v1/audit",
        "/healthz",
        "/metrics",
    }
