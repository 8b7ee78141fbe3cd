"""The approve cycle's short cuts keep every outcome (issue #13, performance).

* A sync agent on a started in-memory gate runs the store calls on its own thread (no hop
  to the gate's loop thread); a call that waits for a decision still takes the loop.
* With a durable store, an executed call's ``finish`` commits while the agent goes on, and
  is settled before the next model step returns: when ``invoke`` returns, the ledger says
  ``executed`` — also for a ``return_direct`` tool, which ends the run.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from signoff.integrations.langchain import SignoffMiddleware
from signoff.integrations.langchain._settings import runs_inline
from signoff.integrations.langchain.testing import ScriptedChatModel, calls_then_summary
from signoff.model import ApprovalRequest
from signoff.store import SQLiteStore
from tests.integrations.langchain.conftest import (
    Ran,
    audit_events,
    final_text,
    go,
    make_agent,
    thread,
    tool_call,
)

DELETE = tool_call("delete_file", {"path": "tmp/x"}, "d1")
APPROVE = Command(resume={"decisions": [{"type": "approve"}]})


def approve_cycle(agent: Any) -> tuple[Any, str]:
    cfg = thread()
    paused = agent.invoke(go(), cfg, version="v2")
    request_id = paused.interrupts[0].value["request_id"]
    return agent.invoke(APPROVE, cfg, version="v2"), request_id


def stored(middleware: SignoffMiddleware, request_id: str) -> ApprovalRequest:
    gate = middleware.gate
    return gate._portal.run(gate.get(request_id))


def test_memory_gate_store_calls_run_on_the_agents_threads(tools: list[BaseTool], ran: Ran) -> None:
    middleware = SignoffMiddleware({"delete_file": True})
    agent = make_agent(middleware, tools, DELETE)
    approve_cycle(agent)  # the first cycle starts the gate (on its loop thread)
    assert runs_inline(middleware.gate)
    committed_on: list[str] = []
    remove = middleware.gate.store.add_listener(
        lambda _req, _event: committed_on.append(threading.current_thread().name)
    )
    try:
        out, _ = approve_cycle(agent)
    finally:
        remove()
        middleware.close()
    assert final_text(out) == "done: deleted tmp/x"
    # created, decided, claimed, finished: each committed by the agent, none by the loop
    assert len(committed_on) == 4
    assert "signoff-gate" not in committed_on
    assert ran.calls == [("delete_file", {"path": "tmp/x"})] * 2


def test_durable_store_ledger_says_executed_when_invoke_returns(
    tools: list[BaseTool], ran: Ran, tmp_path: Path
) -> None:
    middleware = SignoffMiddleware({"delete_file": True}, store=SQLiteStore(tmp_path / "s.db"))
    assert not runs_inline(middleware.gate)
    try:
        out, request_id = approve_cycle(make_agent(middleware, tools, DELETE))
        req = stored(middleware, request_id)
        assert final_text(out) == "done: deleted tmp/x"
        assert req.status == "resolved" and req.calls[0].execution == "executed"
        events = audit_events(middleware.gate, request_id=request_id)
        assert events[-2:] == ["executing", "executed"]
        assert middleware._settings.unsettled == []
    finally:
        middleware.close()
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]


def test_return_direct_tool_is_finished_before_the_run_ends(tmp_path: Path) -> None:
    ran: list[str] = []

    @tool(return_direct=True)
    def wipe(path: str) -> str:
        """Wipe a disk (ends the run with its result)."""
        ran.append(path)
        return f"wiped {path}"

    middleware = SignoffMiddleware({"wipe": True}, store=SQLiteStore(tmp_path / "s.db"))
    model = ScriptedChatModel(
        script=calls_then_summary(tool_call("wipe", {"path": "/dev/x"}, "w1"))
    )
    agent = create_agent(model, tools=[wipe], middleware=[middleware], checkpointer=InMemorySaver())
    try:
        out, request_id = approve_cycle(agent)
        req = stored(middleware, request_id)
    finally:
        middleware.close()
    assert ran == ["/dev/x"]
    assert out.value["messages"][-1].content == "wiped /dev/x"
    assert req.calls[0].execution == "executed"


def test_sync_invoke_on_a_thread_with_a_running_loop_takes_the_loop_thread(
    tools: list[BaseTool], ran: Ran
) -> None:
    """A sync ``invoke`` from code that has an event loop running (a notebook cell)."""
    middleware = SignoffMiddleware({"delete_file": True})
    agent = make_agent(middleware, tools, DELETE)
    approve_cycle(agent)  # starts the gate: from now on its store calls may run inline

    async def from_a_coroutine() -> tuple[Any, str]:
        return approve_cycle(agent)

    try:
        out, request_id = asyncio.run(from_a_coroutine())
        assert final_text(out) == "done: deleted tmp/x"
        assert stored(middleware, request_id).calls[0].execution == "executed"
    finally:
        middleware.close()
    assert len(ran.calls) == 2
