"""A LangChain agent whose dangerous tool needs a human's sign-off — runs offline.

    python examples/langchain_agent.py                      # scripted model, no network
    python examples/langchain_agent.py --model openai:gpt-4.1   # a real model (needs its
                                                            # provider package and API key)

Three scenes: (1) the drop-in — ``SignoffMiddleware(interrupt_on)`` answered with
``Command(resume=...)`` exactly as with LangChain's middleware; (2) a policy with roles,
decided by an approver through signoff while the graph is paused, then resumed with
``resume(agent, config)``; (3) blocking mode, where the step itself waits.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import threading
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from signoff import Gate
from signoff.integrations.langchain import SignoffMiddleware, pending_request_ids, resume
from signoff.integrations.langchain.testing import (
    ScriptedChatModel,
    calls_then_summary,
    tool_call,
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


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def model(real: str | None) -> BaseChatModel:
    """The scripted model reads one file and deletes another; a real one decides itself."""
    if real:
        from langchain.chat_models import init_chat_model

        return init_chat_model(real)
    return ScriptedChatModel(
        script=calls_then_summary(
            tool_call("read_file", {"path": "notes.txt"}, "call_read"),
            tool_call("delete_file", {"path": "old/report.pdf"}, "call_delete"),
        )
    )


def ask(agent: Any, config: dict[str, Any]) -> Any:
    text = "Read notes.txt, then delete old/report.pdf."
    return agent.invoke({"messages": [HumanMessage(text)]}, config, version="v2")


def show(out: Any) -> None:
    print("   agent:", " / ".join(str(out.value["messages"][-1].content).splitlines()))


def drop_in(real: str | None) -> None:
    print("1. Drop-in for HumanInTheLoopMiddleware")
    middleware = SignoffMiddleware({"delete_file": True, "read_file": False})
    agent = create_agent(
        model(real), [read_file, delete_file], middleware=[middleware], checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "scene-1"}}
    out = ask(agent, config)
    (pause,) = out.interrupts
    for action in pause.value["action_requests"]:
        where = f"request {pause.value['request_id']}"
        print(f"   paused: {action['name']}({action['args']}) — {where}")
    edited = {"name": "delete_file", "args": {"path": "old/report-copy.pdf"}}
    out = agent.invoke(
        Command(resume={"decisions": [{"type": "edit", "edited_action": edited}]}),
        config,
        version="v2",
    )
    show(out)


def with_policy(real: str | None, directory: Path) -> None:
    print("2. A policy with roles; alice decides through signoff; the app resumes")
    (directory / "signoff.yaml").write_text(POLICY, encoding="utf-8")
    with Gate.from_config(directory / "signoff.yaml") as gate:  # type: ignore[union-attr]
        agent = create_agent(
            model(real),
            [read_file, delete_file],
            middleware=[SignoffMiddleware(gate)],
            checkpointer=InMemorySaver(),
        )
        config = {"configurable": {"thread_id": "scene-2", "user_id": "erin"}}
        ask(agent, config)
        (request_id,) = pending_request_ids(agent, config)
        # In real life: `signoff approve <id> --as alice`, the web inbox, Slack, ...
        gate.decide(request_id, [{"type": "approve"}], approver="alice", channel="cli")
        show(agent.invoke(resume(agent, config), config, version="v2"))


def blocking(real: str | None) -> None:
    print("3. Blocking mode: the step waits; no checkpointer needed for the wait")
    middleware = SignoffMiddleware({"delete_file": True}, mode="blocking")
    agent = create_agent(model(real), [read_file, delete_file], middleware=[middleware])

    async def approver() -> None:  # a human, somewhere else, a moment later
        gate = middleware.gate
        while not (waiting := await gate.alist(status="pending")):
            await asyncio.sleep(0.05)
        reject = {"type": "reject", "message": "keep it"}
        await gate.adecide(waiting[0].id, [reject], approver="ops", channel="web")

    threading.Thread(target=asyncio.run, args=(approver(),), daemon=True).start()
    out = agent.invoke({"messages": [HumanMessage("Read notes.txt, then delete old/report.pdf.")]})
    print("   agent:", out["messages"][-1].content)
    middleware.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a real chat model, e.g. openai:gpt-4.1")
    real = parser.parse_args().model
    drop_in(real)
    with tempfile.TemporaryDirectory() as tmp:
        with_policy(real, Path(tmp))
    blocking(real)


if __name__ == "__main__":
    main()
