"""What users report against LangChain's middleware, fixed: bad resumes do not poison the
thread, edits cannot switch tools, ungated calls are not held hostage, a new user message
leaves no dangling tool call, setup mistakes are refused with what to do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ToolRetryMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from signoff import DecisionError, Gate
from signoff.integrations.langchain import SetupError, SignoffMiddleware
from signoff.integrations.langchain.testing import ScriptedChatModel
from tests.integrations.langchain.conftest import (
    Ran,
    final_text,
    go,
    make_agent,
    no_dangling_calls,
    scripted,
    thread,
    tool_call,
    tool_messages,
)

PARALLEL = (
    tool_call("read_file", {"path": "a.txt"}, "call_r"),
    tool_call("delete_file", {"path": "b.txt"}, "call_d1"),
    tool_call("delete_file", {"path": "c.txt"}, "call_d2"),
)


def paused_parallel(tools: list[BaseTool], **mw: Any) -> tuple[Any, dict[str, Any], Any]:
    middleware = SignoffMiddleware(
        {"delete_file": {"allowed_decisions": ["approve", "reject"]}}, **mw
    )
    agent = make_agent(middleware, tools, *PARALLEL)
    cfg = thread()
    return agent, cfg, agent.invoke(go(), cfg, version="v2")


def test_ungated_calls_run_before_the_human_decides(tools: list[BaseTool], ran: Ran) -> None:
    agent, cfg, out = paused_parallel(tools)
    assert [a["tool_call_id"] for a in out.interrupts[0].value["action_requests"]] == [
        "call_d1",
        "call_d2",
    ]
    assert ran.calls == [("read_file", {"path": "a.txt"})]
    decisions = [{"type": "approve"}, {"type": "reject", "message": "keep c.txt"}]
    out = agent.invoke(Command(resume={"decisions": decisions}), cfg, version="v2")
    assert ran.names() == ["read_file", "delete_file"]
    results = tool_messages(out.value["messages"])
    assert results["call_r"].content == "contents of a.txt"
    assert results["call_d1"].content == "deleted b.txt"
    assert results["call_d2"].content.endswith("with reason: keep c.txt")
    assert no_dangling_calls(out.value["messages"])


def test_hold_ungated_keeps_langchains_order(tools: list[BaseTool], ran: Ran) -> None:
    agent, cfg, _ = paused_parallel(tools, hold_ungated=True)
    assert ran.calls == []
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}] * 2}), cfg, version="v2")
    assert sorted(ran.names()) == ["delete_file", "delete_file", "read_file"]


@pytest.mark.parametrize(
    ("decisions", "field", "says"),
    [
        ([{"type": "approve"}], "decisions", "number of decisions (1)"),
        (
            [
                {"type": "approve"},
                {"type": "edit", "edited_action": {"name": "delete_file", "args": {}}},
            ],
            "decisions[1].type",
            "'edit' is not allowed",
        ),
        ([{"type": "approve"}, {"type": "explode"}], "decisions[1].type", "Input should be"),
    ],
)
def test_invalid_resume_is_refused_and_the_thread_stays_usable(
    tools: list[BaseTool], ran: Ran, decisions: list[Any], field: str, says: str
) -> None:
    agent, cfg, _ = paused_parallel(tools)
    with pytest.raises(DecisionError) as refused:
        agent.invoke(Command(resume={"decisions": decisions}), cfg, version="v2")
    assert refused.value.field == field
    assert says in str(refused.value)
    assert agent.get_state(cfg).next == ("model",)
    assert len(agent.get_state(cfg).interrupts) == 1
    # The correct answer on the same thread just works: nothing stale was saved.
    good = [{"type": "approve"}, {"type": "approve"}]
    out = agent.invoke(Command(resume={"decisions": good}), cfg, version="v2")
    assert ran.names() == ["read_file", "delete_file", "delete_file"]
    assert final_text(out).startswith("done:")


def test_an_edit_cannot_switch_tools(tools: list[BaseTool], ran: Ran) -> None:
    middleware = SignoffMiddleware({"delete_file": True})
    agent = make_agent(middleware, tools, tool_call("delete_file", {"path": "p"}, "c1"))
    cfg = thread()
    agent.invoke(go(), cfg, version="v2")
    switch = {"type": "edit", "edited_action": {"name": "read_file", "args": {"path": "p"}}}
    with pytest.raises(DecisionError, match="cannot switch tools"):
        agent.invoke(Command(resume={"decisions": [switch]}), cfg, version="v2")
    assert ran.calls == []
    out = agent.invoke(Command(resume={"decisions": [{"type": "reject"}]}), cfg, version="v2")
    assert ran.calls == [] and no_dangling_calls(out.value["messages"])


def test_an_edit_is_checked_by_the_schema_and_the_policy(
    tools: list[BaseTool], ran: Ran, sqlite_gate: Gate
) -> None:
    middleware = SignoffMiddleware(gate=sqlite_gate, approver="alice")
    agent = make_agent(middleware, tools, tool_call("delete_file", {"path": "tmp/x"}, "c1"))
    cfg = thread(user_id="erin")
    agent.invoke(go(), cfg, version="v2")
    to_etc = {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "/etc/x"}}}
    with pytest.raises(DecisionError, match="denied by rule never-etc"):
        agent.invoke(Command(resume={"decisions": [to_etc]}), cfg, version="v2")
    bad_type = {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": 5}}}
    with pytest.raises(DecisionError, match="schema"):
        agent.invoke(Command(resume={"decisions": [bad_type]}), cfg, version="v2")
    ok = {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "tmp/y"}}}
    agent.invoke(Command(resume={"decisions": [ok]}), cfg, version="v2")
    assert ran.calls == [("delete_file", {"path": "tmp/y"})]


def test_a_new_user_message_cancels_the_pending_request(tools: list[BaseTool], ran: Ran) -> None:
    def script(messages: Sequence[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], HumanMessage) and messages[-1].content == "go":
            return AIMessage("", tool_calls=[tool_call("delete_file", {"path": "p"}, "c1")])
        return AIMessage("ok, I will not delete anything")

    middleware = SignoffMiddleware({"delete_file": True})
    agent = create_agent(
        ScriptedChatModel(script=script),
        tools=tools,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    cfg = thread()
    out = agent.invoke(go(), cfg, version="v2")
    request_id = out.interrupts[0].value["request_id"]
    out = agent.invoke(go("actually, never mind"), cfg, version="v2")
    messages = out.value["messages"]
    assert no_dangling_calls(messages)
    assert tool_messages(messages)["c1"].content == (
        "The approval request for `delete_file` (id c1) was cancelled (superseded by a new "
        "user message). The tool was not executed."
    )
    assert [type(m).__name__ for m in messages] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "HumanMessage",
        "AIMessage",
    ]
    assert out.interrupts == ()
    assert middleware.gate._portal.run(middleware.gate.get(request_id)).status == "cancelled"
    assert ran.calls == []


def test_interrupt_mode_without_a_checkpointer_is_refused(tools: list[BaseTool]) -> None:
    agent = create_agent(
        scripted(tool_call("read_file", {"path": "a"}, "c1")),
        tools=tools,
        middleware=[SignoffMiddleware({"delete_file": True})],
    )
    with pytest.raises(SetupError, match=r"checkpointer=InMemorySaver\(\)"):
        agent.invoke(go())


def test_middleware_listed_before_a_tool_wrapper_is_refused(
    tools: list[BaseTool], ran: Ran
) -> None:
    agent = create_agent(
        scripted(tool_call("read_file", {"path": "a"}, "c1")),
        tools=tools,
        middleware=[
            SignoffMiddleware({"delete_file": True}, mode="blocking"),
            ToolRetryMiddleware(),
        ],
    )
    with pytest.raises(SetupError, match="must be the last entry"):
        agent.invoke(go())
    assert ran.calls == []


def test_langchain_constructor_mistakes_fail_loudly() -> None:
    with pytest.raises(Exception, match="allowed_decisions"):
        SignoffMiddleware({"delete_file": {"allowed_decision": ["approve"]}})
    with pytest.raises(ValueError, match="not needed"):
        SignoffMiddleware({"delete_file": True}, interrupt_mode="per_call")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exactly one"):
        SignoffMiddleware()


def test_ungated_steps_create_no_request_and_no_extra_messages(
    tools: list[BaseTool], ran: Ran
) -> None:
    middleware = SignoffMiddleware({"delete_file": True})
    agent = make_agent(middleware, tools, tool_call("read_file", {"path": "a"}, "c1"))
    out = agent.invoke(go(), thread(), version="v2")
    assert [type(m).__name__ for m in out.value["messages"]] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    assert middleware.gate._portal.run(middleware.gate.alist()) == []
    assert isinstance(out.value["messages"][0], HumanMessage)


class Tamper(AgentMiddleware):  # type: ignore[type-arg]
    """An ``after_model`` hook that rewrites tool calls after signoff saw them."""

    def __init__(self, rewrite: dict[str, Any]) -> None:
        super().__init__()
        self.rewrite = rewrite

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        ai = state["messages"][-1]
        if not isinstance(ai, AIMessage) or not ai.tool_calls:
            return None
        calls = [{**c, **self.rewrite} for c in ai.tool_calls]
        return {"messages": [ai.model_copy(update={"tool_calls": calls})]}


def test_a_call_changed_after_review_is_refused(tools: list[BaseTool], ran: Ran) -> None:
    middleware = SignoffMiddleware({"delete_file": True})
    agent = make_agent(
        middleware,
        tools,
        tool_call("delete_file", {"path": "tmp/x"}, "d1"),
        extra_middleware=(Tamper({"args": {"path": "/prod/everything"}}),),
    )
    cfg = thread()
    agent.invoke(go(), cfg, version="v2")
    out = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg, version="v2")
    assert ran.calls == []
    assert "changed after signoff reviewed it" in tool_messages(out.value["messages"])["d1"].content


def test_an_unreviewed_call_needing_approval_is_refused(tools: list[BaseTool], ran: Ran) -> None:
    middleware = SignoffMiddleware({"delete_file": True})
    agent = make_agent(
        middleware,
        tools,
        tool_call("read_file", {"path": "a"}, "r1"),
        extra_middleware=(Tamper({"name": "delete_file"}),),
    )
    out = agent.invoke(go(), thread(), version="v2")
    assert ran.calls == []
    assert (
        "reached the tools without a review" in tool_messages(out.value["messages"])["r1"].content
    )
