"""The gate end to end through ``@gate.guard``: allow, deny, approve, edit, reject, quorum,
deadlines, thread grants, non-interactive mode — with real stores."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from signoff import (
    AlreadyDecided,
    AlreadyExecuted,
    DecisionError,
    Denied,
    Expired,
    Gate,
    NotAuthorized,
    Rejected,
    Responded,
    ToolCall,
    Verdict,
)
from signoff.store import AuditQuery, SQLiteStore
from tests.gate.conftest import make_policy, next_pending, pending, wait_until


def events(gate: Gate, **filters: Any) -> list[str]:
    async def read() -> list[str]:
        await gate.store.flush_audit()
        return [r.event for r in await gate.store.read_audit(AuditQuery(**filters))]

    return gate._portal.run(read())


def tools(gate: Gate) -> dict[str, Any]:
    ran: list[tuple[str, dict[str, Any]]] = []

    def make(name: str) -> Any:
        def fn(**kwargs: Any) -> str:
            ran.append((name, kwargs))
            return f"{name} ok"

        fn.__name__ = name
        return gate.guard(fn)

    t = {
        n: make(n)
        for n in (
            "get_price",
            "delete_record",
            "transfer_funds",
            "execute",
            "no_thread",
            "quick",
            "quick_allow",
            "escalating",
            "limited",
        )
    }
    t["ran"] = ran
    return t


def test_allowed_call_runs_and_is_audited(gate: Gate) -> None:
    t = tools(gate)
    with gate.context(principal="erin", thread="t1"):
        assert t["get_price"](symbol="MSFT") == "get_price ok"
    assert t["ran"] == [("get_price", {"symbol": "MSFT"})]
    assert "allowed" in events(gate, tool="get_price")


def test_denied_call_raises_with_rule_and_never_runs(gate: Gate) -> None:
    t = tools(gate)
    with pytest.raises(Denied) as info, gate.context(principal="erin"):
        t["delete_record"](table="users", record_id=1, environment="production")
    assert info.value.verdict is not None and info.value.verdict.rule == "protect-user-1"
    assert "user 1 is protected" in str(info.value)
    assert t["ran"] == []
    assert events(gate, tool="delete_record") == ["denied"]


def test_on_reject_return_gives_the_model_text_instead_of_raising(gate: Gate) -> None:
    def delete_record(table: str, record_id: int, environment: str) -> str:
        return "deleted"

    guarded = gate.guard(delete_record, on_reject="return")
    text = guarded(table="users", record_id=1, environment="production")
    assert "protect-user-1" in text and "not executed" in text


def test_schema_violation_is_denied_with_field_errors(gate: Gate) -> None:
    @gate.guard
    def transfer_funds(amount: int, to: str) -> str:
        return "sent"

    with pytest.raises(Denied) as info:
        transfer_funds(amount="lots", to="ACME")
    assert info.value.verdict is not None and info.value.verdict.rule == "schema"
    assert "amount" in str(info.value)


def run_in_thread(fn: Any, **kwargs: Any) -> Any:
    pool = ThreadPoolExecutor(1)
    return pool.submit(fn, **kwargs)


def test_approved_call_runs_exactly_once_after_the_decision(gate: Gate) -> None:
    t = tools(gate)

    def agent() -> str:
        with gate.context(principal="erin", thread="t1"):
            return str(t["delete_record"](table="orders", record_id=42, environment="production"))

    fut = run_in_thread(agent)
    req = next_pending(gate)
    assert req.action_requests[0].rule == "prod-delete"
    gate.decide(req.id, [{"type": "approve"}], approver="alice")
    assert fut.result(timeout=15) == "delete_record ok"
    assert t["ran"] == [
        ("delete_record", {"table": "orders", "record_id": 42, "environment": "production"})
    ]
    final = gate.wait(req.id)
    assert final.calls[0].execution == "executed"
    seen = events(gate, request_id=req.id)
    assert seen[:1] == ["created"] and "executing" in seen and seen[-1] == "executed"


def test_rejection_reaches_the_agent_with_the_reason(gate: Gate) -> None:
    t = tools(gate)
    fut = run_in_thread(lambda: t["execute"](command="rm -rf /"))
    req = next_pending(gate)
    gate.decide(req.id, [{"type": "reject", "message": "never"}], approver="dave")
    with pytest.raises(Rejected) as info:
        fut.result(timeout=15)
    assert "User rejected the tool call for `execute` with reason: never" in str(info.value)
    assert t["ran"] == []


def test_respond_answers_instead_of_running(gate: Gate) -> None:
    t = tools(gate)
    fut = run_in_thread(lambda: t["execute"](command="make deploy"))
    req = next_pending(gate)
    gate.decide(req.id, [{"type": "respond", "message": "deploys are frozen"}], approver="dave")
    with pytest.raises(Responded) as info:
        fut.result(timeout=15)
    assert str(info.value) == "deploys are frozen"
    assert t["ran"] == []


def test_edit_runs_the_edited_arguments(gate: Gate) -> None:
    t = tools(gate)
    fut = run_in_thread(lambda: t["execute"](command="rm -rf /"))
    req = next_pending(gate)
    gate.decide(
        req.id,
        [
            {
                "type": "edit",
                "edited_action": {"name": "execute", "args": {"command": "rm -rf ./build"}},
            }
        ],
        approver="dave",
    )
    assert fut.result(timeout=15) == "execute ok"
    assert t["ran"] == [("execute", {"command": "rm -rf ./build"})]
    assert gate.wait(req.id).calls[0].resolution == "edited"


@pytest.mark.parametrize(
    ("decision", "field"),
    [
        (
            {"type": "edit", "edited_action": {"name": "get_price", "args": {"command": "x"}}},
            "decisions[0].edited_action.name",
        ),
        (
            {"type": "edit", "edited_action": {"name": "execute", "args": {"cmd": "x"}}},
            "decisions[0].edited_action.args.cmd",
        ),
        ({"type": "edit"}, "decisions[0].edited_action"),
        ({"type": "maybe"}, "decisions[0].type"),
        ({"type": "respond"}, "decisions[0].message"),
        ({"type": "reject", "scope": "thread"}, "decisions[0].scope"),
    ],
)
def test_invalid_decision_names_the_field_and_stores_nothing(
    gate: Gate, decision: dict[str, Any], field: str
) -> None:
    t = tools(gate)
    fut = run_in_thread(lambda: t["execute"](command="rm -rf /"))
    req = next_pending(gate)
    with pytest.raises(DecisionError) as info:
        gate.decide(req.id, [decision], approver="dave")
    assert info.value.field == field
    still = gate._portal.run(gate.get(req.id))
    assert still.pending and still.decisions == [] and still.version == req.version
    gate.decide(req.id, [{"type": "reject"}], approver="dave")
    with pytest.raises(Rejected):
        fut.result(timeout=15)


def test_wrong_number_of_positional_decisions_is_refused(gate: Gate) -> None:
    sub = gate.submit(
        [
            ToolCall("execute", {"command": "a"}, id="c1"),
            ToolCall("execute", {"command": "b"}, id="c2"),
        ],
        gate.make_context("erin", thread="t9"),
    )
    assert sub.request is not None and len(sub.request.calls) == 2
    with pytest.raises(DecisionError) as info:
        gate.decide(sub.request.id, [{"type": "approve"}] * 3, approver="dave")
    assert info.value.field == "decisions"
    done = gate.decide(sub.request.id, [{"type": "approve"}, {"type": "reject"}], approver="dave")
    assert [c.resolution for c in done.calls] == ["approved", "rejected"]


def test_edit_that_the_policy_would_deny_is_refused(gate: Gate) -> None:
    sub = gate.submit(
        [ToolCall("transfer_funds", {"amount": 50_000, "to": "ACME"})], gate.make_context("erin")
    )
    assert sub.request is not None
    call_id = sub.request.calls[0].tool_call_id
    with pytest.raises(DecisionError) as info:
        gate.decide(
            sub.request.id,
            [
                {
                    "tool_call_id": call_id,
                    "type": "edit",
                    "edited_action": {
                        "name": "transfer_funds",
                        "args": {"amount": 5_000_000, "to": "ACME"},
                    },
                }
            ],
            approver="bob",
        )
    assert "huge-transfer" in str(info.value)
    with pytest.raises(DecisionError) as info2:
        gate.decide(
            sub.request.id,
            [
                {
                    "tool_call_id": call_id,
                    "type": "edit",
                    "edited_action": {
                        "name": "transfer_funds",
                        "args": {"amount": 50_000, "to": "EVIL"},
                    },
                }
            ],
            approver="bob",
        )
    assert info2.value.field == "decisions[0].edited_action.args.to"


def test_quorum_needs_two_distinct_approvers(gate: Gate) -> None:
    sub = gate.submit(
        [ToolCall("transfer_funds", {"amount": 50_000, "to": "ACME"})], gate.make_context("erin")
    )
    assert sub.request is not None
    rid = sub.request.id
    one = gate.decide(rid, [{"type": "approve"}], approver="bob")
    assert one.pending and one.calls[0].approvals == ["bob"]
    again = gate.decide(rid, [{"type": "approve"}], approver="bob")  # double click
    assert again.pending and again.calls[0].approvals == ["bob"]
    done = gate.decide(rid, [{"type": "approve"}], approver="carol")
    assert done.status == "resolved" and done.calls[0].resolution == "approved"


def test_one_qualified_reject_vetoes_a_quorum(gate: Gate) -> None:
    sub = gate.submit(
        [ToolCall("transfer_funds", {"amount": 50_000, "to": "ACME"})], gate.make_context("erin")
    )
    assert sub.request is not None
    gate.decide(sub.request.id, [{"type": "approve"}], approver="bob")
    done = gate.decide(sub.request.id, [{"type": "reject", "message": "no"}], approver="carol")
    assert done.calls[0].resolution == "rejected"


def test_edit_restarts_the_quorum_count(gate: Gate) -> None:
    sub = gate.submit(
        [ToolCall("transfer_funds", {"amount": 50_000, "to": "ACME"})], gate.make_context("erin")
    )
    assert sub.request is not None
    rid = sub.request.id
    gate.decide(rid, [{"type": "approve"}], approver="bob")
    edited = gate.decide(
        rid,
        [
            {
                "type": "edit",
                "edited_action": {
                    "name": "transfer_funds",
                    "args": {"amount": 40_000, "to": "ACME"},
                },
            }
        ],
        approver="carol",
    )
    assert edited.pending and edited.calls[0].approvals == ["carol"]
    done = gate.decide(rid, [{"type": "approve"}], approver="bob")
    assert done.calls[0].resolution == "edited"
    assert done.calls[0].action.args["amount"] == 40_000


def test_second_conflicting_decision_says_who_decided(gate: Gate) -> None:
    sub = gate.submit([ToolCall("execute", {"command": "rm x"})], gate.make_context("erin"))
    assert sub.request is not None
    gate.decide(sub.request.id, [{"type": "approve"}], approver="dave")
    with pytest.raises(AlreadyDecided) as info:
        gate.decide(sub.request.id, [{"type": "reject", "message": "late"}], approver="alice")
    assert info.value.by == "dave" and "dave" in str(info.value)
    same = gate.decide(sub.request.id, [{"type": "approve"}], approver="dave")
    assert same.calls[0].resolution == "approved"  # an exact repeat is idempotent


@pytest.mark.parametrize(
    ("approver", "why"),
    [
        ("erin", "made this call"),  # self-approval
        ("bob", "may not decide"),  # lacks the role
        ("mallory", "not in the people"),  # unknown person
    ],
)
def test_unqualified_approvers_are_refused(gate: Gate, approver: str, why: str) -> None:
    sub = gate.submit(
        [ToolCall("execute", {"command": "rm x"})],
        gate.make_context("erin" if approver == "erin" else "dave", thread="t2"),
    )
    if approver == "erin":
        # erin needs the role for the self-approval check to be the reason
        sub = gate.submit(
            [
                ToolCall(
                    "delete_record", {"table": "t", "record_id": 2, "environment": "production"}
                )
            ],
            gate.make_context("alice", thread="t3"),
        )
        approver = "alice"
    assert sub.request is not None
    with pytest.raises(NotAuthorized) as info:
        gate.decide(sub.request.id, [{"type": "approve"}], approver=approver)
    assert why in str(info.value)
    assert gate._portal.run(gate.get(sub.request.id)).pending


def test_deadline_rejects_when_nobody_answers(gate: Gate) -> None:
    t = tools(gate)
    with pytest.raises(Expired) as info:
        t["quick"]()
    assert "No human decision arrived in time" in str(info.value)
    assert t["ran"] == []


def test_on_timeout_allow_runs_the_call(gate: Gate) -> None:
    t = tools(gate)
    assert t["quick_allow"]() == "quick_allow ok"


def test_sweeper_expires_requests_nobody_waits_for(gate: Gate) -> None:
    sub = gate.submit([ToolCall("quick", {})], gate.make_context("erin"))
    assert sub.request is not None
    rid = sub.request.id
    wait_until(lambda: gate._portal.run(gate.get(rid)).status == "expired")
    assert "expired" in events(gate, request_id=rid)


def test_escalation_lets_the_next_group_decide(gate: Gate) -> None:
    sub = gate.submit([ToolCall("escalating", {})], gate.make_context("erin"))
    assert sub.request is not None
    rid = sub.request.id
    with pytest.raises(NotAuthorized):
        gate.decide(rid, [{"type": "approve"}], approver="alice")
    wait_until(lambda: gate._portal.run(gate.get(rid)).escalated)
    esc = gate._portal.run(gate.get(rid))
    assert esc.expires_at > sub.request.expires_at  # extended once
    done = gate.decide(rid, [{"type": "approve"}], approver="alice")
    assert done.calls[0].resolution == "approved"


def test_non_interactive_mode_rejects_at_once(tmp_path: Path) -> None:
    gate = Gate(make_policy(), SQLiteStore(tmp_path / "s.db"), interactive=False)
    try:

        @gate.guard
        def execute(command: str) -> str:
            return "ran"

        with pytest.raises(Rejected) as info:
            execute(command="rm x")
        assert "no human is available" in str(info.value)
    finally:
        gate.close()


def test_non_interactive_env_var(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SIGNOFF_NON_INTERACTIVE", "1")
    gate = Gate(make_policy(), SQLiteStore(tmp_path / "s.db"))
    assert gate.interactive is False
    gate.close()


def test_thread_approval_approves_later_calls_on_that_thread_only(gate: Gate) -> None:
    ctx = gate.make_context("erin", thread="yolo")
    first = gate.submit([ToolCall("execute", {"command": "rm a"})], ctx)
    assert first.request is not None
    gate.decide(first.request.id, [{"type": "approve", "scope": "thread"}], approver="dave")
    # The grant decides at the check: the later call is allowed at once, nothing is stored,
    # and the audit names the grant (auto_approved, with grant_id).
    second = gate.submit([ToolCall("execute", {"command": "rm b"})], ctx)
    assert second.request is None and second.verdicts[0].allowed
    assert second.verdicts[0].grant is not None
    assert "auto_approved" in events(gate)
    other_tool = gate.submit([ToolCall("quick", {})], ctx)
    assert other_tool.request is not None and other_tool.request.pending  # same tool only
    other = gate.submit(
        [ToolCall("execute", {"command": "rm c"})], gate.make_context("erin", thread="careful")
    )
    assert other.request is not None and other.request.pending
    denied = gate.submit(
        [ToolCall("delete_record", {"table": "users", "record_id": 1, "environment": "x"})], ctx
    )
    assert denied.verdicts[0].denied  # deny rules still apply


def test_policy_can_forbid_thread_approval(gate: Gate) -> None:
    sub = gate.submit([ToolCall("no_thread", {})], gate.make_context("erin", thread="t"))
    assert sub.request is not None
    with pytest.raises(DecisionError) as info:
        gate.decide(sub.request.id, [{"type": "approve", "scope": "thread"}], approver="dave")
    assert info.value.field == "decisions[0].scope"


def test_resubmitting_the_same_call_returns_the_same_request(gate: Gate) -> None:
    ctx = gate.make_context("erin", thread="t-idem")
    a = gate.submit([ToolCall("execute", {"command": "rm a"}, id="call_1")], ctx)
    b = gate.submit([ToolCall("execute", {"command": "rm a"}, id="call_1")], ctx)
    assert a.request is not None and b.request is not None
    assert a.request.id == b.request.id and a.created and not b.created
    from signoff import IdempotencyConflict

    with pytest.raises(IdempotencyConflict):
        gate.submit([ToolCall("execute", {"command": "rm EVERYTHING"}, id="call_1")], ctx)


def test_an_approved_call_cannot_be_claimed_twice(gate: Gate) -> None:
    sub = gate.submit(
        [ToolCall("execute", {"command": "rm a"}, id="c1")], gate.make_context("erin")
    )
    assert sub.request is not None
    gate.decide(sub.request.id, [{"type": "approve"}], approver="dave")
    gate._portal.run(gate.aclaim(sub.request.id, "c1"))
    with pytest.raises(AlreadyExecuted) as info:
        gate._portal.run(gate.aclaim(sub.request.id, "c1"))
    assert "reconcile" in str(info.value)


def test_validator_can_deny_and_a_crashing_validator_never_allows(gate: Gate) -> None:
    @gate.validator("get_price")
    def no_crypto(call: ToolCall, ctx: Any) -> Verdict | None:
        if call.args.get("symbol") == "BTC":
            return Verdict.deny("no-crypto", "crypto is off limits")
        if call.args.get("symbol") == "BOOM":
            raise RuntimeError("validator bug")
        return None

    assert gate.check(ToolCall("get_price", {"symbol": "MSFT"})).allowed
    v = gate.check(ToolCall("get_price", {"symbol": "BTC"}))
    assert v.denied and v.rule == "no-crypto"
    crashed = gate.check(ToolCall("get_price", {"symbol": "BOOM"}))
    assert not crashed.allowed and crashed.rule == "defaults.on_error"


def test_rate_limit_requires_approval_after_max_calls(gate: Gate) -> None:
    t = tools(gate)
    with gate.context(principal="erin"):
        assert t["limited"]() == "limited ok"
        assert t["limited"]() == "limited ok"
        verdict = gate.check(ToolCall("limited", {}))
    assert verdict.needs_approval and verdict.rule == "too-many"
    assert gate.check(ToolCall("limited", {}), gate.make_context("bob")).allowed


def test_inquiry_is_answered_by_a_respond_decision(gate: Gate) -> None:
    fut = run_in_thread(
        lambda: gate.ask("Which region?", choices=["eu", "us"], default_answer="eu")
    )
    req = next_pending(gate)
    assert req.kind == "inquiry" and req.inquiry is not None
    assert req.inquiry.question == "Which region?"
    gate.decide(req.id, [{"type": "respond", "message": "us"}], approver="alice")
    assert fut.result(timeout=15) == "us"


def test_interrupt_on_shorthand_lets_the_user_approve_their_own_agent() -> None:
    gate = Gate.from_interrupt_on({"write_file": True, "read_file": False})
    try:
        assert gate.check(ToolCall("read_file", {"path": "a"})).allowed
        sub = gate.submit([ToolCall("write_file", {"path": "a"})], gate.make_context("me"))
        assert sub.request is not None
        cfg = sub.request.review_configs[0]
        assert cfg.allowed_decisions == ["approve", "edit", "reject", "respond"]
        done = gate.decide(sub.request.id, [{"type": "approve"}], approver="me")
        assert done.calls[0].resolution == "approved"
    finally:
        gate.close()


async def test_async_guard_waits_without_blocking_the_loop(gate: Gate) -> None:
    ran = []

    @gate.guard
    async def execute(command: str) -> str:
        ran.append(command)
        return "done"

    task = asyncio.create_task(execute(command="rm -rf build"))
    for _ in range(1500):
        reqs = await gate.alist(status="pending")
        if reqs:
            break
        await asyncio.sleep(0.01)
    assert reqs, "request never appeared"
    await gate.adecide(reqs[0].id, [{"type": "approve"}], approver="dave")
    assert await asyncio.wait_for(task, 15) == "done"
    assert ran == ["rm -rf build"]


def test_pending_list_is_empty_after_decisions(gate: Gate) -> None:
    sub = gate.submit([ToolCall("execute", {"command": "rm a"})], gate.make_context("erin"))
    assert sub.request is not None and pending(gate)
    gate.cancel(sub.request.id, actor="alice", reason="not needed")
    assert pending(gate) == []
    assert gate._portal.run(gate.get(sub.request.id)).calls[0].resolution == "cancelled"


def test_an_approved_call_runs_with_its_original_python_arguments(gate: Gate) -> None:
    # `datetime` is imported at module level: the guard resolves the annotation to prove the
    # value's JSON form (what the approver sees) gives the same datetime back.
    seen: list[object] = []

    def execute(command: str, when: datetime | None = None) -> str:
        seen.append(when)
        return "ok"

    guarded = gate.guard(execute)
    at = datetime(2026, 11, 21, tzinfo=UTC)
    fut = run_in_thread(lambda: guarded(command="rm x", when=at))
    req = next_pending(gate)
    gate.decide(req.id, [{"type": "approve"}], approver="dave")
    assert fut.result(timeout=15) == "ok"
    assert seen == [at]  # a datetime, not its JSON string
