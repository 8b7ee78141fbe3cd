"""One side of the restart test, in its own process: ``pause`` runs until the run ends with
``DeferredToolRequests`` and saves the message history and the requests as JSON; ``resume``
(a new process) loads them, builds the results from signoff's store and runs on. The tool
appends what ran to ``ran.txt``."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai import Agent, DeferredToolRequests, FunctionToolset
from pydantic_ai.messages import ModelMessagesTypeAdapter

from signoff import Gate
from signoff.integrations.pydantic_ai import SignoffToolset, aresults
from signoff.integrations.pydantic_ai.testing import calls_then_summary, tool_call

REQUESTS = TypeAdapter(DeferredToolRequests)


def agent(gate: Gate, directory: Path) -> Agent[None, Any]:
    tools: FunctionToolset[None] = FunctionToolset()

    @tools.tool_plain
    def delete_file(path: str) -> str:
        """Delete a file."""
        with (directory / "ran.txt").open("a") as out:
            out.write(f"delete_file {path}\n")
        return f"deleted {path}"

    model = calls_then_summary(tool_call("delete_file", {"path": "tmp/x"}, "c1"))
    return Agent(
        model, toolsets=[SignoffToolset(tools, gate)], output_type=[str, DeferredToolRequests]
    )


async def main(directory: Path, mode: str) -> None:
    gate = Gate.from_config(directory / "signoff.yaml")
    assert isinstance(gate, Gate)
    ops = agent(gate, directory)
    history, requests = directory / "history.json", directory / "requests.json"
    if mode == "pause":
        run = await ops.run("delete tmp/x")
        history.write_bytes(ModelMessagesTypeAdapter.dump_json(run.all_messages()))
        requests.write_bytes(REQUESTS.dump_json(run.output))
        (req,) = await gate.alist()
        print(json.dumps({"request_id": req.id}), flush=True)
    else:
        messages = ModelMessagesTypeAdapter.validate_json(history.read_bytes())
        answers = await aresults(REQUESTS.validate_json(requests.read_bytes()), gate)
        run = await ops.run(message_history=messages, deferred_tool_results=answers)
        print(json.dumps({"final": run.output}), flush=True)
    await gate.aclose()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
