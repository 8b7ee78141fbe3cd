"""A Pydantic AI agent whose dangerous tool needs a human's sign-off — runs offline.

    python examples/pydantic_ai_app.py                        # scripted model, no network
    python examples/pydantic_ai_app.py --model openai:gpt-4.1  # a real model (provider
                                                              # package and API key needed)

Three scenes: (1) the run ends with ``DeferredToolRequests``; alice edits the call through
signoff and ``results`` turns her decision into ``DeferredToolResults``; (2) the history is
saved as JSON and continued later (as another process would) after a rejection; (3) blocking
mode, where the tool waits inside the run.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests, FunctionToolset
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.models import Model

from signoff import Gate
from signoff.integrations.pydantic_ai import SignoffToolset, aresults
from signoff.integrations.pydantic_ai.testing import calls_then_summary, tool_call

POLICY = """
version: 1
store: sqlite:///signoff.db
people:
  erin:  {roles: []}        # the user the agent works for
  alice: {roles: [ops]}     # may approve deletions
tools:
  read_file:
    default: allow
  delete_file:
    description: "Delete {args.path} (asked by {principal.id})"
    default: require_approval
    approvers: {roles: [ops]}
    allowed_decisions: [approve, edit, reject]
    editable_args: [path]
    timeout: 10m
"""

tools: FunctionToolset[None] = FunctionToolset()


@tools.tool_plain
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@tools.tool_plain
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def model(real: str | None) -> Model | str:
    """The scripted model reads one file and deletes another; a real one decides itself."""
    if real:
        return real
    return calls_then_summary(
        tool_call("read_file", {"path": "notes.txt"}, "call_read"),
        tool_call("delete_file", {"path": "old/report.pdf"}, "call_delete"),
    )


ASK = "Read notes.txt, then delete old/report.pdf."


async def only_request(gate: Gate) -> str:
    (req,) = await gate.alist(status="pending")
    action = req.action_requests[0]
    print(f"   paused: {action.name}({action.args}) — request {req.id}")
    return req.id


async def edit_and_continue(gate: Gate, agent: Agent[None, Any]) -> None:
    print("1. The run ends with DeferredToolRequests; alice edits the call in signoff")
    with gate.context("erin"):
        run = await agent.run(ASK)
        assert isinstance(run.output, DeferredToolRequests)
        request_id = await only_request(gate)
        # In real life: the web inbox, `signoff approve`, Slack, ...
        edited = {"name": "delete_file", "args": {"path": "old/report-copy.pdf"}}
        await gate.adecide(
            request_id, [{"type": "edit", "edited_action": edited}], approver="alice"
        )
        answers = await aresults(run.output, gate)
        run = await agent.run(message_history=run.all_messages(), deferred_tool_results=answers)
    print("   agent:", " / ".join(str(run.output).splitlines()))


async def saved_history(gate: Gate, agent: Agent[None, Any]) -> None:
    print("2. The history is saved as JSON and continued later")
    with gate.context("erin"):
        run = await agent.run(ASK)
        assert isinstance(run.output, DeferredToolRequests)
        saved = ModelMessagesTypeAdapter.dump_json(run.all_messages())  # a file, a database row
        request_id = await only_request(gate)
        reject = {"type": "reject", "message": "keep it"}
        await gate.adecide(request_id, [reject], approver="alice", channel="web")
        history = ModelMessagesTypeAdapter.validate_json(saved)  # e.g. in another process
        answers = await aresults(run.output, gate)
        run = await agent.run(message_history=history, deferred_tool_results=answers)
    print("   agent:", run.output)


async def blocking(gate: Gate, real: str | None) -> None:
    print("3. Blocking mode: the tool waits for the decision inside the run")
    agent = Agent(model(real), toolsets=[SignoffToolset(tools, gate, blocking=True)])

    async def approver() -> None:  # a human, somewhere else, a moment later
        while not (waiting := await gate.alist(status="pending")):
            await asyncio.sleep(0.05)
        await gate.adecide(waiting[0].id, [{"type": "approve"}], approver="alice")

    with gate.context("erin"):
        deciding = asyncio.create_task(approver())
        run = await agent.run(ASK)
        await deciding
    print("   agent:", run.output)


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", help="a real model, e.g. openai:gpt-4.1")
    real = parser.parse_args().model
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "signoff.yaml").write_text(POLICY, encoding="utf-8")
        gate = Gate.from_config(Path(tmp) / "signoff.yaml")
        assert isinstance(gate, Gate)
        agent = Agent(
            model(real),
            toolsets=[SignoffToolset(tools, gate)],
            output_type=[str, DeferredToolRequests],
        )
        await edit_and_continue(gate, agent)
        await saved_history(gate, agent)
        await blocking(gate, real)
        await gate.aclose()


if __name__ == "__main__":
    asyncio.run(main())
