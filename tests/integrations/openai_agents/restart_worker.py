"""One side of the restart test, in its own process: ``pause`` runs until the SDK pauses and
saves the serialized ``RunState``; ``resume`` (a new process) restores it, applies signoff's
decision with ``resolve`` and runs on. Tools append what ran to ``ran.txt``."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from agents import Agent, Runner, RunState, function_tool, set_tracing_disabled

from signoff import Gate
from signoff.integrations.openai_agents import aresolve, signoff_tools
from signoff.integrations.openai_agents.testing import (
    ScriptedModel,
    calls_then_summary,
    function_call,
)


def agent(gate: Gate, directory: Path) -> Agent[None]:
    @function_tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        with (directory / "ran.txt").open("a") as out:
            out.write(f"delete_file {path}\n")
        return f"deleted {path}"

    model = ScriptedModel(calls_then_summary(function_call("delete_file", {"path": "tmp/x"}, "c1")))
    return Agent(name="ops", model=model, tools=signoff_tools(gate, [delete_file]))


async def main(directory: Path, mode: str) -> None:
    set_tracing_disabled(True)
    gate = Gate.from_config(directory / "signoff.yaml")
    assert isinstance(gate, Gate)
    ops = agent(gate, directory)
    saved = directory / "state.json"
    with gate.context(thread="restart"):
        if mode == "pause":
            result = await Runner.run(ops, "delete tmp/x")
            saved.write_text(result.to_state().to_string())
            (req,) = await gate.alist(thread="restart")
            print(json.dumps({"request_id": req.id}), flush=True)
        else:
            state = await RunState.from_string(ops, saved.read_text())
            result = await Runner.run(ops, await aresolve(state, gate))
            print(json.dumps({"final": result.final_output}), flush=True)
    await gate.aclose()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
