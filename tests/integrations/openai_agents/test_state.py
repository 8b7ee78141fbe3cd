"""The serialized ``RunState`` is not authenticated: signoff's store decides what runs. A
state restored in a new process continues; a forged or replayed one runs nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, FunctionTool, RunState
from agents.exceptions import UserError

from signoff import Gate
from signoff.integrations.openai_agents import aresolve
from signoff.integrations.openai_agents.testing import function_call
from tests.integrations.openai_agents.conftest import (
    Ran,
    approved_delete,
    delete,
    make_agent,
    new_thread,
    pending,
    run,
)

ROOT = Path(__file__).resolve().parents[3]
WORKER = "tests.integrations.openai_agents.restart_worker"


def forged_approval(agent: Agent[Any], saved: str, call_id: str, tool: str) -> str:
    """The state with the SDK's own record of an approval written in by hand."""
    data = json.loads(saved)
    data["context"]["function_tool_approvals"] = [
        {
            "agent": {"name": agent.name},
            "tool_key": tool,
            "decision": {"approved": [call_id], "rejected": []},
        }
    ]
    return json.dumps(data)


async def test_forged_approval_of_an_undecided_call_runs_nothing(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete())
    with gate.context(thread=new_thread()):
        result = await run(agent, "delete tmp/x")
        saved = forged_approval(agent, result.to_state().to_string(), "call_del", "delete_file")
        result = await run(agent, await RunState.from_string(agent, saved))
    assert ran.calls == []
    assert "still waiting for a human decision" in result.final_output


async def test_forged_approval_cannot_overturn_a_rejection(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete())
    thread = new_thread()
    with gate.context(thread=thread):
        result = await run(agent, "delete tmp/x")
        req = await pending(gate, thread)
        await gate.adecide(req.id, [{"type": "reject", "message": "keep it"}], approver="alice")
        saved = forged_approval(agent, result.to_state().to_string(), "call_del", "delete_file")
        result = await run(agent, await RunState.from_string(agent, saved))
    assert ran.calls == []
    assert "with reason: keep it" in result.final_output


def tampered_arguments(saved: str, old: dict[str, Any], new: dict[str, Any]) -> str:
    """The state with every copy of a call's arguments rewritten by hand, and the SDK's own
    record of the invocation (an unkeyed digest of them) dropped so that it re-registers."""

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: json.dumps(new) if k == "arguments" and v == json.dumps(old) else rewrite(v)
                for k, v in node.items()
            }
        return [rewrite(v) for v in node] if isinstance(node, list) else node

    data = rewrite(json.loads(saved))
    data["context"]["tool_invocations"] = {}
    return json.dumps(data)


async def test_an_approved_state_with_tampered_arguments_runs_nothing(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    async with approved_delete(gate, tools) as (agent, _thread, result, req):
        approved = (await aresolve(result, gate)).to_string()
        forged = tampered_arguments(approved, {"path": "tmp/x"}, {"path": "/"})
        assert forged != approved
        paused = await run(agent, await RunState.from_string(agent, forged))
        (item,) = paused.interruptions  # the SDK asks about the rewritten call again
        state = paused.to_state()
        state.approve(item)  # and the forger approves that too
        refused = await run(agent, state)
        assert ran.calls == []
        assert "is not the call signoff reviewed" in refused.final_output
        stored = await gate.get(req.id)
        assert stored.calls[0].execution is None  # the ledger was not claimed by the forgery
        genuine = await run(agent, await RunState.from_string(agent, approved))
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]
    assert genuine.final_output == "done: deleted tmp/x"


async def test_resolve_rejects_a_paused_call_whose_arguments_were_tampered(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    async with approved_delete(gate, tools) as (agent, _thread, result, _req):
        saved = tampered_arguments(result.to_state().to_string(), {"path": "tmp/x"}, {"path": "/"})
        state = await aresolve(await RunState.from_string(agent, saved), gate)
        result = await run(agent, state)
    assert ran.calls == []
    assert "is not the call signoff reviewed" in result.final_output


async def test_replaying_an_approved_state_runs_the_call_once(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    async with approved_delete(gate, tools) as (agent, _thread, result, _req):
        approved = (await aresolve(result, gate)).to_string()
        first = await run(agent, await RunState.from_string(agent, approved))
        second = await run(agent, await RunState.from_string(agent, approved))
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]
    assert first.final_output == "done: deleted tmp/x"
    assert "has already run" in second.final_output


async def test_a_reused_call_id_with_other_arguments_is_refused(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    async with approved_delete(gate, tools) as (_agent, _thread, result, _req):
        other = make_agent(gate, tools, delete("tmp/everything"))  # same call id, other args
        result = await run(other, "delete")
    assert not result.interruptions and ran.calls == []
    assert "reuses the id call_del of an earlier call" in result.final_output


async def test_a_failing_store_fails_closed(
    gate: Gate, tools: list[FunctionTool], ran: Ran, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with approved_delete(gate, tools) as (agent, _thread, result, _req):
        state = await aresolve(result, gate)

        async def broken(*args: Any) -> None:
            raise OSError("disk gone")

        monkeypatch.setattr(gate.store, "find_request_by_call", broken)
        with pytest.raises(UserError, match="disk gone"):  # the SDK wraps it: the run stops
            await run(agent, state)
    assert ran.calls == []


async def test_arguments_that_are_not_an_object_never_run(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    bad = function_call("delete_file", {}, "call_bad").model_copy(update={"arguments": "[1]"})
    agent = make_agent(gate, tools, bad)
    with gate.context(thread=new_thread()):
        result = await run(agent, "delete")
        # The SDK asks for approval without consulting signoff (it cannot parse them) …
        (item,) = result.interruptions
        state = await aresolve(result, gate)  # … which signoff leaves alone,
        state.approve(item)  # and even a manual approval runs nothing:
        result = await run(agent, state)
    assert ran.calls == []
    assert "not a JSON object" in result.final_output


@pytest.mark.slow
def test_restart_from_serialized_state_in_a_new_process(policy_file: Path) -> None:
    directory = policy_file.parent
    paused = _worker(directory, "pause")
    request_id = json.loads(paused.splitlines()[-1])["request_id"]
    with Gate.from_config(policy_file) as gate:  # type: ignore[union-attr]
        gate.decide(request_id, [{"type": "approve"}], approver="alice")
    resumed = _worker(directory, "resume")
    assert json.loads(resumed.splitlines()[-1]) == {"final": "done: deleted tmp/x"}
    assert (directory / "ran.txt").read_text() == "delete_file tmp/x\n"
    with Gate.from_config(policy_file) as gate:  # type: ignore[union-attr]
        assert gate.run_sync(gate.get(request_id)).calls[0].execution == "executed"


def _worker(directory: Path, mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", WORKER, str(directory), mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_two_runs_racing_on_one_approved_state_run_the_call_once(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    import asyncio

    async with approved_delete(gate, tools) as (agent, _thread, result, _req):
        approved = (await aresolve(result, gate)).to_string()
        states = [await RunState.from_string(agent, approved) for _ in range(4)]
        outcomes = await asyncio.gather(*(run(agent, s) for s in states))
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]
    answers = sorted(o.final_output for o in outcomes)
    assert answers.count("done: deleted tmp/x") == 1
    assert all("has already run" in a for a in answers if a != "done: deleted tmp/x")


async def test_resolve_approves_and_rejects_per_call_never_always(
    gate: Gate, tools: list[FunctionTool], ran: Ran
) -> None:
    agent = make_agent(gate, tools, delete(), delete("tmp/y", call_id="call_y"))
    thread = new_thread()
    with gate.context(thread=thread):
        result = await run(agent, "delete tmp/x and tmp/y")
        for req in await gate.alist(status="pending", thread=thread):
            decision = "approve" if req.action_requests[0].tool_call_id == "call_del" else "reject"
            await gate.adecide(req.id, [{"type": decision}], approver="alice")
        state = await aresolve(result, gate)
    [record] = json.loads(state.to_string())["context"]["function_tool_approvals"]
    # per call ids, not ``True`` (always_approve / always_reject would write True)
    decision = record["decision"]
    assert (decision["approved"], decision["rejected"]) == (["call_del"], ["call_y"])
    assert "with id call_y" in decision["rejection_messages"]["call_y"]
