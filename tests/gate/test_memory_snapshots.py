"""The MemoryStore shares read-only request snapshots (copy on write): the gate's whole path
never changes one in place, and a change never shows in a snapshot handed out before it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from signoff import CallContext, Gate, ToolCall
from signoff.model import ApprovalRequest, Principal, Transition
from tests.gate.conftest import make_policy
from tests.gate.snapshots import SnapshotCheckingStore

CTX = CallContext(principal=Principal(id="agent-user"), agent="bot", thread="t-snap")


def _delete(i: int) -> ToolCall:
    return ToolCall(
        id=f"c{i}",
        name="delete_record",
        args={"table": "orders", "record_id": i, "environment": "production"},
    )


async def _tool(args: dict[str, Any]) -> str:
    return f"ran {args}"


async def _cycle(gate: Gate, call: ToolCall, decision: dict[str, Any], waiters: int = 3) -> Any:
    sub = await gate.asubmit([call], CTX)
    assert sub.request is not None
    waiting = [asyncio.create_task(gate.await_request(sub.request.id)) for _ in range(waiters)]
    await asyncio.sleep(0)
    await gate.adecide(sub.request.id, [decision], approver="alice")
    woken = await asyncio.wait_for(asyncio.gather(*waiting), 10)
    return sub.request, woken


def test_approve_reject_and_edit_cycles_leave_every_shared_snapshot_untouched() -> None:
    async def main() -> None:
        store = SnapshotCheckingStore()
        gate = Gate(make_policy(), store)
        await gate.astart()
        try:
            _, woken = await _cycle(gate, _delete(1), {"type": "approve"})
            assert all(w is woken[0] for w in woken)  # one snapshot for every waiter
            assert await gate.arun_approved(woken[0], "c1", _tool) == (
                "ran {'table': 'orders', 'record_id': 1, 'environment': 'production'}"
            )
            _, rejected = await _cycle(gate, _delete(2), {"type": "reject", "message": "no"})
            assert rejected[0].calls[0].resolution == "rejected"
            edit = ToolCall(id="c3", name="execute", args={"command": "rm -r build"})
            sub = await gate.asubmit([edit], CTX)
            assert sub.request is not None
            edited = {"name": "execute", "args": {"command": "rm -r build/tmp"}}
            await gate.adecide(
                sub.request.id, [{"type": "edit", "edited_action": edited}], approver="dave"
            )
            done = await gate.await_request(sub.request.id, timeout=10)
            assert done.terminal
            await gate.arun_approved(done, "c3", _tool)
            store.assert_untouched()
        finally:
            await gate.aclose()

    asyncio.run(main())


def test_a_snapshot_read_before_a_change_keeps_its_old_state() -> None:
    async def main() -> None:
        store = SnapshotCheckingStore()
        gate = Gate(make_policy(), store)
        await gate.astart()
        try:
            sub = await gate.asubmit([_delete(7)], CTX)
            assert sub.request is not None
            before = await store.get_request(sub.request.id)
            assert before is not None and before.pending
            await gate.adecide(sub.request.id, [{"type": "approve"}], approver="alice")
            after = await store.get_request(sub.request.id)
            assert after is not None and after.terminal and after is not before
            assert before.pending and not before.decisions  # the old snapshot is unchanged
            own = after.copy_for_update()  # a request of one's own to change
            own.status = "cancelled"
            again = await store.get_request(sub.request.id)
            assert again is not None and again.status == after.status != "cancelled"
        finally:
            await gate.aclose()

    asyncio.run(main())


def test_the_checking_store_notices_a_snapshot_changed_in_place() -> None:
    async def main() -> None:
        store = SnapshotCheckingStore()
        gate = Gate(make_policy(), store)
        await gate.astart()
        try:
            sub = await gate.asubmit([_delete(9)], CTX)
            assert sub.request is not None
            shared = await store.get_request(sub.request.id)
            assert shared is not None
            shared.calls[0].approvals.append("mallory")  # what no reader may do
            with pytest.raises(AssertionError, match="changed in place"):
                store.assert_untouched(sub.request.id)
            shared.calls[0].approvals.pop()
        finally:
            await gate.aclose()

    asyncio.run(main())


def test_a_change_that_alters_a_shared_review_config_in_place_is_noticed() -> None:
    async def main() -> None:
        store = SnapshotCheckingStore()
        gate = Gate(make_policy(), store)
        await gate.astart()
        try:
            sub = await gate.asubmit([_delete(11)], CTX)
            assert sub.request is not None

            def bad_mutation(req: ApprovalRequest) -> Transition:
                req.review_configs[0].timeout_s = 1.0  # items are shared: never in place
                return Transition(req)

            with pytest.raises(AssertionError, match="altered the snapshot it replaced"):
                await store.update_request(sub.request.id, bad_mutation)
        finally:
            store._forms.clear()  # the failure above is the point of this test
            await gate.aclose()

    asyncio.run(main())


SECRETS_POLICY = """
version: 1
people:
  alice: {roles: [ops]}
tools:
  deploy:
    default: require_approval
    approvers: {roles: [ops]}
    allowed_decisions: [approve, edit, reject]
    editable_args: "*"
"""


@pytest.mark.parametrize("decision", ["edit", "reject"])
def test_sealing_a_finished_calls_secrets_replaces_the_shared_items(decision: str) -> None:
    """A change's working copy shares the snapshot's action requests and decisions; sealing
    a finished call's secret-named arguments replaces them instead of changing them."""

    async def main() -> None:
        store = SnapshotCheckingStore()
        gate = Gate(make_policy(SECRETS_POLICY), store)
        await gate.astart()
        try:
            call = ToolCall(id="s1", name="deploy", args={"version": "v1", "api_key": "sk-LIVE"})
            sub = await gate.asubmit([call], CTX)
            assert sub.request is not None
            if decision == "edit":
                edited = {"name": "deploy", "args": {"version": "v2", "api_key": "sk-LIVE"}}
                answer: dict[str, Any] = {"type": "edit", "edited_action": edited}
            else:
                answer = {"type": "reject", "message": "no"}
            await gate.adecide(sub.request.id, [answer], approver="alice")
            decided = await gate.await_request(sub.request.id, timeout=10)
            if decision == "edit":
                assert decided.decisions[0].edited_action is not None
                assert decided.decisions[0].edited_action.args["api_key"] == "sk-LIVE"
                assert await gate.arun_approved(decided, "s1", _tool)
            final = await store.get_request(sub.request.id)
            assert final is not None
            assert final.action_requests[0].args["api_key"] != "sk-LIVE"  # sealed
            if decision == "edit":
                assert final.decisions[0].edited_action is not None
                assert final.decisions[0].edited_action.args["api_key"] != "sk-LIVE"
                # the snapshot the agent resumed with still holds what ran
                assert decided.decisions[0].edited_action.args["api_key"] == "sk-LIVE"
            store.assert_untouched()
        finally:
            await gate.aclose()

    asyncio.run(main())
