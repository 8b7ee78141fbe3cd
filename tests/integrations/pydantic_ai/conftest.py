"""Offline Pydantic AI runs for the integration tests: the real ``Agent``, a ``FunctionModel``
script (and ``TestModel``), tools that record what really ran."""

from __future__ import annotations

import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, DeferredToolRequests, FunctionToolset
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.models import Model

from signoff import Gate
from signoff.integrations.pydantic_ai import SignoffToolset
from signoff.integrations.pydantic_ai.testing import calls_then_summary, tool_call
from signoff.model import ApprovalRequest

POLICY = """
version: 1
store: sqlite:///signoff.db
defaults:
  unknown_tool: allow
people:
  alice: {roles: [dba]}
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


class Ran:
    """What the tools really did, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []


@pytest.fixture
def ran() -> Ran:
    return Ran()


@pytest.fixture
def tools(ran: Ran) -> FunctionToolset[Any]:
    toolset: FunctionToolset[Any] = FunctionToolset()

    @toolset.tool_plain
    def read_file(path: str) -> str:
        """Read a file."""
        ran.calls.append(("read_file", {"path": path}))
        return f"contents of {path}"

    @toolset.tool_plain
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.calls.append(("delete_file", {"path": path}))
        return f"deleted {path}"

    return toolset


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
    gate: Gate,
    tools: FunctionToolset[Any],
    *calls: ToolCallPart,
    model: Model | None = None,
    output_type: Any = (str, DeferredToolRequests),
    **options: Any,
) -> Agent[None, Any]:
    return Agent(
        model if model is not None else calls_then_summary(*calls),
        toolsets=[SignoffToolset(tools, gate, **options)],
        output_type=list(output_type) if isinstance(output_type, tuple) else output_type,
    )


def delete(path: str = "tmp/x", call_id: str = "call_del") -> ToolCallPart:
    return tool_call("delete_file", {"path": path}, call_id)


def read(path: str = "notes.txt", call_id: str = "call_read") -> ToolCallPart:
    return tool_call("read_file", {"path": path}, call_id)


def new_thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def pending(gate: Gate, thread: str | None = None) -> ApprovalRequest:
    found = await gate.alist(status="pending", thread=thread)
    assert len(found) == 1, found
    return found[0]


__all__ = ["Ran", "delete", "make_agent", "new_thread", "pending", "read"]


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
