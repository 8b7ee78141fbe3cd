"""Approval chains on a real store, SQLite and PostgreSQL (issue 16, part 3).

``pay_invoice`` needs a manager, then two of finance; ``grant_access`` one of finance and one
of security in any order; ``wire_out`` has per-stage deadlines. Deadlines are driven through
the store's own transaction with the sweeper's pure step at the due time — no sleeping.
"""

from __future__ import annotations

import json
import secrets
import textwrap
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from signoff import CallContext, DecisionError, Gate, NotAuthorized, Policy, Principal, ToolCall
from signoff.model import ApprovalRequest
from signoff.model.resolution import Transition, due_transition
from signoff.store import AuditQuery, SQLiteStore, Store
from signoff.store.postgres import PostgresStore
from tests.store import pg_cluster
from tests.store.conftest import pg_url  # noqa: F401  (the run's throwaway PostgreSQL)
from tests.store.test_quarantine import rewrite_doc

PEOPLE = """
version: 1
people:
  mia:  {roles: [manager], slack: UMIA}
  fay:  {roles: [finance], slack: UFAY}
  fred: {roles: [finance], slack: UFRED}
  sam:  {roles: [security], slack: USAM}
  max:  {roles: [manager, finance, security], slack: UMAX, aliases: [maximilian]}
  ozzy: {roles: [ops], slack: UOZZY}
  erin: {roles: [], slack: UERIN}
grants: {default_ttl: 1h}
"""

TOOLS = """
tools:
  pay_invoice:
    default: require_approval
    allowed_decisions: [approve, edit, reject]
    editable_args: [amount]
    timeout: 2h
    approvers:
      stages:
        - {roles: [manager]}
        - {roles: [finance], quorum: 2, timeout: 1h}
  pay_loose:
    default: require_approval
    approvers:
      stages: [{roles: [manager]}, {roles: [finance]}]
      distinct: false
  grant_access:
    default: require_approval
    approvers: {all_of: [{roles: [finance]}, {roles: [security]}]}
  refund:
    default: allow
    allowed_decisions: [approve, edit, reject]
    editable_args: [amount]
    rules:
      - id: big-refund
        when: {args.amount: {gt: 1000}}
        decision: require_approval
        approvers: {stages: [{roles: [manager]}, {roles: [finance]}]}
      - id: small-refund
        when: {args.amount: {gt: 10}}
        decision: require_approval
        approvers: {roles: [finance]}
  plain_pay:
    default: require_approval
    approvers: {roles: [finance], quorum: 2}
  wire_out:
    default: require_approval
    timeout: 2h
    approvers:
      stages:
        - {roles: [manager], timeout: 10m, on_timeout: escalate, escalate_to: {roles: [ops]},
           escalate_after: 5m}
        - {roles: [finance], timeout: 30m, on_timeout: reject}
"""


def make_policy(tools: str = TOOLS, extra: str = "") -> Policy:
    return Policy.from_yaml(textwrap.dedent(PEOPLE) + textwrap.dedent(tools) + extra)


def make_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    if kind == "sqlite":
        return SQLiteStore(tmp_path / "s.db")
    url = request.getfixturevalue("pg_url")
    schema = f"chains_{secrets.token_hex(4)}"
    request.addfinalizer(lambda: pg_cluster.drop_schema(url, schema))
    return PostgresStore(url, schema=schema, pool_max=4)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def gate(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Gate]:
    g = Gate(make_policy(), make_store(store_kind, tmp_path, request))
    yield g
    g.close()


def ask(gate: Gate, tool: str, args: dict[str, Any] | None = None) -> ApprovalRequest:
    ctx = CallContext(principal=Principal("erin"), thread=f"t-{secrets.token_hex(3)}", agent="bot")
    sub = gate.submit([ToolCall(tool, args if args is not None else {"amount": 10}, id="c1")], ctx)
    assert sub.request is not None and sub.request.pending
    return sub.request


def approve(gate: Gate, req: ApprovalRequest, who: str, **extra: Any) -> ApprovalRequest:
    return gate.decide(req.id, [{"type": "approve", **extra}], approver=who)


def progress(req: ApprovalRequest) -> str:
    from signoff.model import chains

    return chains.progress(req.review_configs[0], req.calls[0])


def fresh(gate: Gate, req: ApprovalRequest) -> ApprovalRequest:
    return gate.run_sync(gate.get(req.id))


def sweep_at_due(gate: Gate, req: ApprovalRequest) -> ApprovalRequest:
    """The sweeper's step for ``req`` at its due time, in the store's transaction."""
    due = fresh(gate, req).due_at
    tr = gate.run_sync(gate.update(req.id, lambda r: due_transition(r, due) or nothing(r)))
    gate.run_sync(gate.after_change(tr))
    return tr.request


def nothing(req: ApprovalRequest) -> Transition:
    return Transition(req, changed=False)


def events(gate: Gate, req: ApprovalRequest) -> list[Any]:
    gate.run_sync(gate.store.flush_audit())
    return gate.run_sync(gate.store.read_audit(AuditQuery(request_id=req.id)))


# ---------------------------------------------------------------- stages
def test_two_stages_approve_in_order(gate: Gate) -> None:
    req = ask(gate, "pay_invoice")
    assert progress(req) == "stage 1 of 2: 0 of 1 manager approval"
    after_manager = approve(gate, req, "mia")
    assert after_manager.pending and after_manager.calls[0].resolution is None
    assert progress(after_manager) == "stage 2 of 2: 0 of 2 finance approvals"
    after_fay = approve(gate, req, "fay")
    assert progress(after_fay) == "stage 2 of 2: 1 of 2 finance approvals"
    done = approve(gate, req, "fred")
    assert done.status == "resolved" and done.calls[0].resolution == "approved"
    assert done.calls[0].approvals == ["mia", "fay", "fred"]
    started = [e for e in events(gate, req) if e.event == "stage_started"]
    assert [(e.data["stage"], e.data["of"], e.actor) for e in started] == [(2, 2, "system")]


def test_stage_two_cannot_approve_before_stage_one(gate: Gate) -> None:
    req = ask(gate, "pay_invoice")
    with pytest.raises(NotAuthorized) as err:
        approve(gate, req, "fay")
    assert "it is at stage 1 of 2, which needs manager" in str(err.value)
    assert fresh(gate, req).calls[0].approvals == []  # nothing was changed


def test_a_reject_at_stage_two_rejects(gate: Gate) -> None:
    req = ask(gate, "pay_invoice")
    approve(gate, req, "mia")
    approve(gate, req, "fay")
    done = gate.decide(req.id, [{"type": "reject", "message": "not budgeted"}], approver="fred")
    assert done.status == "resolved" and done.calls[0].resolution == "rejected"
    assert done.calls[0].resolved_by == "fred"


def test_a_later_stage_may_reject_before_its_turn(gate: Gate) -> None:
    req = ask(gate, "pay_invoice")
    done = gate.decide(req.id, [{"type": "reject"}], approver="fay")
    assert done.calls[0].resolution == "rejected"


def test_outsiders_may_not_reject_a_chain(gate: Gate) -> None:
    req = ask(gate, "pay_invoice")
    with pytest.raises(NotAuthorized) as err:
        gate.decide(req.id, [{"type": "reject"}], approver="ozzy")
    assert "approval chain (stage 1: manager; stage 2: 2 of finance)" in str(err.value)


def test_the_same_person_never_counts_twice_across_stages(gate: Gate) -> None:
    req = ask(gate, "pay_invoice")
    approve(gate, req, "max")  # manager at stage 1; max is in finance too
    with pytest.raises(NotAuthorized) as err:
        approve(gate, req, "max")
    assert err.value.field == "approver"
    assert "max already approved pay_invoice at stage 1" in str(err.value)
    assert "distinct: true" in str(err.value)
    with pytest.raises(NotAuthorized):
        approve(gate, req, "MAX", message="really")  # another spelling is the same person
    with pytest.raises(NotAuthorized):
        approve(gate, req, "maximilian")  # and so is an alias
    assert progress(fresh(gate, req)) == "stage 2 of 2: 0 of 2 finance approvals"


def test_distinct_false_lets_one_person_count_at_each_stage(gate: Gate) -> None:
    req = ask(gate, "pay_loose")
    approve(gate, req, "max")
    done = approve(gate, req, "max")  # the same approve again, now for stage 2
    assert done.calls[0].resolution == "approved"
    assert done.calls[0].group_approvals == [["max"], ["max"]]


def test_a_repeated_approve_within_a_stage_is_not_counted_twice(gate: Gate) -> None:
    req = ask(gate, "pay_invoice")
    approve(gate, req, "mia")
    approve(gate, req, "fay")
    again = approve(gate, req, "fay", message="second thoughts, still yes")
    assert progress(again) == "stage 2 of 2: 1 of 2 finance approvals"


def test_self_approval_is_refused_at_any_stage(gate: Gate) -> None:
    ctx = CallContext(principal=Principal("fay"), thread="t-self", agent="bot")
    sub = gate.submit([ToolCall("pay_invoice", {"amount": 1}, id="c1")], ctx)
    assert sub.request is not None
    approve(gate, sub.request, "mia")
    with pytest.raises(NotAuthorized) as err:
        approve(gate, sub.request, "fay")
    assert "forbid_self_approval" in str(err.value)


# ---------------------------------------------------------------- all_of
@pytest.mark.parametrize("order", [("fay", "sam"), ("sam", "fay")])
def test_all_of_in_any_order(gate: Gate, order: tuple[str, str]) -> None:
    req = ask(gate, "grant_access")
    first = approve(gate, req, order[0])
    assert first.pending
    done = approve(gate, req, order[1])
    assert done.calls[0].resolution == "approved"
    assert progress(done) == "all of: 1 of 1 finance, 1 of 1 security approvals"


def test_all_of_one_person_in_both_groups_counts_once(gate: Gate) -> None:
    req = ask(gate, "grant_access")
    first = approve(gate, req, "max")
    assert progress(first) == "all of: 1 of 1 finance, 0 of 1 security approvals"
    with pytest.raises(NotAuthorized) as err:
        approve(gate, req, "max", message="and security")
    assert "never counts twice" in str(err.value)
    with pytest.raises(NotAuthorized) as err:
        approve(gate, req, "fred")  # finance is done; fred is not security
    assert "still needed: security" in str(err.value)
    assert approve(gate, req, "sam").calls[0].resolution == "approved"


# ---------------------------------------------------------------- deadlines
def test_a_stage_starts_with_its_own_deadline_and_on_timeout_reject(gate: Gate) -> None:
    req = ask(gate, "wire_out")
    assert req.expires_at - req.created_at == timedelta(minutes=10)  # stage 1's own timeout
    after = approve(gate, req, "mia")
    assert after.escalate_at is None and not after.escalated
    started = next(e for e in events(gate, req) if e.event == "stage_started")
    assert after.expires_at == started.at + timedelta(minutes=30)  # stage 2's timeout
    expired = sweep_at_due(gate, after)
    assert expired.status == "expired"
    assert expired.calls[0].resolution == "expired"
    assert expired.calls[0].resolved_by == "timeout"


def test_a_stage_escalates_to_its_own_group(gate: Gate) -> None:
    req = ask(gate, "wire_out")
    assert req.escalate_at is not None
    assert req.escalate_at - req.created_at == timedelta(minutes=5)
    with pytest.raises(NotAuthorized):
        approve(gate, req, "ozzy")  # ops only after the stage escalates
    escalated = sweep_at_due(gate, req)
    assert escalated.pending and escalated.escalated
    after = approve(gate, req, "ozzy")  # counts for stage 1
    assert progress(after) == "stage 2 of 2: 0 of 1 finance approval"
    assert not after.escalated  # stage 2 starts afresh: ops may not approve it
    with pytest.raises(NotAuthorized):
        approve(gate, req, "ozzy", message="stage 2 too")


# ---------------------------------------------------------------- edits
def test_an_edit_restarts_the_chain_at_stage_one(gate: Gate) -> None:
    req = ask(gate, "pay_invoice", {"amount": 10})
    approve(gate, req, "mia")
    approve(gate, req, "fay")
    edit = {"type": "edit", "edited_action": {"name": "pay_invoice", "args": {"amount": 9}}}
    edited = gate.decide(req.id, [edit], approver="fred")
    call = edited.calls[0]
    assert call.resolution is None and call.action.args == {"amount": 9}
    assert call.stage == 0 and call.group_approvals == [[], []] and call.approvals == []
    assert progress(edited) == "stage 1 of 2: 0 of 1 manager approval"
    restarted = [e for e in events(gate, req) if e.event == "stage_started"][-1]
    assert restarted.data["restarted"] is True and restarted.data["stage"] == 1
    approve(gate, req, "mia")
    approve(gate, req, "fay")
    done = approve(gate, req, "fred")
    assert done.calls[0].resolution == "edited" and done.calls[0].action.args == {"amount": 9}


def test_an_edit_by_the_manager_counts_for_stage_one(gate: Gate) -> None:
    req = ask(gate, "pay_invoice", {"amount": 10})
    edit = {"type": "edit", "edited_action": {"name": "pay_invoice", "args": {"amount": 8}}}
    edited = gate.decide(req.id, [edit], approver="mia")
    assert progress(edited) == "stage 2 of 2: 0 of 2 finance approvals"


def test_a_later_stage_may_not_edit_before_its_turn(gate: Gate) -> None:
    req = ask(gate, "pay_invoice", {"amount": 10})
    edit = {"type": "edit", "edited_action": {"name": "pay_invoice", "args": {"amount": 8}}}
    with pytest.raises(NotAuthorized):
        gate.decide(req.id, [edit], approver="fay")


def test_an_edit_onto_a_chained_rule_starts_its_chain(gate: Gate) -> None:
    req = ask(gate, "refund", {"amount": 50})
    assert req.action_requests[0].rule == "small-refund"
    edit = {"type": "edit", "edited_action": {"name": "refund", "args": {"amount": 5000}}}
    moved = gate.decide(req.id, [edit], approver="fay")
    assert moved.pending and moved.action_requests[0].rule == "big-refund"
    assert progress(moved) == "stage 1 of 2: 0 of 1 manager approval"  # fay is not a manager
    assert moved.reroute_notices() and "approval chain" in moved.reroute_notices()[0]
    assert approve(gate, req, "mia").pending
    done = approve(gate, req, "fred")
    assert done.calls[0].resolution == "edited" and done.calls[0].action.args == {"amount": 5000}


def test_a_stage_start_moves_the_deadline_of_the_whole_request(gate: Gate) -> None:
    ctx = CallContext(principal=Principal("erin"), thread="t-two", agent="bot")
    calls = [ToolCall("pay_invoice", {"amount": 1}, id="c1"), ToolCall("plain_pay", {}, id="c2")]
    sub = gate.submit(calls, ctx)
    assert sub.request is not None
    after = gate.decide(sub.request.id, [{"tool_call_id": "c1", "type": "approve"}], approver="mia")
    started = next(e for e in events(gate, after) if e.event == "stage_started")
    assert after.expires_at == started.at + timedelta(hours=1)  # pay_invoice's stage 2


# ---------------------------------------------------------------- grants
def test_a_thread_scope_on_a_chain_is_refused(gate: Gate) -> None:
    req = ask(gate, "pay_invoice")
    with pytest.raises(DecisionError) as err:
        approve(gate, req, "mia", scope="thread")
    assert err.value.field == "decisions[0].scope"
    assert "cannot stand in for a quorum or a chain" in str(err.value)
    with pytest.raises(DecisionError):
        gate.grant(
            tool="pay_invoice", rule="pay_invoice.default", effect="allow", scope="agent",
            agent="bot", created_by="mia",
        )  # fmt: skip


def test_a_grant_made_before_the_rule_became_a_chain_does_not_satisfy_it(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = make_store(store_kind, tmp_path, request)
    plain = TOOLS.replace(
        "    approvers:\n      stages:\n        - {roles: [manager]}\n"
        "        - {roles: [finance], quorum: 2, timeout: 1h}\n",
        "    approvers: {roles: [manager]}\n",
        1,
    )
    ctx = CallContext(principal=Principal("erin"), thread="t", agent="bot")
    call = ToolCall("pay_invoice", {"amount": 1})
    with Gate(make_policy(plain), store) as before:
        before.grant(
            tool="pay_invoice", rule="pay_invoice.default", effect="allow", scope="agent",
            agent="bot", created_by="mia",
        )  # fmt: skip
        assert before.check(call, ctx).allowed
        store = make_store_again(store)
    with Gate(make_policy(), store) as after:
        verdict = after.check(call, ctx)
        assert verdict.needs_approval and verdict.grant is None


def make_store_again(store: Store) -> Store:
    """A fresh store object on the same database (the first gate closed its own)."""
    if isinstance(store, SQLiteStore):
        return SQLiteStore(store.path)
    assert isinstance(store, PostgresStore)
    return PostgresStore(store.dsn, schema=store.schema, pool_max=4)


# ---------------------------------------------------------------- stored rows
CHAIN_FIELDS = ("stages", "all_of", "distinct", "timeout_s", "on_timeout", "escalate_to",
                "escalate_after_s")  # fmt: skip


def test_a_request_stored_before_chains_existed_loads_and_is_decided(gate: Gate) -> None:
    req = ask(gate, "plain_pay")
    doc = fresh(gate, req).model_dump(mode="json")
    approvers = doc["review_configs"][0]["approvers"]
    for key in CHAIN_FIELDS:
        del approvers[key]  # the row as an older signoff wrote it
    del doc["calls"][0]["stage"], doc["calls"][0]["group_approvals"]
    rewrite_doc(gate.store, req.id, json.dumps(doc))
    old = fresh(gate, req)
    assert not old.review_configs[0].approvers.chained
    assert old.review_configs[0].approvers.distinct is True
    assert old.calls[0].stage == 0 and old.calls[0].group_approvals == []
    assert approve(gate, req, "fay").pending
    assert approve(gate, req, "fred").calls[0].resolution == "approved"
