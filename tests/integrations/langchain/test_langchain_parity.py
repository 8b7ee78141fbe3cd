"""Where LangChain's own middleware works, the one-line swap works too (issue #13):

* a pause in one process resumes in another, with any signoff store — the default
  in-memory one included (the request is rebuilt from the checkpoint and checked again);
* a tool-call id reused in a later turn is a new call, asked again;
* async agents never block their event loop on signoff (blockbuster is active here);
* editing a paused call with ``update_state`` is refused with what to do instead.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from signoff import Gate, Policy
from signoff.integrations.langchain import SignoffMiddleware
from signoff.integrations.langchain.testing import ScriptedChatModel
from signoff.store import MemoryStore
from tests.integrations.langchain.conftest import (
    POLICY,
    Ran,
    audit_events,
    final_text,
    go,
    scripted,
    thread,
    tool_call,
    tool_messages,
)

DELETE = tool_call("delete_file", {"path": "tmp/x"}, "d1")


def agent_on(saver: InMemorySaver, middleware: SignoffMiddleware, tools: list[BaseTool]) -> Any:
    """One "process": its own middleware (and store), the shared checkpointer."""
    return create_agent(scripted(DELETE), tools=tools, middleware=[middleware], checkpointer=saver)


def paused_elsewhere(tools: list[BaseTool]) -> tuple[InMemorySaver, dict[str, Any], str]:
    """Pause a thread in a first "process" whose in-memory store is then gone."""
    saver = InMemorySaver()
    first = SignoffMiddleware({"delete_file": True})
    cfg = thread()
    out = agent_on(saver, first, tools).invoke(go(), cfg, version="v2")
    request_id = out.interrupts[0].value["request_id"]
    first.close()
    return saver, cfg, request_id


# ---------------------------------------------------------------------- a new process
def test_a_new_process_resumes_with_the_default_store(tools: list[BaseTool], ran: Ran) -> None:
    saver, cfg, request_id = paused_elsewhere(tools)
    second = SignoffMiddleware({"delete_file": True})
    agent = agent_on(saver, second, tools)
    out = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg, version="v2")
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]
    assert final_text(out) == "done: deleted tmp/x"
    # the rebuilt request keeps the checkpoint's id, and the approval is audited
    req = second.gate._portal.run(second.gate.get(request_id))
    assert req.status == "resolved" and req.calls[0].execution == "executed"
    assert audit_events(second.gate, request_id=request_id)[:2] == ["created", "decided"]


def test_a_new_process_rejects_edits_and_shows_the_same_interrupt(
    tools: list[BaseTool], ran: Ran
) -> None:
    saver, cfg, request_id = paused_elsewhere(tools)
    agent = agent_on(saver, SignoffMiddleware({"delete_file": True}), tools)
    # invoke(None) pauses again on the same request, as LangChain's does
    out = agent.invoke(None, cfg, version="v2")
    (interrupt,) = out.interrupts
    assert interrupt.value["request_id"] == request_id
    assert interrupt.value["tool_call_ids"] == ["d1"]
    edit = {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "tmp/y"}}}
    out = agent.invoke(Command(resume={"decisions": {"d1": edit}}), cfg, version="v2")
    assert ran.calls == [("delete_file", {"path": "tmp/y"})]
    # and a rejection in yet another process
    saver, cfg, _ = paused_elsewhere(tools)
    agent = agent_on(saver, SignoffMiddleware({"delete_file": True}), tools)
    out = agent.invoke(
        Command(resume={"decisions": [{"type": "reject", "message": "not today"}]}),
        cfg,
        version="v2",
    )
    assert "not today" in str(tool_messages(out.value["messages"])["d1"].content)
    assert ran.calls == [("delete_file", {"path": "tmp/y"})]


def test_a_new_user_message_after_a_restart_cancels_cleanly(
    tools: list[BaseTool], ran: Ran
) -> None:
    saver, cfg, _ = paused_elsewhere(tools)
    agent = agent_on(saver, SignoffMiddleware({"delete_file": True}), tools)
    out = agent.invoke({"messages": [HumanMessage("never mind")]}, cfg, version="v2")
    messages = out.value["messages"]
    answers = [m for m in messages if isinstance(m, ToolMessage)]
    assert "superseded" in str(answers[0].content)  # the old call, answered in place
    assert out.interrupts  # the scripted model asks again (with the same id): a new request
    assert ran.calls == []


def test_the_policy_of_the_new_process_decides_before_anything_runs(
    tools: list[BaseTool], ran: Ran
) -> None:
    """The checkpoint is trusted as LangChain trusts it; the policy still has the last word."""
    saver = InMemorySaver()
    cfg = thread(user_id="erin")
    first = Gate(Policy.from_yaml(textwrap.dedent(POLICY)), MemoryStore())
    out = agent_on(saver, SignoffMiddleware(first, approver="alice"), tools).invoke(
        go(), cfg, version="v2"
    )
    assert out.interrupts
    first.close()
    stricter = textwrap.dedent(POLICY).replace(
        "delete_file:\n    default: require_approval", "delete_file:\n    default: deny"
    )
    second = Gate(Policy.from_yaml(stricter), MemoryStore())
    agent = agent_on(saver, SignoffMiddleware(second, approver="alice"), tools)
    out = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg, version="v2")
    assert ran.calls == []
    assert "denied by policy" in str(tool_messages(out.value["messages"])["d1"].content)
    second.close()


def test_two_workers_sharing_a_store_resume_each_others_pauses(
    tools: list[BaseTool], ran: Ran, sqlite_gate: Gate
) -> None:
    saver = InMemorySaver()
    cfg = thread(user_id="erin")
    worker_a = agent_on(saver, SignoffMiddleware(sqlite_gate, approver="alice"), tools)
    other = Gate.from_config(sqlite_gate.policy.path)  # type: ignore[arg-type]
    assert isinstance(other, Gate)
    worker_b = agent_on(saver, SignoffMiddleware(other, approver="alice"), tools)
    out = worker_a.invoke(go(), cfg, version="v2")
    request_id = out.interrupts[0].value["request_id"]
    out = worker_b.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg, version="v2")
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]
    assert final_text(out) == "done: deleted tmp/x"
    # the stored request won: no second request was made for the same step
    assert [r.id for r in other._portal.run(other.alist())] == [request_id]
    other.close()


# ---------------------------------------------------------------------- reused ids
def same_id_every_turn(second_args: dict[str, Any]) -> ScriptedChatModel:
    """A model that names every tool call ``call_1`` (providers need not keep ids unique)."""

    def script(messages: Sequence[BaseMessage]) -> AIMessage:
        turns = sum(isinstance(m, HumanMessage) for m in messages)
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(content=f"turn {turns} done: {messages[-1].content}")
        args = {"path": "tmp/a"} if turns == 1 else second_args
        return AIMessage(content="", tool_calls=[tool_call("delete_file", args, "call_1")])

    return ScriptedChatModel(script=script)


@pytest.mark.parametrize("second_args", [{"path": "tmp/b"}, {"path": "tmp/a"}])
def test_a_tool_call_id_reused_in_a_later_turn_is_asked_again(
    tools: list[BaseTool], ran: Ran, second_args: dict[str, Any]
) -> None:
    middleware = SignoffMiddleware({"delete_file": True})
    agent = create_agent(
        same_id_every_turn(second_args),
        tools=tools,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    cfg = thread()
    approve = Command(resume={"decisions": [{"type": "approve"}]})
    first = agent.invoke(go("first"), cfg, version="v2")
    assert first.interrupts[0].value["tool_call_ids"] == ["call_1"]
    agent.invoke(approve, cfg, version="v2")
    second = agent.invoke({"messages": [HumanMessage("second")]}, cfg, version="v2")
    assert second.interrupts, "the reused id must be asked about again"
    (action,) = second.interrupts[0].value["action_requests"]
    assert action["args"] == second_args and action["tool_call_id"] == "call_1"
    assert second.interrupts[0].value["request_id"] != first.interrupts[0].value["request_id"]
    out = agent.invoke(approve, cfg, version="v2")
    assert ran.calls == [("delete_file", {"path": "tmp/a"}), ("delete_file", second_args)]
    assert final_text(out) == f"turn 2 done: deleted {second_args['path']}"


# ---------------------------------------------------------------------- async
async def test_an_async_resume_on_a_sqlite_store_never_blocks_the_loop(
    tools: list[BaseTool], ran: Ran, sqlite_gate: Gate
) -> None:
    """blockbuster (see conftest) fails this test on any blocking call from signoff."""
    middleware = SignoffMiddleware(sqlite_gate, approver="alice")
    agent = agent_on(InMemorySaver(), middleware, tools)
    cfg = thread(user_id="erin")
    out = await agent.ainvoke(go(), cfg, version="v2")
    assert out.interrupts
    with pytest.raises(ValueError, match="approve, edit, reject"):  # a refused resume
        await agent.ainvoke(Command(resume={"decisions": [{"type": "respond"}]}), cfg)
    out = await agent.ainvoke(
        Command(resume={"decisions": [{"type": "approve"}]}), cfg, version="v2"
    )
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]
    assert final_text(out) == "done: deleted tmp/x"


async def test_an_async_resume_after_someone_else_decided_says_so(
    tools: list[BaseTool], ran: Ran, sqlite_gate: Gate
) -> None:
    agent = agent_on(InMemorySaver(), SignoffMiddleware(sqlite_gate, approver="alice"), tools)
    cfg = thread(user_id="erin")
    out = await agent.ainvoke(go(), cfg, version="v2")
    request_id = out.interrupts[0].value["request_id"]
    await sqlite_gate.adecide(request_id, [{"type": "reject"}], approver="alice")
    # the stored decision wins: the resume continues with it, the tool does not run
    out = await agent.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg)
    assert ran.calls == []
    assert tool_messages(out["messages"])["d1"].status == "error"


# ---------------------------------------------------------------------- update_state
def test_editing_a_paused_call_with_update_state_is_refused_with_what_to_do(
    tools: list[BaseTool], ran: Ran
) -> None:
    middleware = SignoffMiddleware({"delete_file": True})
    agent = agent_on(InMemorySaver(), middleware, tools)
    cfg = thread()
    agent.invoke(go(), cfg, version="v2")
    state = agent.get_state(cfg)
    ai = next(m for m in reversed(state.values["messages"]) if isinstance(m, AIMessage))
    changed = ai.model_copy(
        update={"tool_calls": [tool_call("delete_file", {"path": "/etc/passwd"}, "d1")]}
    )
    agent.update_state(cfg, {"messages": [changed]})
    with pytest.raises(ValueError, match="update_state") as refused:
        agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg)
    assert "edit decision" in str(refused.value)
    assert "middleware" not in str(refused.value).split("update_state")[0]
    assert ran.calls == []
    # the supported way: an edit decision, after putting the call back
    agent.update_state(cfg, {"messages": [ai]})
    edit = {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "tmp/z"}}}
    agent.invoke(Command(resume={"decisions": [edit]}), cfg)
    assert ran.calls == [("delete_file", {"path": "tmp/z"})]


def test_resume_helper_in_a_new_process_says_how_to_resume(tools: list[BaseTool]) -> None:
    from signoff.integrations.langchain import resume
    from signoff.model import SignoffError

    saver, cfg, _ = paused_elsewhere(tools)
    agent = agent_on(saver, SignoffMiddleware({"delete_file": True}), tools)
    with pytest.raises(SignoffError, match=r"Command\(resume="):
        resume(agent, cfg, timeout=0)
