"""``signoff_tools`` with the real OpenAI Agents SDK and a scripted model: the policy decides
per call; approve, reject and edit decided in signoff's store reach the run through
``resolve``."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, FunctionTool, WebSearchTool

from signoff import Gate
from signoff.integrations.openai_agents import aresolve, resolve, signoff_tools
from signoff.integrations.openai_agents.testing import ScriptedModel, calls_then_summary
from tests.integrations.openai_agents.conftest import (
    Ran,
    approved_delete,
    delete,
    make_agent,
    new_thread,
    pending,
    read,
    run,
)


async def test_allowed_call_runs_without_a_pause(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    agent = make_agent(gate, tools, read())
    result = await run(agent, "read my notes")
    assert not result.interruptions
    assert ran.calls == [("read_file", {"path": "notes.txt"})]
    assert result.final_output == "done: contents of notes.txt"


async def test_denied_call_does_not_run_and_the_model_reads_why(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete("/etc/passwd"))
    result = await run(agent, "delete it")
    assert not result.interruptions and ran.calls == []
    assert "denied by policy rule `never-etc`: system files are off limits" in result.final_output
    assert not await gate.alist()  # nothing to approve: nothing stored


async def test_call_needing_approval_pauses_with_one_stored_request(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    agent = make_agent(gate, tools, read(), delete())
    thread = new_thread()
    with gate.context("erin", thread=thread):
        result = await run(agent, "clean up")
    assert [i.call_id for i in result.interruptions] == ["call_del"]
    assert ran.calls == [("read_file", {"path": "notes.txt"})]  # the allowed one ran
    req = await pending(gate, thread)
    assert req.action_requests[0].tool_call_id == "call_del"
    assert req.action_requests[0].args == {"path": "tmp/x"}
    assert req.principal.id == "erin"
    assert req.user_request == "clean up"  # approvers see what the user asked


async def test_approved_in_signoff_runs_once_after_resolve(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    async with approved_delete(gate, tools) as (agent, _thread, result, req):
        result = await run(agent, await aresolve(result, gate))
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]
    assert result.final_output == "done: deleted tmp/x"
    assert (await gate.get(req.id)).calls[0].execution == "executed"


async def test_rejected_in_signoff_does_not_run_and_the_model_reads_the_reason(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete())
    thread = new_thread()
    with gate.context(thread=thread):
        result = await run(agent, "delete tmp/x")
        req = await pending(gate, thread)
        await gate.adecide(req.id, [{"type": "reject", "message": "keep it"}], approver="alice")
        result = await run(agent, await aresolve(result, gate))
    assert ran.calls == []
    assert "with reason: keep it" in result.final_output


async def test_edit_runs_the_edited_arguments_and_tells_the_model(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete())
    thread = new_thread()
    with gate.context(thread=thread):
        result = await run(agent, "delete tmp/x")
        req = await pending(gate, thread)
        edit = {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "tmp/y"}}}
        await gate.adecide(req.id, [edit], approver="alice")
        result = await run(agent, await aresolve(result, gate))
    assert ran.calls == [("delete_file", {"path": "tmp/y"})]
    assert "Executed instead: delete_file" in result.final_output
    assert "deleted tmp/y" in result.final_output


async def test_undecided_call_stays_paused_after_resolve(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete())
    thread = new_thread()
    with gate.context(thread=thread):
        result = await run(agent, "delete tmp/x")
        again = await run(agent, await aresolve(result, gate))
    assert [i.call_id for i in again.interruptions] == ["call_del"]
    assert ran.calls == []
    assert len(await gate.alist(thread=thread)) == 1  # asked once, not twice


async def test_resolve_can_wait_for_the_decision(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    import asyncio

    agent = make_agent(gate, tools, delete())
    thread = new_thread()
    with gate.context(thread=thread):
        result = await run(agent, "delete tmp/x")
        req = await pending(gate, thread)
        resolving = asyncio.create_task(aresolve(result, gate, wait=True))
        await gate.adecide(req.id, [{"type": "approve"}], approver="alice")
        result = await run(agent, await resolving)
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]


def test_sync_resolve_from_sync_code(gate: Gate, tools: list[FunctionTool], ran: Ran) -> None:
    import asyncio

    agent = make_agent(gate, tools, delete())
    with gate.context(thread="sync-thread"):
        result = asyncio.run(run(agent, "delete tmp/x"))
        assert result.interruptions
        gate.decide(_only(gate, "sync-thread"), [{"type": "approve"}], approver="alice")
        state = resolve(result, gate)
        result = asyncio.run(run(agent, state))
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]


def _only(gate: Gate, thread: str) -> str:
    (req,) = gate.run_sync(gate.alist(thread=thread))
    return req.id


async def test_blocking_mode_waits_inside_the_run(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    import asyncio

    agent = make_agent(gate, tools, delete(), blocking=True)
    thread = new_thread()
    with gate.context(thread=thread):
        task = asyncio.create_task(run(agent, "delete tmp/x"))
        while not (found := await gate.alist(status="pending", thread=thread)):
            await asyncio.sleep(0.01)
        await gate.adecide(found[0].id, [{"type": "approve"}], approver="alice")
        result = await task
    assert not result.interruptions
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]
    assert result.final_output == "done: deleted tmp/x"


async def test_blocking_mode_rejection_is_the_tool_output(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    import asyncio

    agent = make_agent(gate, tools, delete(), blocking=True)
    thread = new_thread()
    with gate.context(thread=thread):
        task = asyncio.create_task(run(agent, "delete tmp/x"))
        while not (found := await gate.alist(status="pending", thread=thread)):
            await asyncio.sleep(0.01)
        await gate.adecide(found[0].id, [{"type": "reject", "message": "no"}], approver="alice")
        result = await task
    assert ran.calls == [] and "with reason: no" in result.final_output


def test_only_function_tools_can_be_gated(gate: Gate) -> None:
    with pytest.raises(TypeError, match="WebSearchTool"):
        signoff_tools(gate, [WebSearchTool()])


def test_the_original_tools_are_left_as_they_were(gate: Gate, tools: list[FunctionTool]) -> None:
    before = [(t.on_invoke_tool, t.needs_approval) for t in tools]
    gated = signoff_tools(gate, tools)
    assert [(t.on_invoke_tool, t.needs_approval) for t in tools] == before
    assert [t.name for t in gated] == ["read_file", "delete_file"]
    assert all(callable(t.needs_approval) for t in gated)


def test_a_remote_gate_is_refused_with_what_to_do(tmp_path: Any) -> None:
    from signoff.model import SignoffError

    with pytest.raises(SignoffError, match="local signoff Gate"):
        signoff_tools(object(), [])


def test_blocking_mode_warns_when_the_tool_timeout_is_shorter_than_the_deadline(
    gate: Gate, tools: list[FunctionTool], caplog: pytest.LogCaptureFixture
) -> None:
    from agents import function_tool

    @function_tool(timeout=30.0)
    async def delete_file(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    short = delete_file
    with caplog.at_level("WARNING", logger="signoff.openai_agents"):
        signoff_tools(gate, [tools[0], short], blocking=True)
    (record,) = caplog.records
    assert "delete_file has timeout_seconds=30" in record.getMessage()
    caplog.clear()
    with caplog.at_level("WARNING", logger="signoff.openai_agents"):
        signoff_tools(gate, [tools[0], short])  # pausing mode: nothing waits in the tool
    assert not caplog.records


async def test_keyword_arguments_as_the_issue_names_them(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    agent = Agent(
        name="ops",
        model=ScriptedModel(calls_then_summary(delete())),
        tools=signoff_tools(gate_or_config=gate, tools=tools),
    )
    thread = new_thread()
    with gate.context(thread=thread):
        result = await run(agent, "delete tmp/x")
        req = await pending(gate, thread)
        await gate.adecide(req.id, [{"type": "approve"}], approver="alice")
        result = await run(agent, await aresolve(result_or_state=result, gate=gate))
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]
