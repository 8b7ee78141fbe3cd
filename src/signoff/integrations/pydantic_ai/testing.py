"""A scripted model for offline Pydantic AI runs: tests, examples, benchmarks.

Pydantic AI's own ``FunctionModel`` with a script. Its reply is a pure function of the message
history, so one instance serves any number of runs (and a run continued from a saved history).
It never touches the network.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel


def tool_call(name: str, args: dict[str, Any], call_id: str) -> ToolCallPart:
    """One tool call, as the model would produce it."""
    return ToolCallPart(name, args, tool_call_id=call_id)


def calls_then_summary(*calls: ToolCallPart) -> FunctionModel:
    """A model that calls ``calls`` on the user's message; after the tool results, it
    summarizes them: ``"done: <result 1> | <result 2>"``."""

    def script(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        parts = last.parts if isinstance(last, ModelRequest) else []
        outputs = [p.content for p in parts if isinstance(p, ToolReturnPart | RetryPromptPart)]
        if outputs:
            return ModelResponse(parts=[TextPart("done: " + " | ".join(map(str, outputs)))])
        return ModelResponse(parts=list(calls))

    return FunctionModel(script)
