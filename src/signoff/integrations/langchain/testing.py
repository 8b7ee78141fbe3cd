"""A scripted chat model for offline agents: tests, examples, benchmarks.

LangChain's fake chat models cannot be passed to ``create_agent`` (their ``bind_tools``
raises ``NotImplementedError``). ``ScriptedChatModel`` can: its reply is a pure function of
the conversation, so one instance serves any number of threads, and it never touches the
network. Swap in a real model (``init_chat_model("openai:gpt-4.1")``) and nothing else
changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable

Script = Callable[[Sequence[BaseMessage]], AIMessage]


class ScriptedChatModel(BaseChatModel):
    """A chat model whose answer is ``script(messages)``."""

    script: Script

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.script(messages))])

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(
        self, tools: Any, *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[Any, Any]:
        return self


def tool_call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    """One tool call, as a model would produce it."""
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def calls_then_summary(*calls: dict[str, Any]) -> Script:
    """Call ``calls`` (in parallel) on the user's message; after tool results, summarize
    them: ``"done: <result 1> | <result 2>"``."""

    def script(messages: Sequence[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            results = _results_since_last_ai(messages)
            return AIMessage(content="done: " + " | ".join(results))
        return AIMessage(content="", tool_calls=[dict(c) for c in calls])

    return script


def _results_since_last_ai(messages: Sequence[BaseMessage]) -> list[str]:
    results: list[str] = []
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            break
        if isinstance(message, ToolMessage):
            results.append(str(message.content))
    return list(reversed(results))
