"""Reviewing one model step: each tool call the model produced gets a verdict, once.

``when`` predicates and description callables from ``interrupt_on`` run here, when the
model's message is fresh, and never again: calls that need a human are stored in the
signoff request (with their description), and the other verdicts are remembered in
memory for the tool wrapper that runs moments later (:class:`ReviewedCalls`). After a
restart the store is the record; a call found nowhere is checked again (fail closed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.messages import ToolCall as LCToolCall
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import ToolCallRequest, ToolRuntime

from signoff.checks import schema_for
from signoff.gate import Gate
from signoff.model import AuditEvent, CallContext, ToolCall, Verdict
from signoff.policy.review import DEFAULT_DESCRIPTION

log = logging.getLogger("signoff.integrations.langchain")

PrincipalSetting = str | Callable[[RunnableConfig], str | None] | None
_TEXT_LIMIT = 2000
_MEMORY_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class Where:
    """Where a step runs: LangGraph's thread id, signoff's thread, who, which agent."""

    graph_thread: str | None
    thread: str
    principal: str | None
    agent: str | None


def where(
    config: RunnableConfig, principal: PrincipalSetting, agent: str | None, fallback_thread: str
) -> Where:
    """Map LangGraph's ``thread_id`` to signoff's thread and find the principal.

    The principal is the ``principal`` setting (a string, or a function of the config),
    else ``configurable["user_id"]``, else whoever an enclosing ``gate.context()`` names.
    """
    configurable = config.get("configurable") or {}
    graph_thread = configurable.get("thread_id")
    who = principal(config) if callable(principal) else principal
    if who is None and configurable.get("user_id") is not None:
        who = str(configurable["user_id"])
    metadata = config.get("metadata") or {}
    return Where(
        graph_thread=str(graph_thread) if graph_thread is not None else None,
        thread=str(graph_thread) if graph_thread is not None else fallback_thread,
        principal=who,
        agent=agent or metadata.get("lc_agent_name"),
    )


@dataclass(frozen=True, slots=True)
class Reviewed:
    """The verdict on one tool call, and where to find its request if it needs review."""

    name: str
    args: Mapping[str, Any]
    verdict: Verdict
    ctx: CallContext
    request_id: str | None = None

    def matches(self, call: LCToolCall) -> bool:
        return self.name == call["name"] and dict(self.args) == call["args"]


class ReviewedCalls:
    """Verdicts handed from the model node to the tool wrapper, keyed by (thread, call id).

    Bounded: the tool wrapper runs right after the model step, so old entries are only
    useful for retries; past the limit the oldest tenth is dropped.
    """

    def __init__(self, limit: int = _MEMORY_LIMIT) -> None:
        self._entries: dict[tuple[str, str], Reviewed] = {}
        self._limit = limit

    def put(self, thread: str, call_id: str, reviewed: Reviewed) -> None:
        if len(self._entries) >= self._limit:
            for key in list(self._entries)[: self._limit // 10 or 1]:
                self._entries.pop(key, None)
        self._entries[(thread, call_id)] = reviewed

    def get(self, thread: str, call_id: str) -> Reviewed | None:
        return self._entries.get((thread, call_id))


def step_context(
    gate: Gate, place: Where, messages: Sequence[AnyMessage], ai: AIMessage
) -> CallContext:
    """The call context of a step: who, thread, agent, what the user asked, and why."""
    return gate.make_context(
        place.principal,
        thread=place.thread,
        agent=place.agent,
        user_request=_last_human_text(messages),
        reasoning=_text(ai.content) or None,
    )


def _last_human_text(messages: Sequence[AnyMessage]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return _text(message.content) or None
    return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content[:_TEXT_LIMIT]
    parts = [b if isinstance(b, str) else str(b.get("text", "")) for b in content or []]
    return " ".join(p for p in parts if p)[:_TEXT_LIMIT]


class StepReviewer:
    """Verdicts for a model step's tool calls: schema → policy → ``when`` → description."""

    def __init__(
        self, gate: Gate, extras: Mapping[str, Mapping[str, Any]], description_prefix: str
    ) -> None:
        self.gate = gate
        self.extras = extras
        self.description_prefix = description_prefix
        self._known_tools: set[str] = set()

    def register_tools(self, tools: Sequence[BaseTool | dict[str, Any]]) -> None:
        """Teach the gate each tool's argument schema, so edits are checked against it and
        approvers see it (``review_configs[i].args_schema``)."""
        for tool in tools:
            if not isinstance(tool, BaseTool) or tool.name in self._known_tools:
                continue
            self._known_tools.add(tool.name)
            info = self.gate.tools.get(tool.name)
            if info is not None and info.schema is not None:
                continue
            try:
                self.gate.tool(tool.name, schema=schema_for(tool.tool_call_schema))
            except Exception as exc:  # a schema we cannot use only costs us the check
                log.debug("no schema check for tool %s: %s", tool.name, exc)

    def verdict(
        self,
        call: LCToolCall,
        ctx: CallContext,
        request: ModelRequest[Any],
        call_id: str | None = None,
        ai: AIMessage | None = None,
    ) -> Verdict:
        """``call_id``: the id signoff stores (scoped per turn), default the call's own;
        ``ai``: the model's message holding the call — ``when`` and description callables
        see a state ending with it, as with LangChain's ``after_model``."""
        tool_call = ToolCall(call["name"], call["args"], id=call_id or call["id"] or "")
        verdict = self.gate.check(tool_call, ctx)
        if not verdict.needs_approval:
            return verdict
        extra = self.extras.get(call["name"], {})
        when = extra.get("when")
        state = _state_with(request, ai)
        if when is not None and not self._asks(when, call, request, state):
            allowed = Verdict.allow(f"{verdict.rule}.when", policy_hash=verdict.policy_hash)
            self._audit_allowed(tool_call, ctx, allowed)
            return allowed
        description = self._describe(call, verdict, extra, request, ctx, state)
        return replace(verdict, description=description)

    def _asks(
        self, when: Any, call: LCToolCall, request: ModelRequest[Any], state: dict[str, Any]
    ) -> bool:
        """``when(ToolCallRequest)``; if it raises, a human is asked (fail closed)."""
        try:
            return bool(when(_tool_call_request(call, request, state)))
        except Exception:
            log.exception("`when` for %s raised; asking a human", call["name"])
            return True

    def _describe(
        self,
        call: LCToolCall,
        verdict: Verdict,
        extra: Mapping[str, Any],
        request: ModelRequest[Any],
        ctx: CallContext,
        state: dict[str, Any],
    ) -> str:
        factory = extra.get("description")
        if callable(factory):
            try:
                return str(factory(call, state, request.runtime))
            except Exception:
                log.exception("description callable for %s raised", call["name"])
        if verdict.description and not _policy_default(verdict, call["name"], ctx):
            return verdict.description
        return f"{self.description_prefix}\n\nTool: {call['name']}\nArgs: {call['args']}"

    def _audit_allowed(self, call: ToolCall, ctx: CallContext, verdict: Verdict) -> None:
        self.gate.store.audit_nowait(
            AuditEvent(
                event="allowed",
                thread=ctx.thread,
                tool=call.name,
                tool_call_id=call.id,
                principal=ctx.principal.id,
                agent=ctx.agent,
                rule=verdict.rule,
                policy_hash=verdict.policy_hash,
                data={"reason": "the interrupt_on `when` predicate returned False"},
            )
        )


def _policy_default(verdict: Verdict, tool: str, ctx: CallContext) -> bool:
    """An ``interrupt_on`` entry without a description: LangChain's default text applies."""
    return verdict.rule.startswith("interrupt_on.") and verdict.description == (
        DEFAULT_DESCRIPTION.format(tool=tool, principal=ctx.principal)
    )


def _state_with(request: ModelRequest[Any], ai: AIMessage | None) -> dict[str, Any]:
    """The agent state as LangChain's ``after_model`` sees it: ending with the model's message."""
    state = dict(request.state)
    if ai is not None:
        messages = list(request.messages)
        if not messages or messages[-1] is not ai:
            messages.append(ai)
        state["messages"] = messages
    return state


def _tool_call_request(
    call: LCToolCall, request: ModelRequest[Any], state: dict[str, Any]
) -> ToolCallRequest:
    """What LangChain hands a ``when`` predicate (here with the real tool, when known)."""
    from langgraph.config import get_config

    try:
        config = get_config()
    except RuntimeError:
        config = {}
    tools = [t for t in request.tools if isinstance(t, BaseTool)]
    runtime = request.runtime
    return ToolCallRequest(
        tool_call=call,
        tool=next((t for t in tools if t.name == call["name"]), None),
        state=state,
        runtime=ToolRuntime(
            state=dict(state),
            context=runtime.context,
            config=config,
            stream_writer=runtime.stream_writer,
            tool_call_id=call["id"],
            store=runtime.store,
            tools=tools,
            execution_info=runtime.execution_info,
            server_info=runtime.server_info,
        ),
    )
