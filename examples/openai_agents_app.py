"""An OpenAI Agents SDK agent whose dangerous tool needs a human's sign-off — runs offline.

    python examples/openai_agents_app.py                 # scripted model, no network
    python examples/openai_agents_app.py --model gpt-4.1  # a real model (needs OPENAI_API_KEY)

Three scenes: (1) the run pauses on ``delete_file``, alice edits the call through signoff, and
``resolve`` continues the run; (2) the paused state is saved with ``to_string()``, restored with
``RunState.from_string`` (as another process would), and continued after a rejection; (3)
blocking mode, where the tool waits inside the run.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from typing import Any

from agents import Agent, Model, RunConfig, Runner, RunState, function_tool

from signoff import Gate
from signoff.integrations.openai_agents import aresolve, signoff_tools
from signoff.integrations.openai_agents.testing import (
    ScriptedModel,
    calls_then_summary,
    function_call,
)

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


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@function_tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def model(real: str | None) -> Model | str:
    """The scripted model reads one file and deletes another; a real one decides itself."""
    if real:
        return real
    return ScriptedModel(
        calls_then_summary(
            function_call("read_file", {"path": "notes.txt"}, "call_read"),
            function_call("delete_file", {"path": "old/report.pdf"}, "call_delete"),
        )
    )


ASK = "Read notes.txt, then delete old/report.pdf."
OFFLINE = RunConfig(tracing_disabled=True)  # no trace export to OpenAI


async def only_request(gate: Gate, thread: str) -> str:
    (req,) = await gate.alist(status="pending", thread=thread)
    action = req.action_requests[0]
    print(f"   paused: {action.name}({action.args}) — request {req.id}")
    return req.id


async def edit_and_resolve(gate: Gate, agent: Agent[Any]) -> None:
    print("1. Paused; alice edits the call in signoff; resolve() continues the run")
    with gate.context("erin", thread="scene-1"):
        result = await Runner.run(agent, ASK, run_config=OFFLINE)
        request_id = await only_request(gate, "scene-1")
        # In real life: the web inbox, `signoff approve`, Slack, ...
        edited = {"name": "delete_file", "args": {"path": "old/report-copy.pdf"}}
        await gate.adecide(
            request_id, [{"type": "edit", "edited_action": edited}], approver="alice"
        )
        result = await Runner.run(agent, await aresolve(result, gate), run_config=OFFLINE)
    print("   agent:", " / ".join(str(result.final_output).splitlines()))


async def saved_state(gate: Gate, agent: Agent[Any]) -> None:
    print("2. The paused run is saved as a string, restored later, and continued")
    with gate.context("erin", thread="scene-2"):
        result = await Runner.run(agent, ASK, run_config=OFFLINE)
        saved = result.to_state().to_string()  # store it anywhere: a file, a database row
        request_id = await only_request(gate, "scene-2")
        reject = {"type": "reject", "message": "keep it"}
        await gate.adecide(request_id, [reject], approver="alice", channel="web")
        state = await RunState.from_string(agent, saved)  # e.g. in another process
        result = await Runner.run(agent, await aresolve(state, gate), run_config=OFFLINE)
    print("   agent:", result.final_output)


async def blocking(gate: Gate, real: str | None) -> None:
    print("3. Blocking mode: the tool waits for the decision inside the run")
    tools = signoff_tools(gate, [read_file, delete_file], blocking=True)
    agent = Agent(name="ops", model=model(real), tools=tools)

    async def approver() -> None:  # a human, somewhere else, a moment later
        while not (waiting := await gate.alist(status="pending", thread="scene-3")):
            await asyncio.sleep(0.05)
        await gate.adecide(waiting[0].id, [{"type": "approve"}], approver="alice")

    with gate.context("erin", thread="scene-3"):
        deciding = asyncio.create_task(approver())
        result = await Runner.run(agent, ASK, run_config=OFFLINE)
        await deciding
    print("   agent:", result.final_output)


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", help="a real OpenAI model, e.g. gpt-4.1")
    real = parser.parse_args().model
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "signoff.yaml").write_text(POLICY, encoding="utf-8")
        gate = Gate.from_config(Path(tmp) / "signoff.yaml")
        assert isinstance(gate, Gate)
        agent = Agent(
            name="ops", model=model(real), tools=signoff_tools(gate, [read_file, delete_file])
        )
        await edit_and_resolve(gate, agent)
        await saved_state(gate, agent)
        await blocking(gate, real)
        await gate.aclose()


if __name__ == "__main__":
    asyncio.run(main())
