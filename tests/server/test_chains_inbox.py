"""An approval chain over HTTP: the wire shape carries the chain and its progress, the inbox
shows "stage 2 of 2: …" and offers approve only to the stage now asked (reject to all)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from signoff.store import MemoryStore
from tests.server.conftest import Server, start_server
from tests.server.test_inbox_forms import sign_in

POLICY = """
version: 1
people:
  alice: {roles: [manager]}
  bob:   {roles: [finance]}
  carol: {roles: [finance]}
  dave:  {roles: [ops]}
  erin:  {roles: [finance]}
  frank: {roles: []}
tools:
  pay_invoice:
    default: require_approval
    approvers:
      stages: [{roles: [manager]}, {roles: [finance], quorum: 2, timeout: 1h}]
"""


@pytest.fixture
def srv() -> Iterator[Server]:
    s = start_server(MemoryStore(), POLICY)
    yield s
    s.close()


def pending(srv: Server) -> str:
    r = srv.submit([{"id": "call_1", "name": "pay_invoice", "args": {"amount": 10}}])
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def test_the_wire_shape_carries_the_chain_and_its_progress(srv: Server) -> None:
    rid = pending(srv)
    body = srv.client("bob").get(f"/v1/requests/{rid}").json()
    approvers = body["review_configs"][0]["approvers"]
    assert [g["roles"] for g in approvers["stages"]] == [["manager"], ["finance"]]
    assert approvers["stages"][1]["quorum"] == 2 and approvers["stages"][1]["timeout_s"] == 3600
    assert approvers["distinct"] is True and approvers["quorum"] == 3
    assert body["calls"][0]["stage"] == 0 and body["calls"][0]["group_approvals"] == [[], []]
    r = srv.client("alice").post(
        f"/v1/requests/{rid}/decisions", json={"decisions": [{"type": "approve"}]}
    )
    assert r.status_code == 200, r.text
    call = r.json()["calls"][0]
    assert call["stage"] == 1 and call["group_approvals"] == [["alice"], []]


def test_a_stage_two_approver_early_is_a_403_naming_the_stage(srv: Server) -> None:
    rid = pending(srv)
    r = srv.client("bob").post(
        f"/v1/requests/{rid}/decisions", json={"decisions": [{"type": "approve"}]}
    )
    assert r.status_code == 403, r.text
    assert "stage 1 of 2" in r.text


def test_the_inbox_shows_the_stage_and_offers_approve_only_to_it(srv: Server) -> None:
    rid = pending(srv)
    bob = sign_in(srv, "bob")
    page = bob.get(f"/requests/{rid}").text
    assert "stage 1 of 2: 0 of 1 manager approval" in page
    assert "btn-reject" in page and "btn-approve" not in page  # finance may reject already
    assert "stage 1 of 2: 0 of 1 manager approval" in bob.get("/inbox").text
    srv.client("alice").post(
        f"/v1/requests/{rid}/decisions", json={"decisions": [{"type": "approve"}]}
    )
    page = bob.get(f"/requests/{rid}").text
    assert "stage 2 of 2: 0 of 2 finance approvals" in page and "btn-approve" in page
    alice = sign_in(srv, "alice")
    assert "btn-approve" not in alice.get(f"/requests/{rid}").text  # she counted already


def test_needs_you_marks_only_the_stage_now_asked(srv: Server) -> None:
    pending(srv)
    bob, alice = sign_in(srv, "bob"), sign_in(srv, "alice")
    assert "needs you" not in bob.get("/inbox").text  # finance may reject, but waits for stage 1
    assert "needs you" in alice.get("/inbox").text
    r = srv.submit([{"id": "call_2", "name": "pay_invoice", "args": {"amount": 20}}])
    srv.client("alice").post(
        f"/v1/requests/{r.json()['id']}/decisions", json={"decisions": [{"type": "approve"}]}
    )
    assert bob.get("/inbox").text.count("needs you") == 1  # the request now at stage 2
