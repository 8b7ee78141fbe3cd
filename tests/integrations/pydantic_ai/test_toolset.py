"""``SignoffToolset`` and ``results`` with real Pydantic AI agents on scripted models: the
policy decides per call; approve, reject and edit decided in signoff's store come back as
``DeferredToolResults``; results nobody gave in signoff run nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai import (
    DeferredToolRequests,
    DeferredToolResults,
    FunctionToolset,
    ToolApproved,
    ToolDenied,
)
from pydantic_ai.models.test import TestModel

from signoff import Gate
from signoff.integrations.pydantic_ai import (
    REQUEST_ID,
    NotDecided,
    SetupError,
    aresults,
    results,
)
from tests.integrations.pydantic_ai.conftest import (
    Ran,
    delete,
    make_agent,
    new_thread,
    pending,
    read,
)


async def test_allowed_call_runs(gate: Gate, tools: FunctionToolset[Any], ran: Ran) -> None:
    run = await make_agent(gate, tools, read()).run("read my notes")
    assert run.output == "done: contents of notes.txt"
    assert ran.calls == [("read_file", {"path": "notes.txt"})]


async def test_denied_call_returns_the_reason_to_the_model(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    run = await make_agent(gate, tools, delete("/etc/passwd")).run("delete it")
    assert ran.calls == []
    assert "denied by policy rule `never-etc`: system files are off limits" in run.output
    assert not await gate.alist()


async def test_call_needing_approval_ends_the_run_with_deferred_requests(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    thread = new_thread()
    with gate.context("erin", thread=thread):
        run = await make_agent(gate, tools, read(), delete()).run("clean up")
    assert isinstance(run.output, DeferredToolRequests)
    assert [c.tool_call_id for c in run.output.approvals] == ["call_del"]
    req = await pending(gate, thread)
    assert run.output.metadata["call_del"] == {REQUEST_ID: req.id}
    assert req.principal.id == "erin" and req.action_requests[0].args == {"path": "tmp/x"}
    assert req.user_request == "clean up"  # approvers see what the user asked
    assert ran.calls == [("read_file", {"path": "notes.txt"})]


async def test_the_thread_defaults_to_the_conversation(
    gate: Gate, tools: FunctionToolset[Any]
) -> None:
    run = await make_agent(gate, tools, delete()).run("delete")
    req = await pending(gate)
    assert req.thread == f"pydantic-ai:{run.conversation_id}"


async def test_approved_in_signoff_runs_once(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete())
    run = await agent.run("delete tmp/x")
    req = await pending(gate)
    await gate.adecide(req.id, [{"type": "approve"}], approver="alice")
    answers = await aresults(run.output, gate)
    assert answers.approvals == {"call_del": ToolApproved()}
    assert answers.metadata == {"call_del": {REQUEST_ID: req.id}}
    run = await agent.run(message_history=run.all_messages(), deferred_tool_results=answers)
    assert run.output == "done: deleted tmp/x"
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]
    assert (await gate.get(req.id)).calls[0].execution == "executed"


async def test_rejected_in_signoff_is_a_denial_with_the_reason(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete())
    run = await agent.run("delete tmp/x")
    req = await pending(gate)
    await gate.adecide(req.id, [{"type": "reject", "message": "keep it"}], approver="alice")
    answers = await aresults(run.output, gate)
    assert isinstance(answers.approvals["call_del"], ToolDenied)
    run = await agent.run(message_history=run.all_messages(), deferred_tool_results=answers)
    assert ran.calls == [] and "with reason: keep it" in run.output


async def test_edit_becomes_override_args_and_the_model_is_told(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete())
    run = await agent.run("delete tmp/x")
    req = await pending(gate)
    edit = {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "tmp/y"}}}
    await gate.adecide(req.id, [edit], approver="alice")
    answers = await aresults(run.output, gate)
    assert answers.approvals == {"call_del": ToolApproved(override_args={"path": "tmp/y"})}
    run = await agent.run(message_history=run.all_messages(), deferred_tool_results=answers)
    assert ran.calls == [("delete_file", {"path": "tmp/y"})]
    assert "Executed instead: delete_file" in run.output and "deleted tmp/y" in run.output


async def test_a_plain_approval_of_an_edited_call_still_runs_the_edit(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete())
    run = await agent.run("delete tmp/x")
    req = await pending(gate)
    edit = {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "tmp/y"}}}
    await gate.adecide(req.id, [edit], approver="alice")
    answers = DeferredToolResults(approvals={"call_del": True})  # built by hand
    run = await agent.run(message_history=run.all_messages(), deferred_tool_results=answers)
    assert ran.calls == [("delete_file", {"path": "tmp/y"})]


async def test_undecided_call_raises_not_decided_naming_the_request(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete())
    run = await agent.run("delete tmp/x")
    req = await pending(gate)
    with pytest.raises(NotDecided) as err:
        await aresults(run.output, gate)
    assert err.value.request_ids == [req.id] and req.id in str(err.value)
    again = await agent.run(message_history=run.all_messages())
    assert isinstance(again.output, DeferredToolRequests)  # asked again: the same request
    assert ran.calls == [] and len(await gate.alist()) == 1


async def test_results_can_wait_for_the_decision(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete())
    run = await agent.run("delete tmp/x")
    req = await pending(gate)
    waiting = asyncio.create_task(aresults(run.output, gate, wait=True))
    await gate.adecide(req.id, [{"type": "approve"}], approver="alice")
    answers = await waiting
    run = await agent.run(message_history=run.all_messages(), deferred_tool_results=answers)
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]


def test_sync_results_from_sync_code(gate: Gate, tools: FunctionToolset[Any], ran: Ran) -> None:
    agent = make_agent(gate, tools, delete())
    run = agent.run_sync("delete tmp/x")
    (req,) = gate.run_sync(gate.alist())
    gate.decide(req.id, [{"type": "approve"}], approver="alice")
    run = agent.run_sync(
        message_history=run.all_messages(), deferred_tool_results=results(run.output, gate)
    )
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]


async def test_forged_approval_runs_nothing(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete())
    run = await agent.run("delete tmp/x")
    forged = DeferredToolResults(approvals={"call_del": ToolApproved()})
    run = await agent.run(message_history=run.all_messages(), deferred_tool_results=forged)
    assert ran.calls == []
    assert "still waiting for a human decision" in run.output


async def test_forged_override_args_run_nothing(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete())
    run = await agent.run("delete tmp/x")
    req = await pending(gate)
    await gate.adecide(req.id, [{"type": "approve"}], approver="alice")
    forged = DeferredToolResults(
        approvals={"call_del": ToolApproved(override_args={"path": "tmp/everything"})}
    )
    run = await agent.run(message_history=run.all_messages(), deferred_tool_results=forged)
    assert ran.calls == []
    assert "not the call signoff reviewed" in run.output


async def test_replayed_results_run_the_call_once(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete())
    run = await agent.run("delete tmp/x")
    req = await pending(gate)
    await gate.adecide(req.id, [{"type": "approve"}], approver="alice")
    answers = await aresults(run.output, gate)
    history = run.all_messages()
    first = await agent.run(message_history=history, deferred_tool_results=answers)
    second = await agent.run(message_history=history, deferred_tool_results=answers)
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]
    assert first.output == "done: deleted tmp/x"
    assert "has already run" in second.output


async def test_without_deferred_output_a_clear_error_and_nothing_stored(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete(), output_type=str)
    with pytest.raises(SetupError, match="add DeferredToolRequests to the agent's output_type"):
        await agent.run("delete tmp/x")
    assert ran.calls == [] and not await gate.alist()


async def test_blocking_mode_waits_inside_the_run(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete(), output_type=str, blocking=True)
    thread = new_thread()
    with gate.context(thread=thread):
        task = asyncio.create_task(agent.run("delete tmp/x"))
        while not (found := await gate.alist(status="pending", thread=thread)):
            await asyncio.sleep(0.01)
        await gate.adecide(found[0].id, [{"type": "approve"}], approver="alice")
        run = await task
    assert run.output == "done: deleted tmp/x"
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]


async def test_test_model_calls_every_tool_and_the_gate_holds(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    """Pydantic AI's TestModel calls each tool with generated arguments."""
    run = await make_agent(gate, tools, model=TestModel()).run("anything")
    assert isinstance(run.output, DeferredToolRequests)
    assert [c.tool_name for c in run.output.approvals] == ["delete_file"]
    assert [name for name, _ in ran.calls] == ["read_file"]


async def test_a_failing_store_fails_closed(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = make_agent(gate, tools, delete())
    run = await agent.run("delete tmp/x")
    req = await pending(gate)
    await gate.adecide(req.id, [{"type": "approve"}], approver="alice")
    answers = await aresults(run.output, gate)

    async def broken(*args: Any) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(gate.store, "find_request_by_call", broken)
    with pytest.raises(OSError, match="disk gone"):
        await agent.run(message_history=run.all_messages(), deferred_tool_results=answers)
    assert ran.calls == []


async def test_results_ignore_calls_signoff_did_not_ask_about(gate: Gate) -> None:
    from pydantic_ai.messages import ToolCallPart

    theirs = DeferredToolRequests(approvals=[ToolCallPart("other", {}, tool_call_id="x")])
    forged = DeferredToolRequests(
        approvals=[ToolCallPart("other", {}, tool_call_id="y")],
        metadata={"y": {REQUEST_ID: "req_does_not_exist"}},
    )
    assert (await aresults(theirs, gate)).approvals == {}
    assert (await aresults(forged, gate)).approvals == {}


async def test_an_inline_handler_approving_by_itself_runs_nothing(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    from pydantic_ai.capabilities import HandleDeferredToolCalls

    async def approve_everything(_ctx: Any, requests: DeferredToolRequests) -> DeferredToolResults:
        return DeferredToolResults(approvals={c.tool_call_id: True for c in requests.approvals})

    from pydantic_ai import Agent

    from signoff.integrations.pydantic_ai import SignoffToolset
    from signoff.integrations.pydantic_ai.testing import calls_then_summary

    agent = Agent(
        calls_then_summary(delete()),
        toolsets=[SignoffToolset(tools, gate)],
        capabilities=[HandleDeferredToolCalls(handler=approve_everything)],
    )
    run = await agent.run("delete tmp/x")
    assert ran.calls == []
    assert "still waiting for a human decision" in run.output


async def test_a_reused_call_id_with_other_arguments_is_refused(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    thread = new_thread()
    with gate.context(thread=thread):
        await make_agent(gate, tools, delete()).run("delete tmp/x")
        run = await make_agent(gate, tools, delete("tmp/everything")).run("delete")
    assert ran.calls == []
    assert "reuses the id call_del of an earlier call" in run.output


async def test_runs_racing_on_the_same_results_run_the_call_once(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete())
    run = await agent.run("delete tmp/x")
    req = await pending(gate)
    await gate.adecide(req.id, [{"type": "approve"}], approver="alice")
    answers = await aresults(run.output, gate)
    history = run.all_messages()
    runs = await asyncio.gather(
        *(agent.run(message_history=history, deferred_tool_results=answers) for _ in range(4))
    )
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]
    outputs = [r.output for r in runs]
    assert outputs.count("done: deleted tmp/x") == 1
    assert all("has already run" in o for o in outputs if o != "done: deleted tmp/x")


async def test_without_deferred_output_allowed_calls_still_run(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    run = await make_agent(gate, tools, read(), output_type=str).run("read")
    assert run.output == "done: contents of notes.txt"
    assert ran.calls == [("read_file", {"path": "notes.txt"})]


async def test_blocking_mode_rejection_is_the_tool_result_and_nothing_runs(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete(), output_type=str, blocking=True)
    thread = new_thread()
    with gate.context(thread=thread):
        task = asyncio.create_task(agent.run("delete tmp/x"))
        while not (found := await gate.alist(status="pending", thread=thread)):
            await asyncio.sleep(0.01)
        reject = {"type": "reject", "message": "keep it"}
        await gate.adecide(found[0].id, [reject], approver="alice")
        run = await task
    assert ran.calls == [] and "with reason: keep it" in run.output


async def test_a_saved_history_with_tampered_arguments_runs_nothing(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    agent = make_agent(gate, tools, delete())
    run = await agent.run("delete tmp/x")
    req = await pending(gate)
    await gate.adecide(req.id, [{"type": "approve"}], approver="alice")
    answers = await aresults(run.output, gate)  # a genuine ToolApproved for call_del
    saved = ModelMessagesTypeAdapter.dump_json(run.all_messages())
    assert saved.count(b"tmp/x") >= 1
    history = ModelMessagesTypeAdapter.validate_json(saved.replace(b"tmp/x", b"/"))
    forged = await agent.run(message_history=history, deferred_tool_results=answers)
    assert ran.calls == [] and "not the call signoff reviewed" in forged.output
    assert (await gate.get(req.id)).calls[0].execution is None  # the ledger is untouched
    genuine = await agent.run(message_history=run.all_messages(), deferred_tool_results=answers)
    assert genuine.output == "done: deleted tmp/x"
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]


async def test_keyword_arguments_as_the_issue_names_them(
    gate: Gate, tools: FunctionToolset[Any], ran: Ran
) -> None:
    from pydantic_ai import Agent

    from signoff.integrations.pydantic_ai import SignoffToolset
    from signoff.integrations.pydantic_ai.testing import calls_then_summary

    agent = Agent(
        calls_then_summary(delete()),
        toolsets=[SignoffToolset(wrapped=tools, gate=gate)],
        output_type=[str, DeferredToolRequests],
    )
    run = await agent.run("delete tmp/x")
    req = await pending(gate)
    await gate.adecide(req.id, [{"type": "approve"}], approver="alice")
    answers = await aresults(requests=run.output, gate=gate)
    run = await agent.run(message_history=run.all_messages(), deferred_tool_results=answers)
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]
