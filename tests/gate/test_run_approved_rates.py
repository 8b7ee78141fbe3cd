"""``arun_approved`` counts a run for the policy's rate limits only for a tool that has them
(the request's context is rebuilt for that count alone)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from signoff import Gate, Policy
from signoff.model import CallContext, Principal, ToolCall, utcnow
from signoff.store import MemoryStore

POLICY = """
version: 1
people:
  alice: {roles: [ops]}
  erin: {roles: []}
tools:
  send_email:
    default: require_approval
    approvers: {roles: [ops]}
    rules:
      - id: burst
        when: {rate: {max: 100, per: 1h, by: principal}}
        decision: deny
        reason: too many emails
  delete_record:
    default: require_approval
    approvers: {roles: [ops]}
"""


async def _approved_run(gate: Gate, call: ToolCall) -> None:
    ctx = CallContext(principal=Principal("erin"), thread="t1", agent="a1")
    sub = await gate.asubmit([call], ctx)
    assert sub.request is not None
    await gate.adecide(sub.request.id, [{"type": "approve"}], approver="alice")
    req = await gate.await_request(sub.request.id)

    async def run(args: dict[str, Any]) -> str:
        return "done"

    assert await gate.arun_approved(req, call.id, run) == "done"


def test_an_approved_run_of_a_rate_limited_tool_is_counted_and_others_are_not() -> None:
    async def main() -> None:
        gate = Gate(Policy.from_yaml(POLICY), MemoryStore())
        await gate.astart()
        try:
            assert gate.counts_executions("send_email")
            assert not gate.counts_executions("delete_record")
            await _approved_run(gate, ToolCall("send_email", {"to": "x@example.com"}))
            await _approved_run(gate, ToolCall("delete_record", {"id": 1}))
            now = utcnow() + timedelta(seconds=1)
            assert gate.rates.count("send_email", "principal", "erin", 3600, now) == 1
            assert gate.rates.count("delete_record", "tool", "", 3600, now) == 0
        finally:
            await gate.aclose()

    asyncio.run(main())
