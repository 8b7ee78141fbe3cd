"""Limits at the REST door: a poison body is a 422 naming the field, and nothing is stored, so
every other request and every reader keeps working (issue: hardening I, item 1)."""

from __future__ import annotations

from typing import Any

import pytest

from signoff.store import SQLiteStore
from tests.server.conftest import Server, start_server, transfer


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"k": value}
    return value


@pytest.fixture
def srv(tmp_path: Any) -> Any:
    s = start_server(SQLiteStore(tmp_path / "signoff.db"))
    yield s
    s.close()


def test_deeply_nested_args_are_422_naming_the_field_and_nothing_is_stored(srv: Server) -> None:
    call = {"id": "c1", "name": "transfer_funds", "args": {"amount": 5, "to": nested(250)}}
    r = srv.submit([call])
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"] == "invalid"
    assert body["field"].startswith("tool_calls.0.args.to")
    listing = srv.client("alice").get("/v1/requests")
    assert listing.status_code == 200 and listing.json()["requests"] == []


def test_deep_context_attrs_on_an_inquiry_are_422(srv: Server) -> None:
    body = {
        "question": "ok?",
        "context": {"principal": {"id": "frank"}, "thread": "t", "attrs": {"a": nested(250)}},
    }
    r = srv.client("bot").post("/v1/inquiries", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["field"].startswith("context.attrs.a")


def test_non_finite_numbers_are_422(srv: Server) -> None:
    content = (
        '{"tool_calls": [{"id": "c", "name": "transfer_funds", "args": {"amount": NaN, '
        '"to": "ACME"}}], "context": {"principal": {"id": "frank"}}}'
    )
    r = srv.client("bot").post(
        "/v1/requests", content=content, headers={"content-type": "application/json"}
    )
    assert r.status_code == 422, r.text
    assert r.json()["field"] in ("tool_calls.0.args.amount", "body")


def test_too_many_calls_in_one_step_is_422(srv: Server) -> None:
    calls = [transfer(call_id=f"c{i}") for i in range(101)]
    r = srv.submit(calls)
    assert r.status_code == 422
    assert r.json()["field"] == "tool_calls"


def test_after_a_refused_poison_request_everything_still_works(srv: Server) -> None:
    srv.submit([{"id": "p", "name": "transfer_funds", "args": {"to": nested(250)}}])
    request_id = srv.pending()
    alice = srv.client("alice")
    assert alice.get("/v1/requests").status_code == 200
    assert alice.get("/metrics").status_code in (200, 401)
    assert alice.get(f"/v1/requests/{request_id}").json()["status"] == "pending"
