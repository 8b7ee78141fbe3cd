"""Approve, edit, reject, respond through ``Command(resume=...)`` — LangChain's wire shapes
and LangChain's exact model-facing texts."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool
from langgraph.types import Command

from signoff.integrations.langchain import SignoffMiddleware
from tests.integrations.langchain.conftest import (
    Ran,
    audit_events,
    final_text,
    go,
    make_agent,
    no_dangling_calls,
    thread,
    tool_call,
    tool_messages,
)

DELETE = tool_call("delete_file", {"path": "prod/secrets.env"}, "call_1")


def paused(tools: list[BaseTool], **mw: Any) -> tuple[Any, dict[str, Any], Any, SignoffMiddleware]:
    middleware = SignoffMiddleware({"delete_file": True, "read_file": False}, **mw)
    agent = make_agent(middleware, tools, DELETE)
    cfg = thread()
    out = agent.invoke(go(), cfg, version="v2")
    return agent, cfg, out, middleware


def resume_with(agent: Any, cfg: dict[str, Any], *decisions: dict[str, Any]) -> Any:
    return agent.invoke(Command(resume={"decisions": list(decisions)}), cfg, version="v2")


def test_interrupt_value_is_langchains_hitl_request_plus_ids(
    tools: list[BaseTool], ran: Ran
) -> None:
    agent, cfg, out, _ = paused(tools)
    (interrupt,) = out.interrupts
    value = interrupt.value
    assert value["action_requests"] == [
        {
            "name": "delete_file",
            "args": {"path": "prod/secrets.env"},
            "description": "Tool execution requires approval\n\nTool: delete_file\n"
            "Args: {'path': 'prod/secrets.env'}",
            "tool_call_id": "call_1",
            "rule": "interrupt_on.delete_file",
        }
    ]
    (review,) = value["review_configs"]
    assert review["action_name"] == "delete_file"
    assert review["allowed_decisions"] == ["approve", "edit", "reject", "respond"]
    assert review["args_schema"]["properties"]["path"]["type"] == "string"
    assert value["request_id"].startswith("req_")
    assert value["tool_call_ids"] == ["call_1"]
    assert value["rule_ids"] == ["interrupt_on.delete_file"]
    assert value["expires_at"]
    assert ran.calls == []
    assert agent.get_state(cfg).next == ("model",)


def test_approve_runs_the_tool_once_and_audits_it(tools: list[BaseTool], ran: Ran) -> None:
    agent, cfg, _, middleware = paused(tools)
    out = resume_with(agent, cfg, {"type": "approve"})
    assert ran.calls == [("delete_file", {"path": "prod/secrets.env"})]
    assert tool_messages(out.value["messages"])["call_1"].content == "deleted prod/secrets.env"
    assert final_text(out) == "done: deleted prod/secrets.env"
    assert no_dangling_calls(out.value["messages"])
    events = audit_events(middleware.gate)
    for event in ("created", "decided", "resolved", "executing", "executed"):
        assert events.count(event) == 1, (event, events)


def test_edit_runs_the_edited_call_and_tells_the_model(tools: list[BaseTool], ran: Ran) -> None:
    agent, cfg, _, _ = paused(tools)
    edited = {"name": "delete_file", "args": {"path": "scratch/copy.env"}}
    out = resume_with(agent, cfg, {"type": "edit", "edited_action": edited})
    assert ran.calls == [("delete_file", {"path": "scratch/copy.env"})]
    message = tool_messages(out.value["messages"])["call_1"]
    assert message.content == (
        "Note: a human reviewer replaced this tool call before it ran. The call recorded in "
        "your message is the one you produced, not the one that executed. This was "
        "intentional and authorized. Do not re-issue your original call. Executed instead: "
        'delete_file with arguments {"path": "scratch/copy.env"}.\n\nTool response:\n'
        "deleted scratch/copy.env"
    )
    ai = out.value["messages"][1]
    assert ai.tool_calls[0]["args"] == {"path": "prod/secrets.env"}  # the model's own call


def test_reject_with_a_reason_uses_langchains_text(tools: list[BaseTool], ran: Ran) -> None:
    agent, cfg, _, _ = paused(tools)
    out = resume_with(agent, cfg, {"type": "reject", "message": "never touch prod"})
    message = tool_messages(out.value["messages"])["call_1"]
    assert message.status == "error"
    assert message.content == (
        "User rejected the tool call for `delete_file` with reason: never touch prod"
    )
    assert ran.calls == []
    assert no_dangling_calls(out.value["messages"])


def test_reject_without_a_reason_says_not_executed(tools: list[BaseTool], ran: Ran) -> None:
    agent, cfg, _, _ = paused(tools)
    out = resume_with(agent, cfg, {"type": "reject"})
    assert tool_messages(out.value["messages"])["call_1"].content == (
        "User rejected the tool call for `delete_file` with id call_1. The tool was not "
        "executed. Do not retry this tool call unless the user explicitly requests it."
    )
    assert ran.calls == []


def test_respond_answers_for_the_tool(tools: list[BaseTool], ran: Ran) -> None:
    middleware = SignoffMiddleware({"ask_user": {"allowed_decisions": ["respond", "reject"]}})
    ask = tool_call("ask_user", {"question": "favourite colour?"}, "call_q")
    agent = make_agent(middleware, tools, ask)
    cfg = thread()
    out = agent.invoke(go(), cfg, version="v2")
    assert out.interrupts[0].value["review_configs"][0]["allowed_decisions"] == [
        "respond",
        "reject",
    ]
    out = resume_with(agent, cfg, {"type": "respond", "message": "blue"})
    message = tool_messages(out.value["messages"])["call_q"]
    assert (message.content, message.status) == ("blue", "success")
    assert ran.calls == []


def test_keyed_decisions_answer_calls_by_tool_call_id(tools: list[BaseTool], ran: Ran) -> None:
    middleware = SignoffMiddleware({"delete_file": True})
    agent = make_agent(
        middleware,
        tools,
        tool_call("delete_file", {"path": "a"}, "d1"),
        tool_call("delete_file", {"path": "b"}, "d2"),
    )
    cfg = thread()
    agent.invoke(go(), cfg, version="v2")
    decisions = {"d2": {"type": "approve"}, "d1": {"type": "reject", "message": "keep a"}}
    out = agent.invoke(Command(resume={"decisions": decisions}), cfg, version="v2")
    assert ran.calls == [("delete_file", {"path": "b"})]
    assert tool_messages(out.value["messages"])["d1"].status == "error"


def test_description_string_and_callable_from_interrupt_on(tools: list[BaseTool]) -> None:
    seen: list[str] = []

    def describe(call: Any, state: Any, runtime: Any) -> str:
        seen.append(call["id"])
        return f"Agent wants to delete {call['args']['path']}"

    middleware = SignoffMiddleware(
        {
            "delete_file": {"allowed_decisions": ["approve", "reject"], "description": describe},
            "transfer": {"allowed_decisions": ["approve"], "description": "Money {moves}"},
        }
    )
    agent = make_agent(
        middleware,
        tools,
        tool_call("delete_file", {"path": "x"}, "d1"),
        tool_call("transfer", {"amount": 5, "to": "bob"}, "t1"),
    )
    cfg = thread()
    out = agent.invoke(go(), cfg, version="v2")
    described = [a["description"] for a in out.interrupts[0].value["action_requests"]]
    assert described == ["Agent wants to delete x", "Money {moves}"]
    resume_with(agent, cfg, {"type": "approve"}, {"type": "approve"})
    assert seen == ["d1"]  # evaluated once, not again on resume


def test_when_predicate_runs_once_per_call(tools: list[BaseTool], ran: Ran) -> None:
    asked: list[str] = []

    def only_prod(request: Any) -> bool:
        asked.append(request.tool_call["id"])
        return bool(request.tool_call["args"]["path"].startswith("prod/"))

    middleware = SignoffMiddleware(
        {"delete_file": {"allowed_decisions": ["approve", "reject"], "when": only_prod}}
    )
    agent = make_agent(
        middleware,
        tools,
        tool_call("delete_file", {"path": "scratch/x"}, "d1"),
        tool_call("delete_file", {"path": "prod/y"}, "d2"),
    )
    cfg = thread()
    out = agent.invoke(go(), cfg, version="v2")
    assert [a["args"] for a in out.interrupts[0].value["action_requests"]] == [{"path": "prod/y"}]
    assert ran.calls == [("delete_file", {"path": "scratch/x"})]  # ran before the decision
    resume_with(agent, cfg, {"type": "reject"})
    assert ran.calls == [("delete_file", {"path": "scratch/x"})]
    assert sorted(asked) == ["d1", "d2"]  # never re-run on resume
    assert "allowed" in audit_events(middleware.gate, tool="delete_file")
