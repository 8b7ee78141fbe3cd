"""An edit is re-evaluated, not trusted: one rule for every edit (issue: hardening II, item 1).

dave (ops) may approve medium transfers. Editing one to 900,000 lands on rule large-transfer
(2 of finance): the call must not run on dave's say-so.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from signoff import CallContext, DecisionError, Gate, Policy, Principal, ToolCall
from signoff.store import AuditQuery, SQLiteStore
from tests.gate.snapshots import SnapshotCheckingStore

POLICY = """
version: 1
defaults:
  approvers: {roles: [admin]}
  on_error: require_approval
people:
  alice: {roles: [admin, finance]}
  bob:   {roles: [finance]}
  carol: {roles: [finance]}
  dave:  {roles: [ops]}
  erin:  {roles: []}
tools:
  transfer_funds:
    default: allow
    allowed_decisions: [approve, edit, reject]
    editable_args: [amount]
    rules:
      - id: huge
        when: {args.amount: {gt: 10000000}}
        decision: deny
        reason: above the hard limit
      - id: large-transfer
        when: {args.amount: {gt: 100000}}
        decision: require_approval
        approvers: {roles: [finance], quorum: 2}
      - id: medium-transfer
        when: {args.amount: {gt: 100}}
        decision: require_approval
        approvers: {roles: [ops, finance]}
"""


@pytest.fixture(params=["memory", "sqlite"])
def gate(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Gate]:
    store = SnapshotCheckingStore() if request.param == "memory" else SQLiteStore(tmp_path / "s.db")
    g = Gate(Policy.from_yaml(textwrap.dedent(POLICY)), store)
    yield g
    g.close()


def pending_transfer(gate: Gate, amount: Any = 500) -> str:
    ctx = CallContext(principal=Principal("erin"), thread="t")
    sub = gate.submit([ToolCall("transfer_funds", {"amount": amount, "to": "acme"}, id="c1")], ctx)
    assert sub.request is not None and sub.request.pending
    assert sub.request.action_requests[0].rule == "medium-transfer"
    return sub.request.id


def edit(gate: Gate, request_id: str, who: str, amount: Any) -> Any:
    decision = {
        "type": "edit",
        "edited_action": {"name": "transfer_funds", "args": {"amount": amount, "to": "acme"}},
    }
    return gate.decide(request_id, [decision], approver=who)


def events(gate: Gate, request_id: str) -> list[Any]:
    gate.run_sync(gate.store.flush_audit())
    return gate.run_sync(gate.store.read_audit(AuditQuery(request_id=request_id)))


def test_an_edit_onto_a_stricter_rule_waits_for_that_rules_approvers(gate: Gate) -> None:
    rid = pending_transfer(gate)
    req = edit(gate, rid, "dave", 900_000)
    call = req.calls[0]
    assert req.pending and call.resolution is None
    assert call.action.args["amount"] == 900_000  # the proposed edit is what would run
    assert req.action_requests[0].rule == "large-transfer"
    assert req.review_configs[0].approvers.roles == ["finance"]
    assert call.quorum == 2 and call.approvals == []  # dave does not qualify: not counted
    rerouted = [e for e in events(gate, rid) if e.event == "edit_rerouted"]
    assert len(rerouted) == 1
    assert rerouted[0].data["from_rule"] == "medium-transfer"
    assert rerouted[0].data["to_rule"] == "large-transfer"
    assert rerouted[0].data["editor_counted"] is False
    with pytest.raises(DecisionError):  # dave may not approve under the new rule either
        gate.decide(rid, [{"type": "approve"}], approver="dave")
    assert gate.decide(rid, [{"type": "approve"}], approver="bob").pending
    done = gate.decide(rid, [{"type": "approve"}], approver="carol")
    assert done.calls[0].resolution == "edited"
    assert done.calls[0].action.args["amount"] == 900_000


def test_an_edit_that_breaks_a_condition_goes_to_on_error_approvers(gate: Gate) -> None:
    rid = pending_transfer(gate)
    req = edit(gate, rid, "dave", "5000000")  # a string: `gt` cannot compare it
    assert req.pending
    assert req.action_requests[0].rule == "defaults.on_error"
    assert req.review_configs[0].approvers.roles == ["admin"]
    done = gate.decide(rid, [{"type": "approve"}], approver="alice")
    assert done.calls[0].resolution == "edited"


def test_an_editor_who_qualifies_under_the_new_rule_counts(gate: Gate) -> None:
    rid = pending_transfer(gate)
    req = edit(gate, rid, "alice", 900_000)  # alice is finance: one of the two
    assert req.pending and req.calls[0].approvals == ["alice"]
    assert req.calls[0].quorum == 2
    done = gate.decide(rid, [{"type": "approve"}], approver="bob")
    assert done.calls[0].resolution == "edited"


def test_an_editor_who_alone_completes_the_new_rule_resolves_it(gate: Gate) -> None:
    """Re-routed, and the new rule (on_error: 1 of admin) is met by the editor (alice, admin):
    the edit resolves at once, still audited as re-routed."""
    rid = pending_transfer(gate)
    done = edit(gate, rid, "alice", "5000000")
    assert done.action_requests[0].rule == "defaults.on_error"
    assert done.calls[0].resolution == "edited" and done.calls[0].approvals == ["alice"]
    rerouted = [e for e in events(gate, rid) if e.event == "edit_rerouted"]
    assert len(rerouted) == 1 and rerouted[0].data["editor_counted"] is True


def test_an_edit_within_the_same_rule_resolves_as_before(gate: Gate) -> None:
    rid = pending_transfer(gate)
    req = edit(gate, rid, "dave", 700)
    assert req.calls[0].resolution == "edited"
    assert not [e for e in events(gate, rid) if e.event == "edit_rerouted"]


def test_an_edit_the_policy_denies_is_still_refused(gate: Gate) -> None:
    rid = pending_transfer(gate)
    with pytest.raises(DecisionError) as err:
        edit(gate, rid, "dave", 50_000_000)
    assert "huge" in str(err.value)
    assert gate.run_sync(gate.get(rid)).pending


def test_an_edit_that_the_policy_would_allow_resolves(gate: Gate) -> None:
    rid = pending_transfer(gate)
    req = edit(gate, rid, "dave", 50)  # below every rule: transfer_funds.default allows
    assert req.calls[0].resolution == "edited"


def test_the_request_says_in_one_sentence_where_the_edit_went(gate: Gate) -> None:
    rid = pending_transfer(gate)
    req = edit(gate, rid, "dave", 900_000)
    (notice,) = req.reroute_notices()
    assert "from rule medium-transfer to rule large-transfer" in notice
    assert "2 approvals from role finance (0 so far)" in notice
    done = gate.decide(rid, [{"type": "approve"}], approver="bob")
    assert "(1 so far)" in done.reroute_notices()[0]
