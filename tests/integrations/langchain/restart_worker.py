"""One life of an agent process, for the restart test.

``python -m tests.integrations.langchain.restart_worker DIR pause`` runs the agent until it
pauses for approval, prints ``{"request_id": ...}`` and then waits to be killed.
``... DIR resume DECISION`` starts over from the files in DIR (a SqliteSaver checkpoint and
signoff's SQLite store) and resumes the thread with ``Command(resume=...)``. A last argument
``memory`` uses the documented one-line swap instead — ``SignoffMiddleware(interrupt_on)``,
whose store lives in memory and dies with the process.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from signoff import Gate
from signoff.integrations.langchain import SignoffMiddleware
from signoff.integrations.langchain.testing import ScriptedChatModel, calls_then_summary, tool_call

CONFIG = {"configurable": {"thread_id": "restart-thread", "user_id": "erin"}}


def build(directory: Path, store: str) -> tuple[object, SignoffMiddleware]:
    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        with (directory / "ran.txt").open("a", encoding="utf-8") as ran:
            ran.write(f"delete_file {path}\n")
        return f"deleted {path}"

    if store == "memory":
        middleware = SignoffMiddleware({"delete_file": True})
    else:
        gate = Gate.from_config(directory / "signoff.yaml")
        assert isinstance(gate, Gate)
        middleware = SignoffMiddleware(gate, approver="alice")
    saver = SqliteSaver(sqlite3.connect(directory / "checkpoints.db", check_same_thread=False))
    model = ScriptedChatModel(
        script=calls_then_summary(tool_call("delete_file", {"path": "tmp/x"}, "c1"))
    )
    agent = create_agent(model, tools=[delete_file], middleware=[middleware], checkpointer=saver)
    return agent, middleware


def main(directory: Path, phase: str, decision: str = "approve", store: str = "sqlite") -> None:
    agent, middleware = build(directory, store)
    if phase == "pause":
        out = agent.invoke({"messages": [HumanMessage("clean up")]}, CONFIG, version="v2")  # type: ignore[attr-defined]
        print(json.dumps({"request_id": out.interrupts[0].value["request_id"]}), flush=True)
        time.sleep(600)  # killed here by the test
        return
    out = agent.invoke(  # type: ignore[attr-defined]
        Command(resume={"decisions": [{"type": decision}]}), CONFIG, version="v2"
    )
    middleware.gate.close()
    print(json.dumps({"final": out.value["messages"][-1].content}), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), *sys.argv[2:])
