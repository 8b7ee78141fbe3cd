"""``SignoffMiddleware`` is a ``HumanInTheLoopMiddleware`` (isinstance, the same public
attributes with LangChain's meaning) and still adds no node to the graph."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from signoff import Gate
from signoff.integrations.langchain import SignoffMiddleware
from tests.integrations.langchain.conftest import (
    Ran,
    go,
    make_agent,
    scripted,
    thread,
    tool_call,
    tool_messages,
)

ALL = ["approve", "edit", "reject", "respond"]


def _nodes(middleware: list[Any], tools: list[BaseTool]) -> set[str]:
    agent = create_agent(
        scripted(), tools=tools, middleware=middleware, checkpointer=InMemorySaver()
    )
    return set(agent.nodes)


def test_is_a_human_in_the_loop_middleware() -> None:
    m = SignoffMiddleware({"delete_file": True})
    assert isinstance(m, HumanInTheLoopMiddleware)
    assert isinstance(m, AgentMiddleware)
    assert m.name == "SignoffMiddleware"


def test_attributes_have_langchains_meaning() -> None:
    def when(request: Any) -> bool:
        return True

    narrowed = {"allowed_decisions": ["approve", "reject"], "description": "Check", "when": when}
    interrupt_on: dict[str, Any] = {"delete_file": True, "read_file": False, "send": narrowed}
    ours = SignoffMiddleware(interrupt_on, description_prefix="Look", edit_notice=None)
    theirs = HumanInTheLoopMiddleware(interrupt_on, description_prefix="Look", edit_notice=None)
    assert ours.interrupt_on == theirs.interrupt_on
    assert ours.interrupt_on == {"delete_file": {"allowed_decisions": ALL}, "send": narrowed}
    assert ours.description_prefix == theirs.description_prefix == "Look"
    assert ours.edit_notice is theirs.edit_notice is None
    assert ours.interrupt_mode == theirs.interrupt_mode == "batched"

    defaults = SignoffMiddleware({"delete_file": True})
    assert defaults.description_prefix == HumanInTheLoopMiddleware({}).description_prefix
    assert defaults.edit_notice == HumanInTheLoopMiddleware({}).edit_notice


def test_interrupt_on_is_resolved_from_a_policy_file(policy_file: Path) -> None:
    m = SignoffMiddleware(policy_file)
    try:
        # read_file: allow only (left out); delete_file: its own decisions (the deny rule
        # adds none); transfer and quick: the policy's default decisions.
        assert m.interrupt_on == {
            "delete_file": {"allowed_decisions": ["approve", "edit", "reject"]},
            "transfer": {"allowed_decisions": ["approve", "reject"]},
            "quick": {"allowed_decisions": ["approve", "reject"]},
        }
        assert m.interrupt_mode == "batched"
    finally:
        m.close()


def test_interrupt_on_from_a_gate(memory_gate: Gate) -> None:
    m = SignoffMiddleware(memory_gate)
    assert set(m.interrupt_on) == {"delete_file", "transfer", "quick"}


def test_no_after_model_hook_is_inherited() -> None:
    assert SignoffMiddleware.after_model is AgentMiddleware.after_model
    assert SignoffMiddleware.aafter_model is AgentMiddleware.aafter_model
    assert SignoffMiddleware.state_schema is vars(AgentMiddleware)["state_schema"]


def test_adds_no_graph_node(tools: list[BaseTool], memory_gate: Gate) -> None:
    bare = _nodes([], tools)
    assert _nodes([SignoffMiddleware({"delete_file": True})], tools) == bare
    assert _nodes([SignoffMiddleware(memory_gate)], tools) == bare
    # LangChain's own middleware does add one (the check would catch a regression).
    with_langchain = _nodes([HumanInTheLoopMiddleware({"delete_file": True})], tools)
    assert with_langchain - bare == {"HumanInTheLoopMiddleware.after_model"}


@pytest.mark.parametrize("interrupt_mode", ["per_call", "bogus"])
def test_interrupt_mode_other_than_batched_is_refused(interrupt_mode: Any) -> None:
    with pytest.raises(ValueError, match="interrupt_mode"):
        SignoffMiddleware({"delete_file": True}, interrupt_mode=interrupt_mode)


def test_still_pauses_and_resumes_as_a_subclass(tools: list[BaseTool], ran: Ran) -> None:
    middleware = SignoffMiddleware({"delete_file": True})
    agent = make_agent(middleware, tools, tool_call("delete_file", {"path": "x"}, "c1"))
    config = thread()
    paused = agent.invoke(go(), config, version="v2")
    assert paused.interrupts and ran.names() == []
    done = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config, version="v2")
    assert ran.names() == ["delete_file"]
    assert tool_messages(done.value["messages"])["c1"].content == "deleted x"
