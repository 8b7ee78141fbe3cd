"""A scripted ``Model`` for offline OpenAI Agents runs: tests, examples, benchmarks.

Its reply is a pure function of the input items, so one instance serves any number of runs
(and a run restored from a serialized ``RunState`` in another process). It never touches the
network. Swap in a real model (``Agent(model="gpt-4.1")``) and nothing else changes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from agents import Model, ModelResponse, Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputItem,
    ResponseOutputMessage,
    ResponseOutputText,
)

Script = Callable[[list[Any]], list[ResponseOutputItem]]


class ScriptedModel(Model):
    """A model whose answer to ``input`` is ``script(input items)``."""

    def __init__(self, script: Script) -> None:
        self.script = script

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        return ModelResponse(output=self.script(items), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("ScriptedModel answers Runner.run, not Runner.run_streamed")


def function_call(name: str, args: dict[str, Any], call_id: str) -> ResponseFunctionToolCall:
    """One tool call, as the model would produce it."""
    return ResponseFunctionToolCall(
        id=f"fc_{call_id}",
        call_id=call_id,
        type="function_call",
        name=name,
        arguments=json.dumps(args),
        status="completed",
    )


def text(content: str) -> ResponseOutputMessage:
    """A final answer."""
    return ResponseOutputMessage(
        id="msg_scripted",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=content, annotations=[])],
    )


def calls_then_summary(*calls: ResponseFunctionToolCall) -> Script:
    """Call ``calls`` on the user's message; after the tool results, summarize them:
    ``"done: <output 1> | <output 2>"``."""

    def script(items: Sequence[Any]) -> list[ResponseOutputItem]:
        outputs = [
            _field(i, "output") for i in items if _field(i, "type") == "function_call_output"
        ]
        if outputs:
            return [text("done: " + " | ".join(str(o) for o in outputs))]
        return list(calls)

    return script


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)
