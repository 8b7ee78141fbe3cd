"""What a signoff policy adds on top of ``interrupt_on``: deny rules, approve-for-the-thread,
non-interactive runs, the exactly-once ledger — through the same middleware."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from signoff import Gate
from signoff.integrations.langchain import SignoffMiddleware
from signoff.integrations.langchain.testing import ScriptedChatModel
from tests.integrations.langchain.conftest import (
    Ran,
    go,
    make_agent,
    no_dangling_calls,
    thread,
    tool_call,
    tool_messages,
)


def test_a_deny_rule_answers_at_once_without_pausing(
    tools: list[BaseTool], ran: Ran, memory_gate: Gate
) -> None:
    agent = make_agent(
        SignoffMiddleware(memory_gate),
        tools,
        tool_call("delete_file", {"path": "/etc/passwd"}, "d1"),
        tool_call("read_file", {"path": "a"}, "r1"),
    )
    out = agent.invoke(go(), thread(user_id="erin"), version="v2")
    assert out.interrupts == ()
    denied = tool_messages(out.value["messages"])["d1"]
    assert denied.status == "error"
    assert "denied by policy rule `never-etc`: system files are off limits" in denied.content
    assert ran.calls == [("read_file", {"path": "a"})]


def two_turns(*calls: dict[str, Any]) -> ScriptedChatModel:
    """Each user message gets the next call; tool results get a summary."""

    def script(messages: Sequence[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(f"done: {messages[-1].content}")
        turn = sum(isinstance(m, HumanMessage) for m in messages) - 1
        return AIMessage("", tool_calls=[calls[turn]])

    return ScriptedChatModel(script=script)


def test_approve_for_the_thread_lets_later_calls_through(
    tools: list[BaseTool], ran: Ran, memory_gate: Gate
) -> None:
    agent = create_agent(
        two_turns(
            tool_call("delete_file", {"path": "tmp/1"}, "d1"),
            tool_call("delete_file", {"path": "tmp/2"}, "d2"),
        ),
        tools=tools,
        middleware=[SignoffMiddleware(memory_gate, approver="alice")],
        checkpointer=InMemorySaver(),
    )
    cfg = thread(user_id="erin")
    agent.invoke(go(), cfg, version="v2")
    always = {"type": "approve", "scope": "thread"}
    agent.invoke(Command(resume={"decisions": [always]}), cfg, version="v2")
    out = agent.invoke(go("and the next one"), cfg, version="v2")
    assert out.interrupts == ()
    assert ran.calls == [("delete_file", {"path": "tmp/1"}), ("delete_file", {"path": "tmp/2"})]


def test_non_interactive_runs_answer_no_human_is_available(
    tools: list[BaseTool], ran: Ran, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIGNOFF_NON_INTERACTIVE", "1")
    agent = make_agent(
        SignoffMiddleware({"delete_file": True}),
        tools,
        tool_call("delete_file", {"path": "p"}, "d1"),
    )
    out = agent.invoke(go(), thread(), version="v2")
    assert out.interrupts == ()
    assert "no human is available" in tool_messages(out.value["messages"])["d1"].content
    assert ran.calls == []


def test_a_failing_approved_call_is_recorded_and_never_rerun(ran: Ran) -> None:
    @tool
    def delete_file(path: str) -> str:
        """Delete a file (the disk is gone)."""
        ran.calls.append(("delete_file", {"path": path}))
        raise OSError("disk gone")

    middleware = SignoffMiddleware({"delete_file": True})
    agent = make_agent(middleware, [delete_file], tool_call("delete_file", {"path": "p"}, "d1"))
    cfg = thread()
    out = agent.invoke(go(), cfg, version="v2")
    request_id = out.interrupts[0].value["request_id"]
    with pytest.raises(OSError, match="disk gone"):
        agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg, version="v2")
    req = middleware.gate._portal.run(middleware.gate.get(request_id))
    assert req.calls[0].execution == "failed"
    out = agent.invoke(None, cfg, version="v2")  # LangGraph retries the failed tools task
    assert ran.calls == [("delete_file", {"path": "p"})]  # exactly once
    assert "exactly-once execution forbids running it again" in (
        tool_messages(out.value["messages"])["d1"].content
    )
    assert no_dangling_calls(out.value["messages"])


def test_blocking_mode_can_hold_ungated_calls_too(tools: list[BaseTool], ran: Ran) -> None:
    import threading
    import time

    middleware = SignoffMiddleware({"delete_file": True}, mode="blocking", hold_ungated=True)
    agent = make_agent(
        middleware,
        tools,
        tool_call("read_file", {"path": "a"}, "r1"),
        tool_call("delete_file", {"path": "b"}, "d1"),
        checkpointer=None,
    )
    worker = threading.Thread(target=agent.invoke, args=(go(),))
    worker.start()
    gate = middleware.gate
    while not (waiting := gate._portal.run(gate.alist(status="pending"))):
        time.sleep(0.01)
    time.sleep(0.05)
    assert ran.calls == []  # read_file waits for the decision as well
    gate.decide(waiting[0].id, [{"type": "approve"}], approver="ops")
    worker.join(30)
    assert sorted(ran.names()) == ["delete_file", "read_file"]
