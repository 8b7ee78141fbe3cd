"""Identity over REST: ``gate.strict_principals`` is a 422 naming ``context.principal.id``;
self-approval and visibility compare people, not spellings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from signoff.store import MemoryStore
from tests.server.conftest import POLICY, Server, start_server, transfer

STRICT = POLICY + "gate: {strict_principals: true}\n"


@pytest.fixture
def strict() -> Iterator[Server]:
    srv = start_server(MemoryStore(), STRICT)
    yield srv
    srv.close()


def test_an_unknown_principal_is_a_422_and_nothing_is_stored(strict: Server) -> None:
    r = strict.submit([transfer()], principal="mallory")
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"] == "unknown_principal"
    assert body["field"] == "context.principal.id"
    assert "'mallory' is not in the people: directory" in body["message"]
    listed = strict.client("alice").get("/v1/requests").json()["requests"]
    assert listed == []


def test_a_missing_principal_is_anonymous_and_refused(strict: Server) -> None:
    body = {"tool_calls": [transfer()], "context": {"thread": "t"}}
    r = strict.client("bot").post("/v1/requests", json=body)
    assert r.status_code == 422 and r.json()["field"] == "context.principal.id"


def test_a_listed_principal_in_another_spelling_is_accepted(strict: Server) -> None:
    assert strict.submit([transfer()], principal="FRANK").status_code == 201


def test_inquiries_are_refused_for_unknown_principals_too(strict: Server) -> None:
    body = {"question": "ok?", "context": {"principal": {"id": "mallory"}}}
    r = strict.client("bot").post("/v1/inquiries", json=body)
    assert r.status_code == 422 and r.json()["error"] == "unknown_principal"


def test_without_strict_principals_anyone_may_be_a_principal(server: Server) -> None:
    assert server.submit([transfer()], principal="mallory").status_code == 201


def test_a_request_for_Erin_cannot_be_approved_by_erins_token(server: Server) -> None:
    rid = server.pending(principal="Erin")
    r = server.client("erin").post(
        f"/v1/requests/{rid}/decisions", json={"decisions": [{"type": "approve"}]}
    )
    assert r.status_code == 403, r.text
    assert r.json()["error"] == "not_authorized"
    assert "forbid_self_approval" in r.json()["message"]
    r = server.client("bob").post(
        f"/v1/requests/{rid}/decisions", json={"decisions": [{"type": "approve"}]}
    )
    assert r.status_code == 200 and r.json()["status"] == "resolved"


def test_a_principal_sees_their_request_in_any_spelling(server: Server) -> None:
    rid = server.pending(principal="FRANK")  # frank holds no role that could decide it
    assert server.client("frank").get(f"/v1/requests/{rid}").status_code == 200
    assert server.client("dave").get(f"/v1/requests/{rid}").status_code == 403
