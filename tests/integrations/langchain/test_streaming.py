"""Stream chunks have LangChain's shapes: the same agent, streamed with LangChain's
``HumanInTheLoopMiddleware`` and with ``SignoffMiddleware``, side by side.

Which nodes report and what the messages say may differ (signoff runs ungated calls before
the human decides, and adds no ``after_model`` node); the structure of each chunk may not.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, Interrupt

from signoff.integrations.langchain import SignoffMiddleware
from tests.integrations.langchain.conftest import go, scripted, thread, tool_call

READ = tool_call("read_file", {"path": "a"}, "r1")
DELETE = tool_call("delete_file", {"path": "tmp/x"}, "d1")
APPROVE = Command(resume={"decisions": [{"type": "approve"}]})


def _middlewares() -> Iterator[tuple[str, Any]]:
    yield "langchain", HumanInTheLoopMiddleware({"delete_file": True})
    yield "signoff", SignoffMiddleware({"delete_file": True})


def _run(middleware: Any, tools: list[BaseTool], **stream: Any) -> tuple[list[Any], list[Any]]:
    """Chunks of the run that pauses, then of the resume."""
    agent = create_agent(
        scripted(READ, DELETE), tools=tools, middleware=[middleware], checkpointer=InMemorySaver()
    )
    cfg = thread()
    paused = list(agent.stream(go(), cfg, **stream))
    resumed = list(agent.stream(APPROVE, cfg, **stream))
    return paused, resumed


def _updates_shape(chunk: Any) -> None:
    """LangChain's streaming docs: ``for step, data in chunk.items(): data["messages"][-1]``."""
    assert isinstance(chunk, dict) and len(chunk) == 1
    for step, data in chunk.items():
        if step == "__interrupt__":
            assert isinstance(data, tuple) and all(isinstance(i, Interrupt) for i in data)
            (value,) = (i.value for i in data)
            assert {"action_requests", "review_configs"} <= set(value)  # signoff adds keys
        elif data is not None:  # LangChain's after_model node may report no update
            assert isinstance(data, dict), f"{step}: {data!r}"
            assert isinstance(data["messages"], list)
            assert isinstance(data["messages"][-1], BaseMessage)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_updates_chunks(tools: list[BaseTool], version: str) -> None:
    for name, middleware in _middlewares():
        paused, resumed = _run(middleware, tools, stream_mode="updates", version=version)
        for part in [*paused, *resumed]:
            if version == "v2":
                assert set(part) == {"type", "ns", "data"} and part["type"] == "updates", name
                part = part["data"]
            _updates_shape(part)
        model_updates = [
            (p["data"] if version == "v2" else p).get("model") for p in [*paused, *resumed]
        ]
        ai = [u["messages"] for u in model_updates if u is not None]
        last = ai[-1][-1]
        assert isinstance(last, AIMessage) and "deleted tmp/x" in str(last.content), name


def test_values_chunks(tools: list[BaseTool]) -> None:
    keys: dict[str, set[str]] = {}
    for name, middleware in _middlewares():
        paused, resumed = _run(middleware, tools, stream_mode="values")
        for chunk in [*paused, *resumed]:
            assert isinstance(chunk, dict), name
            assert isinstance(chunk["messages"], list), name
            assert all(isinstance(m, BaseMessage) for m in chunk["messages"]), name
            keys.setdefault(name, set()).update(chunk)
        assert "__interrupt__" in paused[-1], name
        assert isinstance(paused[-1]["__interrupt__"], tuple), name
        assert "deleted tmp/x" in resumed[-1]["messages"][-1].content, name
    # LangChain's middleware adds its private ``hitl_edited_tool_calls`` channel
    assert keys["signoff"] == keys["langchain"] - {"hitl_edited_tool_calls"}


def test_messages_chunks(tools: list[BaseTool]) -> None:
    for name, middleware in _middlewares():
        paused, resumed = _run(middleware, tools, stream_mode="messages")
        assert paused and resumed, name
        for chunk in [*paused, *resumed]:
            assert isinstance(chunk, tuple) and len(chunk) == 2, name
            message, metadata = chunk
            assert isinstance(message, BaseMessage), name
            assert isinstance(metadata, dict), name
            assert metadata["langgraph_node"] in {"model", "tools"}, name
        last, _ = resumed[-1]
        assert isinstance(last, AIMessage) and "deleted tmp/x" in str(last.content), name
