"""Decisions that arrive from outside the graph — another approver through the gate, the
CLI in another process, the HTTP API, the deadline — and the two ways to wait for them."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import BaseTool
from langgraph.types import Command

from signoff import DecisionError, Gate, NotAuthorized
from signoff.integrations.langchain import SignoffMiddleware, aresume, pending_request_ids, resume
from signoff.model import ApprovalRequest
from tests.integrations.langchain.conftest import (
    Ran,
    final_text,
    go,
    make_agent,
    no_dangling_calls,
    thread,
    tool_call,
    tool_messages,
)

ROOT = Path(__file__).resolve().parents[3]
TRANSFER = tool_call("transfer", {"amount": 50_000, "to": "ACME"}, "t1")
DELETE = tool_call("delete_file", {"path": "tmp/x"}, "d1")


def pending_request(gate: Gate, timeout: float = 15.0) -> ApprovalRequest:
    """The one pending request (polled: this is a test helper waiting for another thread)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = gate._portal.run(gate.alist(status="pending"))
        if found:
            return found[0]
        time.sleep(0.01)
    raise AssertionError("no request was submitted")


def test_quorum_of_two_is_decided_through_the_gate_then_resumed(
    tools: list[BaseTool], ran: Ran, sqlite_gate: Gate
) -> None:
    middleware = SignoffMiddleware(sqlite_gate, approver="bob")
    agent = make_agent(middleware, tools, TRANSFER)
    cfg = thread(user_id="erin")
    out = agent.invoke(go(), cfg, version="v2")
    assert out.interrupts[0].value["review_configs"][0]["approvers"]["quorum"] == 2
    # bob alone cannot settle a two-person rule through Command(resume=...): refused, unsaved.
    with pytest.raises(DecisionError, match="needs 2 approvals") as refused:
        agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg, version="v2")
    assert "signoff approve" in str(refused.value)
    (request_id,) = pending_request_ids(agent, cfg)
    sqlite_gate.decide(request_id, [{"type": "approve"}], approver="bob")
    sqlite_gate.decide(request_id, [{"type": "approve"}], approver="carol")
    out = agent.invoke(resume(agent, cfg), cfg, version="v2")
    assert ran.calls == [("transfer", {"amount": 50_000, "to": "ACME"})]
    assert final_text(out) == "done: sent 50000 to ACME"


def test_resume_value_from_someone_without_the_role_is_refused(
    tools: list[BaseTool], ran: Ran, sqlite_gate: Gate
) -> None:
    agent = make_agent(SignoffMiddleware(sqlite_gate), tools, DELETE)  # approver: the principal
    cfg = thread(user_id="erin")
    agent.invoke(go(), cfg, version="v2")
    with pytest.raises(NotAuthorized, match="role dba"):
        agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg, version="v2")
    (request_id,) = pending_request_ids(agent, cfg)
    sqlite_gate.decide(request_id, [{"type": "approve"}], approver="alice")
    agent.invoke(resume(agent, cfg), cfg, version="v2")
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]


def test_deadline_expiry_answers_the_model_and_skips_the_tool(
    tools: list[BaseTool], ran: Ran, sqlite_gate: Gate
) -> None:
    agent = make_agent(SignoffMiddleware(sqlite_gate), tools, tool_call("quick", {"x": 1}, "q1"))
    cfg = thread(user_id="erin")
    agent.invoke(go(), cfg, version="v2")
    command = resume(agent, cfg, timeout=10)  # the deadline (1 s) passes while we wait
    assert command.resume["status"] == "expired"
    out = agent.invoke(command, cfg, version="v2")
    message = tool_messages(out.value["messages"])["q1"]
    assert message.status == "error"
    assert message.content.startswith("No human decision arrived in time for the tool call `quick`")
    assert ran.calls == []
    assert no_dangling_calls(out.value["messages"])


def test_decision_from_the_cli_in_another_process(
    tools: list[BaseTool], ran: Ran, sqlite_gate: Gate, policy_file: Path
) -> None:
    agent = make_agent(SignoffMiddleware(sqlite_gate), tools, DELETE)
    cfg = thread(user_id="erin")
    agent.invoke(go(), cfg, version="v2")
    (request_id,) = pending_request_ids(agent, cfg)
    cli = subprocess.run(
        [sys.executable, "-m", "signoff", "approve", request_id, "--as", "alice",
         "--config", str(policy_file)],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    out = agent.invoke(resume(agent, cfg, timeout=30), cfg, version="v2")
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]
    assert final_text(out) == "done: deleted tmp/x"


def test_decision_through_the_http_api_while_paused(
    tools: list[BaseTool], ran: Ran, tmp_path: Path
) -> None:
    pytest.importorskip("signoff.server")
    from signoff import Policy
    from signoff.store import SQLiteStore
    from tests.server.conftest import POLICY, start_server

    server = start_server(SQLiteStore(tmp_path / "shared.db"), POLICY)
    agent_gate = Gate(Policy.from_yaml(POLICY), SQLiteStore(tmp_path / "shared.db"))
    try:
        transfer_funds = tool_call("transfer_funds", {"amount": 50_000, "to": "ACME"}, "f1")
        agent = make_agent(SignoffMiddleware(agent_gate), [_transfer_funds(ran)], transfer_funds)
        cfg = thread(user_id="frank")
        agent.invoke(go(), cfg, version="v2")
        (request_id,) = pending_request_ids(agent, cfg)
        # signoff stores LangChain's tool-call ids scoped per model turn: "<AI message id>:f1"
        (stored_id,) = agent_gate._portal.run(agent_gate.get(request_id)).pending_call_ids
        assert stored_id.endswith(":f1")
        answer = server.client("alice").post(
            f"/v1/requests/{request_id}/decisions",
            json={"decisions": [{"tool_call_id": stored_id, "type": "approve"}]},
        )
        assert answer.status_code == 200, answer.text
        out = agent.invoke(resume(agent, cfg, timeout=30), cfg, version="v2")
        assert ran.calls == [("transfer_funds", {"amount": 50_000, "to": "ACME"})]
        assert tool_messages(out.value["messages"])["f1"].content == "sent 50000 to ACME"
    finally:
        agent_gate.close()
        server.close()


def _transfer_funds(ran: Ran) -> BaseTool:
    from langchain_core.tools import tool

    @tool
    def transfer_funds(amount: int, to: str) -> str:
        """Transfer money."""
        ran.calls.append(("transfer_funds", {"amount": amount, "to": to}))
        return f"sent {amount} to {to}"

    return transfer_funds


def test_blocking_mode_waits_inside_the_step(tools: list[BaseTool], ran: Ran) -> None:
    middleware = SignoffMiddleware({"delete_file": True}, mode="blocking")
    agent = make_agent(
        middleware, tools, tool_call("read_file", {"path": "a"}, "r1"), DELETE, checkpointer=None
    )
    result: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: result.update(out=agent.invoke(go())))
    worker.start()
    req = pending_request(middleware.gate)
    deadline = time.monotonic() + 15
    while not ran.calls and time.monotonic() < deadline:
        time.sleep(0.01)
    # read_file ran while delete_file's request was still waiting: not held hostage
    assert ran.calls == [("read_file", {"path": "a"})]
    assert middleware.gate.wait(req.id, timeout=0).status == "pending"
    middleware.gate.decide(req.id, [{"type": "approve"}], approver="someone", channel="web")
    worker.join(30)
    assert ran.names() == ["read_file", "delete_file"]
    assert result["out"]["messages"][-1].content == "done: contents of a | deleted tmp/x"


async def test_blocking_mode_async(tools: list[BaseTool], ran: Ran) -> None:
    import asyncio

    middleware = SignoffMiddleware({"delete_file": True}, mode="blocking")
    agent = make_agent(middleware, tools, DELETE, checkpointer=None)
    task = asyncio.create_task(agent.ainvoke(go()))
    while not (found := await middleware.gate.alist(status="pending")):
        await asyncio.sleep(0.01)
    edit = {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "tmp/y"}}}
    await middleware.gate.adecide(found[0].id, [edit], approver="someone")
    out = await asyncio.wait_for(task, 30)
    assert ran.calls == [("delete_file", {"path": "tmp/y"})]
    assert "Executed instead: delete_file" in out["messages"][-1].content
    await middleware.aclose()


async def test_ainvoke_and_astream_in_interrupt_mode(tools: list[BaseTool], ran: Ran) -> None:
    middleware = SignoffMiddleware({"delete_file": True})
    agent = make_agent(middleware, tools, DELETE)
    cfg = thread()
    chunks = [c async for c in agent.astream(go(), cfg, stream_mode="updates")]
    assert "__interrupt__" in chunks[-1]
    out = await agent.ainvoke(
        Command(resume={"decisions": [{"type": "approve"}]}), cfg, version="v2"
    )
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]
    assert final_text(out) == "done: deleted tmp/x"
    # aresume builds the command from the store as well
    cfg2 = thread()
    await agent.ainvoke(go(), cfg2, version="v2")
    (request_id,) = pending_request_ids(agent, cfg2)
    await middleware.gate.adecide(request_id, [{"type": "reject"}], approver="x")
    out = await agent.ainvoke(await aresume(agent, cfg2), cfg2, version="v2")
    assert tool_messages(out.value["messages"])["d1"].status == "error"
    assert ran.calls == [("delete_file", {"path": "tmp/x"})]
