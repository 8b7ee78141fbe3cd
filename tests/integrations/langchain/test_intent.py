"""The LangChain middleware runs intent judges before anything runs: the judge sees the
user's last message and the model's text, and a mismatch denies (or asks a human)."""

from __future__ import annotations

import textwrap

from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool

from signoff import Gate, Policy
from signoff.integrations.langchain import SignoffMiddleware
from signoff.store import MemoryStore
from tests.gate import intent_judges
from tests.integrations.langchain.conftest import (
    Ran,
    audit_events,
    make_agent,
    thread,
    tool_call,
    tool_messages,
)

POLICY = """
version: 1
defaults: {unknown_tool: allow}
judges:
  rules: {kind: python, function: "tests.gate.intent_judges:scripted"}
tools:
  delete_file:
    default: allow
    intent: {judge: rules, on_mismatch: deny}
  read_file:
    default: allow
"""


def test_a_mismatch_is_denied_and_the_judge_saw_the_conversation(
    tools: list[BaseTool], ran: Ran
) -> None:
    intent_judges.asked.clear()
    intent_judges.answers["show me a.txt"] = {"verdict": "mismatch", "reason": "asked to read"}
    gate = Gate(Policy.from_yaml(textwrap.dedent(POLICY)), MemoryStore())
    agent = make_agent(
        SignoffMiddleware(gate),
        tools,
        tool_call("read_file", {"path": "a.txt"}, "r1"),
        tool_call("delete_file", {"path": "a.txt"}, "d1"),
    )
    out = agent.invoke({"messages": [HumanMessage("show me a.txt")]}, thread(), version="v2")
    assert ran.calls == [("read_file", {"path": "a.txt"})]
    denied = tool_messages(out.value["messages"])["d1"]
    assert denied.status == "error" and "asked to read" in str(denied.content)
    (request,) = intent_judges.asked
    assert request.tool == "delete_file" and request.user_request == "show me a.txt"
    assert "intent_checked" in audit_events(gate, tool="delete_file")
    # the same step again: answered from the cache
    intent_judges.answers["show me a.txt"] = {"verdict": "consistent", "reason": "changed"}
    agent.invoke({"messages": [HumanMessage("show me a.txt")]}, thread(), version="v2")
    assert len(intent_judges.asked) == 1 and ran.names() == ["read_file", "read_file"]
    gate.close()
