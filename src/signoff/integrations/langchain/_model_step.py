"""The model node's half: review each model step, and pause / resume around held calls.

It all happens in ``wrap_model_call``, so signoff adds no graph node (each node is a
LangGraph super-step, which would cost every step — reviewed or not — about a fifth).

* A fresh model message: every tool call gets a verdict; calls needing a human go into one
  signoff request. In interrupt mode each of them gets a *hold* (a placeholder result), so
  LangChain's router sends only the other calls to the tools node — ungated calls run at
  once instead of waiting for the human. With nothing left to run, the router loops back
  to the model node.
* Holds in the conversation: the model is not called. Either the request is decided
  (through ``Command(resume=…)`` validated in :mod:`._decisions`, or elsewhere — CLI, web,
  a channel, the deadline) and the holds are replaced by answers or removed so approved
  calls run, or LangGraph's ``interrupt()`` pauses the graph with the ``HITLRequest``.
* A user message after the holds: the request is cancelled and each hold becomes a
  "cancelled" result in place — no dangling tool call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.types import interrupt
from pydantic import ValidationError

from signoff.gate import Gate
from signoff.integrations.langchain import _messages as msgs
from signoff.integrations.langchain._decisions import ResumeValue, answering, unwrap
from signoff.integrations.langchain._effects import Flow, Io, Next
from signoff.integrations.langchain._review import Reviewed, Where, step_context, where
from signoff.integrations.langchain._settings import Settings
from signoff.integrations.langchain.shapes import hitl_request
from signoff.model import ApprovalRequest, SignoffError, ToolCall, Verdict, new_id, utcnow

ModelResult = ModelResponse[Any] | ExtendedModelResponse[Any]
_CHECKPOINTER_KEY = "__pregel_checkpointer"


class SetupError(SignoffError):
    """The agent is not set up the way signoff needs (says what to add or change)."""


@dataclass(frozen=True, slots=True)
class Paused:
    """Calls of the last model message held for a human decision."""

    ai: AIMessage
    holds: list[ToolMessage]
    request_id: str
    superseded: bool  # the user wrote a new message instead of deciding


def model_flow(s: Settings, request: ModelRequest[Any], config: RunnableConfig) -> Flow[Any]:
    paused = find_paused(request.messages)
    if paused is not None:
        return (yield from _continue(s, request, config, paused))
    if s.mode == "interrupt":
        require_checkpointer(config)
    response = yield Next(request)
    return (yield from _review_step(s, request, config, response, []))


def require_checkpointer(config: RunnableConfig) -> None:
    if (config.get("configurable") or {}).get(_CHECKPOINTER_KEY) is None:
        raise SetupError(
            "SignoffMiddleware in interrupt mode pauses the graph, which needs a checkpointer: "
            "create_agent(..., checkpointer=InMemorySaver()) — or SqliteSaver / PostgresSaver "
            "to survive restarts — and invoke with config={'configurable': {'thread_id': ...}}. "
            "Without a checkpointer use SignoffMiddleware(..., mode='blocking')."
        )


def find_paused(messages: Sequence[AnyMessage]) -> Paused | None:
    found = msgs.last_ai(messages)
    if found is None:
        return None
    index, ai = found
    after = messages[index + 1 :]
    holds = [m for m in after if isinstance(m, ToolMessage) and msgs.hold_info(m) is not None]
    if not holds:
        return None
    info = msgs.hold_info(holds[0]) or {}
    return Paused(
        ai=ai,
        holds=holds,
        request_id=info.get("request_id", ""),
        superseded=any(isinstance(m, HumanMessage) for m in after),
    )


# ---------------------------------------------------------------------- a fresh step
def _review_step(
    s: Settings,
    request: ModelRequest[Any],
    config: RunnableConfig,
    response: ModelResponse[Any],
    carried: list[BaseMessage],
) -> Flow[ModelResult]:
    ai = _tool_calling_message(response)
    if ai is None:
        return _result(response, carried)
    s.reviewer.register_tools(request.tools)
    place = where(config, s.principal, s.agent, f"langchain:{ai.id}")
    ctx = step_context(s.gate, place, request.messages, ai)
    skipped = _structured_output_tools(request)
    calls = [c for c in ai.tool_calls if c["name"] not in skipped]
    verdicts = [s.reviewer.verdict(c, ctx, request) for c in calls]
    if not any(v.needs_approval for v in verdicts):
        for call, verdict in zip(calls, verdicts, strict=True):
            s.memory.put(
                place.thread, call["id"] or "", Reviewed(call["name"], call["args"], verdict, ctx)
            )
        return _result(response, carried)
    tool_calls = [ToolCall(c["name"], c["args"], id=c["id"] or "") for c in calls]
    submission = yield Io(s.gate.asubmit_checked(tool_calls, verdicts, ctx))
    req = submission.request
    assert req is not None  # a verdict needing approval always stores a request
    s.snapshots.keep(req)
    hold_all = s.hold_ungated or _returns_directly(request.tools, calls, verdicts)
    for call, verdict in zip(calls, verdicts, strict=True):
        waits = verdict.needs_approval or hold_all
        reviewed = Reviewed(call["name"], call["args"], verdict, ctx, req.id if waits else None)
        s.memory.put(place.thread, call["id"] or "", reviewed)
    if req.terminal or s.mode == "blocking":
        return _result(response, carried)
    holds: list[BaseMessage] = [
        msgs.hold(c, req.id, v)
        for c, v in zip(calls, verdicts, strict=True)
        if v.needs_approval or (hold_all and v.allowed)
    ]
    return _result(response, carried, holds)


def _tool_calling_message(response: ModelResponse[Any]) -> AIMessage | None:
    for message in reversed(response.result):
        if isinstance(message, AIMessage) and message.tool_calls:
            if message.id is None:
                message.id = new_id("lc")  # the thread key of a run without thread_id
            for call in message.tool_calls:
                if not call.get("id"):
                    call["id"] = new_id("call")
            return message
    return None


def _structured_output_tools(request: ModelRequest[Any]) -> set[str]:
    specs = getattr(request.response_format, "schema_specs", None) or []
    return {spec.name for spec in specs}


def _returns_directly(
    tools: Sequence[BaseTool | dict[str, Any]], calls: Sequence[Any], verdicts: Sequence[Verdict]
) -> bool:
    """A ``return_direct`` tool ends the run after it: running it first would leave the
    held calls behind, so then everything waits for the decision."""
    direct = {t.name for t in tools if isinstance(t, BaseTool) and t.return_direct}
    return any(v.allowed and c["name"] in direct for c, v in zip(calls, verdicts, strict=True))


def _result(
    response: ModelResponse[Any],
    carried: Sequence[BaseMessage],
    holds: Sequence[BaseMessage] = (),
) -> ModelResult:
    """The model's messages and signoff's as **one** response, so one write of the node.

    Not an ``ExtendedModelResponse``: its command becomes a second write of the model node,
    and ``stream_mode="updates"`` then shows the node's update as a list of dicts instead of
    LangChain's single ``{"messages": [...]}``. ``carried`` only replaces or removes messages
    already in the state (by id), so it goes first and the model's message stays last unless
    new ``holds`` follow it (they must: they answer its tool calls).
    """
    if not carried and not holds:
        return response
    return ModelResponse(
        result=[*carried, *response.result, *holds],
        structured_response=response.structured_response,
    )


# ---------------------------------------------------------------------- held calls
def _continue(
    s: Settings, request: ModelRequest[Any], config: RunnableConfig, paused: Paused
) -> Flow[ModelResult]:
    req = s.snapshots.just_submitted(paused.request_id)
    if req is None:
        req = yield Io(fresh_request(s.gate, paused.request_id))
    place = where(config, s.principal, s.agent, f"langchain:{paused.ai.id}")
    if paused.superseded:
        if req.pending:
            req = yield Io(
                s.gate.acancel(
                    req.id,
                    actor=place.principal or req.principal.id,
                    reason="superseded by a new user message",
                )
            )
        replaced: list[BaseMessage] = [msgs.superseded(h, req.id) for h in paused.holds]
        return (yield from _model_again(s, request, config, replaced))
    if req.pending and s.mode == "blocking":
        req = yield Io(s.gate.await_request(req.id))
    elif req.pending:
        req = _pause(s, req)
    if req.terminal:
        s.snapshots.keep(req)
    updates, runnable = _release(s, req, paused, place, request.messages)
    if runnable:
        # Replay the model's own message (same id: replaced in place) so LangChain's
        # router sends the released calls to the tools node; the model is not called.
        return _result(ModelResponse(result=[paused.ai]), updates)
    return (yield from _model_again(s, request, config, updates))


def _pause(s: Settings, req: ApprovalRequest) -> ApprovalRequest:
    """Pause the graph (or, on resume, take the answer LangGraph hands back)."""
    approver = s.approver or req.principal.id
    try:
        with answering(s.gate, req, approver, s.run_io):
            decided: Any = interrupt(hitl_request(req), response_schema=ResumeValue)
    except ValidationError as exc:
        error = unwrap(exc)
        if error is None:
            raise
        _mark_invalid_resume(error)
        raise error from None
    assert isinstance(decided, ApprovalRequest)  # what ResumeValue's validator returns
    return decided


def _mark_invalid_resume(error: BaseException) -> None:
    """Keep LangGraph treating the refusal as an invalid resume value (nothing saved)."""
    try:
        from langgraph.errors import _mark_invalid_resume as mark
    except ImportError:  # older LangGraph: the error still stops the run, unsaved
        return
    mark(error)


def _release(
    s: Settings,
    req: ApprovalRequest,
    paused: Paused,
    place: Where,
    messages: Sequence[AnyMessage],
) -> tuple[list[BaseMessage], bool]:
    """Per hold: removed (the call runs) or replaced in place by the answer."""
    calls = {c["id"]: c for c in paused.ai.tool_calls}
    ctx = step_context(s.gate, place, messages, paused.ai)
    updates: list[BaseMessage] = []
    runnable = False
    for held in paused.holds:
        info = msgs.hold_info(held) or {}
        call_id = held.tool_call_id
        if info.get("verdict") == "allow":
            call = calls[call_id]
            verdict = Verdict.allow(info.get("rule", "allow"), policy_hash=req.policy_hash)
            s.memory.put(place.thread, call_id, Reviewed(call["name"], call["args"], verdict, ctx))
            updates.append(RemoveMessage(id=held.id or ""))
            runnable = True
            continue
        state = req.call(call_id)
        if state.runnable:
            updates.append(RemoveMessage(id=held.id or ""))
            runnable = True
        else:
            answer = msgs.answer(req, state, held.name or req.action_request(call_id).name)
            updates.append(answer.model_copy(update={"id": held.id}))
    return updates, runnable


def _model_again(
    s: Settings, request: ModelRequest[Any], config: RunnableConfig, updates: list[BaseMessage]
) -> Flow[ModelResult]:
    """Every held call is answered: call the model now, on the answered conversation."""
    patched = _apply(request.messages, updates)
    again = request.override(messages=patched)
    if s.mode == "interrupt":
        require_checkpointer(config)
    response = yield Next(again)
    return (yield from _review_step(s, again, config, response, updates))


def _apply(messages: Sequence[AnyMessage], updates: Sequence[BaseMessage]) -> list[AnyMessage]:
    replaced = {m.id: m for m in updates if not isinstance(m, RemoveMessage)}
    removed = {m.id for m in updates if isinstance(m, RemoveMessage)}
    out: list[AnyMessage] = []
    for message in messages:
        if message.id in removed:
            continue
        out.append(replaced.get(message.id, message))  # type: ignore[arg-type]
    return out


async def fresh_request(gate: Gate, request_id: str) -> ApprovalRequest:
    """The stored request, with its deadline applied if it passed while nobody looked."""
    req = await gate.get(request_id)
    if req.pending and utcnow() >= req.due_at:
        await gate.sweep()
        req = await gate.get(request_id)
    return req
