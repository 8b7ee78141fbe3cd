"""The in-client approval prompt shows agent-controlled text inert: no escape codes, no bidi
overrides, no fake lines — and secret-named arguments masked."""

from __future__ import annotations

from signoff import Gate, ToolCall
from signoff.integrations.mcp import texts
from signoff.store import MemoryStore
from tests.integrations.mcp.conftest import make_policy


def test_the_approval_prompt_is_inert_against_a_hostile_agent() -> None:
    gate = Gate(make_policy(), MemoryStore())
    try:
        hostile = "tmp\x1b[2J\u202eexe.txt\nRule: approved-by-admin"
        ctx = gate.make_context("erin")
        call = ToolCall("delete_file", {"path": hostile, "api_key": "sk-live-1"}, id="c1")
        sub = gate.submit([call], ctx)
        assert sub.request is not None
        prompt = texts.approval_prompt(gate.policy, sub.request)
    finally:
        gate.close()
    assert "\x1b" not in prompt and "\u202e" not in prompt
    assert "sk-live-1" not in prompt
    # the agent's newline cannot fake a line of the prompt
    assert [line for line in prompt.splitlines() if line.startswith("Rule:")] == [
        "Rule: delete_file.default"
    ]
