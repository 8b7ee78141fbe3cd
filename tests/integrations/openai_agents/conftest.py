"""Offline OpenAI Agents runs for the integration tests: the real SDK (``Agent``, ``Runner``,
``RunState``), a scripted ``Model``, tools that record what really ran."""

from __future__ import annotations

import contextlib
import textwrap
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from agents import Agent, FunctionTool, RunConfig, Runner, function_tool, set_tracing_disabled
from openai.types.responses import ResponseFunctionToolCall

from signoff import Gate
from signoff.integrations.openai_agents import signoff_tools
from signoff.integrations.openai_agents.testing import (
    ScriptedModel,
    calls_then_summary,
    function_call,
)
from signoff.model import ApprovalRequest

POLICY = """
version: 1
store: sqlite:///signoff.db
defaults:
  unknown_tool: allow
people:
  alice: {roles: [dba]}
  bob:   {roles: [finance]}
tools:
  read_file:
    default: allow
  delete_file:
    default: require_approval
    approvers: {roles: [dba]}
    allowed_decisions: [approve, edit, reject]
    editable_args: [path]
    rules:
      - id: never-etc
        when: {args.path: {starts_with: /etc}}
        decision: deny
        reason: system files are off limits
  deploy:
    default: require_approval
    approvers: {roles: [dba]}
    allowed_decisions: [approve, edit, reject]
    editable_args: "*"
"""

#: No network: the SDK would otherwise try to export traces to OpenAI.
NO_TRACING = RunConfig(tracing_disabled=True)


@pytest.fixture(autouse=True, scope="session")
def _tracing_off() -> None:
    set_tracing_disabled(True)


class Ran:
    """What the tools really did, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []


@pytest.fixture
def ran() -> Ran:
    return Ran()


@pytest.fixture
def tools(ran: Ran) -> list[FunctionTool]:
    @function_tool
    def read_file(path: str) -> str:
        """Read a file."""
        ran.calls.append(("read_file", {"path": path}))
        return f"contents of {path}"

    @function_tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.calls.append(("delete_file", {"path": path}))
        return f"deleted {path}"

    return [read_file, delete_file]


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "signoff.yaml"
    path.write_text(textwrap.dedent(POLICY), encoding="utf-8")
    return path


@pytest.fixture
def gate(policy_file: Path) -> Iterator[Gate]:
    gate = Gate.from_config(policy_file)
    assert isinstance(gate, Gate)
    yield gate
    gate.close()


def make_agent(
    gate: Gate, tools: list[FunctionTool], *calls: ResponseFunctionToolCall, **options: Any
) -> Agent[Any]:
    return Agent(
        name="ops",
        model=ScriptedModel(calls_then_summary(*calls)),
        tools=signoff_tools(gate, tools, **options),
    )


def delete(path: str = "tmp/x", call_id: str = "call_del") -> ResponseFunctionToolCall:
    return function_call("delete_file", {"path": path}, call_id)


def read(path: str = "notes.txt", call_id: str = "call_read") -> ResponseFunctionToolCall:
    return function_call("read_file", {"path": path}, call_id)


def new_thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def run(agent: Agent[Any], given: Any) -> Any:
    return await Runner.run(agent, given, run_config=NO_TRACING)


async def pending(gate: Gate, thread: str) -> ApprovalRequest:
    found = await gate.alist(status="pending", thread=thread)
    assert len(found) == 1, found
    return found[0]


class Paused(NamedTuple):
    agent: Agent[Any]
    thread: str
    result: Any  # the run that paused
    request: ApprovalRequest


@contextlib.asynccontextmanager
async def approved_delete(gate: Gate, tools: list[FunctionTool]) -> AsyncIterator[Paused]:
    """A run paused on ``delete_file`` whose request alice approved in signoff; the block
    runs inside the run's thread context."""
    agent = make_agent(gate, tools, delete())
    thread = new_thread()
    with gate.context(thread=thread):
        result = await run(agent, "delete tmp/x")
        req = await pending(gate, thread)
        await gate.adecide(req.id, [{"type": "approve"}], approver="alice")
        yield Paused(agent, thread, result, req)


__all__ = [
    "NO_TRACING",
    "Paused",
    "Ran",
    "approved_delete",
    "delete",
    "make_agent",
    "new_thread",
    "pending",
    "read",
    "run",
]


@pytest.fixture(autouse=True)
def no_blocking_calls(request: pytest.FixtureRequest) -> Iterator[None]:
    """A blocking call made from signoff's code while the event loop runs in this thread
    raises ``BlockingError`` (async tests only)."""
    import inspect

    if not inspect.iscoroutinefunction(getattr(request.node, "function", None)):
        yield
        return
    from blockbuster import blockbuster_ctx

    with blockbuster_ctx(["signoff"]) as bb:
        # Module imports read files; they happen once, not per call.
        for name in ("io.BufferedReader.read", "io.TextIOWrapper.read", "os.stat"):
            bb.functions[name].can_block_in("importlib/_bootstrap_external.py", "get_data")
        yield
