"""Edit re-routing through the REST API and the signed webhook callback: the response says
where the call went, and the call does not run on the editor's say-so."""

from __future__ import annotations

from typing import Any

import pytest

from signoff.store import MemoryStore
from tests.server.conftest import Server, start_server

POLICY = """
version: 1
people:
  alice: {roles: [finance]}
  bob:   {roles: [finance]}
  dave:  {roles: [ops]}
  frank: {roles: []}
tools:
  transfer_funds:
    default: allow
    allowed_decisions: [approve, edit, reject]
    editable_args: [amount]
    rules:
      - id: large-transfer
        when: {args.amount: {gt: 100000}}
        decision: require_approval
        approvers: {roles: [finance], quorum: 2}
      - id: medium-transfer
        when: {args.amount: {gt: 100}}
        decision: require_approval
        approvers: {roles: [ops]}
"""


@pytest.fixture
def srv() -> Any:
    s = start_server(MemoryStore(), POLICY)
    yield s
    s.close()


def test_rest_edit_onto_a_stricter_rule_stays_pending_and_says_so(srv: Server) -> None:
    rid = srv.pending(amount=500)
    edit = {
        "tool_call_id": "call_1",
        "type": "edit",
        "edited_action": {"name": "transfer_funds", "args": {"amount": 900000, "to": "ACME"}},
    }
    r = srv.client("dave").post(f"/v1/requests/{rid}/decisions", json={"decisions": [edit]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "pending"
    assert body["matched_rules"][0]["rule"] == "large-transfer"
    assert len(body["notices"]) == 1 and "large-transfer" in body["notices"][0]
    assert body["quorum"][0] == {"tool_call_id": "call_1", "required": 2, "approvals": []}
