"""The MCP proxy asks an intent judge before a tools/call is forwarded."""

from __future__ import annotations

from typing import Any

from signoff import Gate
from signoff.store import MemoryStore
from tests.gate import intent_judges
from tests.integrations.mcp.conftest import ERAS, POLICY, make_policy, proxied

JUDGED = (
    POLICY.replace(
        "  echo: {default: allow}",
        "  echo: {default: allow, intent: {judge: rules, on_mismatch: deny}}",
    )
    + """
judges:
  rules: {kind: python, function: "tests.gate.intent_judges:scripted"}
"""
)


@ERAS
async def test_a_judged_call_runs_or_is_refused_by_the_judge(upstream: Any, mode: str) -> None:
    server, events = upstream
    intent_judges.asked.clear()
    intent_judges.answers.clear()
    gate = Gate(make_policy(JUDGED), MemoryStore())
    try:
        async with proxied(gate, server, mode=mode) as client:
            ran = await client.call_tool("echo", {"text": "hi"})
            assert not ran.is_error and events == ["echo hi"]
            intent_judges.answers[""] = {"verdict": "mismatch", "reason": "nobody asked"}
            refused = await client.call_tool("echo", {"text": "again"})
        assert refused.is_error and events == ["echo hi"]
        assert [r.tool for r in intent_judges.asked] == ["echo", "echo"]
    finally:
        await gate.aclose()
