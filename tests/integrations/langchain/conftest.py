"""Offline agents for the LangChain integration tests: real ``create_agent``, real LangGraph,
a scripted chat model, tools that record what really ran."""

from __future__ import annotations

import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver

from signoff import Gate, Policy
from signoff.integrations.langchain import SignoffMiddleware
from signoff.integrations.langchain.testing import ScriptedChatModel, calls_then_summary, tool_call
from signoff.store import AuditQuery, MemoryStore

POLICY = """
version: 1
store: sqlite:///signoff.db
defaults:
  unknown_tool: allow
  allowed_decisions: [approve, reject]
people:
  erin:  {roles: []}
  alice: {roles: [dba]}
  bob:   {roles: [finance]}
  carol: {roles: [finance]}
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
  transfer:
    default: require_approval
    approvers: {roles: [finance], quorum: 2}
  quick:
    default: require_approval
    approvers: {roles: [dba]}
    timeout: 1
"""


class Ran:
    """What the tools really did, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


@pytest.fixture
def ran() -> Ran:
    return Ran()


@pytest.fixture
def tools(ran: Ran) -> list[BaseTool]:
    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        ran.calls.append(("read_file", {"path": path}))
        return f"contents of {path}"

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.calls.append(("delete_file", {"path": path}))
        return f"deleted {path}"

    @tool
    def ask_user(question: str) -> str:
        """Ask the user a question."""
        ran.calls.append(("ask_user", {"question": question}))
        return "(the tool body never runs when a human responds)"

    @tool
    def transfer(amount: int, to: str) -> str:
        """Transfer money."""
        ran.calls.append(("transfer", {"amount": amount, "to": to}))
        return f"sent {amount} to {to}"

    @tool
    def quick(x: int) -> str:
        """A call with a one-second deadline."""
        ran.calls.append(("quick", {"x": x}))
        return f"quick {x}"

    return [read_file, delete_file, ask_user, transfer, quick]


def scripted(*calls: dict[str, Any]) -> ScriptedChatModel:
    return ScriptedChatModel(script=calls_then_summary(*calls))


def make_agent(
    middleware: SignoffMiddleware,
    tools: list[BaseTool],
    *calls: dict[str, Any],
    checkpointer: Any = "memory",
    extra_middleware: tuple[Any, ...] = (),
) -> Any:
    return create_agent(
        scripted(*calls),
        tools=tools,
        middleware=[*extra_middleware, middleware],
        checkpointer=InMemorySaver() if checkpointer == "memory" else checkpointer,
    )


def thread(**configurable: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": str(uuid.uuid4()), **configurable}}


def go(text: str = "go") -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def tool_messages(messages: list[AnyMessage]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


def final_text(result: Any) -> str:
    last = result.value["messages"][-1]
    assert isinstance(last, AIMessage)
    return str(last.content)


def no_dangling_calls(messages: list[AnyMessage]) -> bool:
    """Every tool call of every AI message has exactly one result."""
    answered = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    asked = [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    return sorted(answered) == sorted(asked)


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "signoff.yaml"
    path.write_text(textwrap.dedent(POLICY), encoding="utf-8")
    return path


@pytest.fixture
def sqlite_gate(policy_file: Path) -> Iterator[Gate]:
    gate = Gate.from_config(policy_file)
    assert isinstance(gate, Gate)
    yield gate
    gate.close()


@pytest.fixture
def memory_gate() -> Iterator[Gate]:
    gate = Gate(Policy.from_yaml(textwrap.dedent(POLICY)), MemoryStore())
    yield gate
    gate.close()


def audit_events(gate: Gate, **filters: Any) -> list[str]:
    async def read() -> list[str]:
        await gate.store.flush_audit()
        return [r.event for r in await gate.store.read_audit(AuditQuery(**filters))]

    return gate._portal.run(read())


__all__ = [
    "Ran",
    "audit_events",
    "final_text",
    "go",
    "make_agent",
    "no_dangling_calls",
    "scripted",
    "thread",
    "tool_call",
    "tool_messages",
]


@pytest.fixture(autouse=True)
def no_blocking_calls(request: pytest.FixtureRequest) -> Iterator[None]:
    """As in LangChain's own tests: a blocking call made from signoff's or LangChain's code
    while an event loop runs in this thread raises ``BlockingError`` (async tests only)."""
    if not request.node.get_closest_marker("asyncio") and not _is_async(request):
        yield
        return
    from blockbuster import blockbuster_ctx

    with blockbuster_ctx(["signoff", "langchain", "langgraph"]) as bb:
        # Module imports read files; they happen once, not per call.
        for name in ("io.BufferedReader.read", "io.TextIOWrapper.read", "os.stat"):
            bb.functions[name].can_block_in("importlib/_bootstrap_external.py", "get_data")
        yield


def _is_async(request: pytest.FixtureRequest) -> bool:
    import inspect

    return inspect.iscoroutinefunction(getattr(request.node, "function", None))
