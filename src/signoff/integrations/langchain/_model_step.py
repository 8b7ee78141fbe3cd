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
from typing import Any

from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    RemoveMessage,
)
from langchain_core.messages import ToolCall as LCToolCall
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.types import interrupt
from pydantic import ValidationError

from signoff.integrations.langchain import _messages as msgs
from signoff.integrations.langchain._decisions import (
    Checked,
    ResumeValue,
    answering,
    explained,
    record_checked,
    unwrap,
)
from signoff.integrations.langchain._effects import Flow, Io, Next
from signoff.integrations.langchain._ids import prefix_of, scoped
from signoff.integrations.langchain._paused import (
    Paused,
    Rechecked,
    changed_calls,
    find_paused,
    recheck,
    stored_request,
)
from signoff.integrations.langchain._review import Reviewed, Where, step_context, where
from signoff.integrations.langchain._settings import Settings
from signoff.integrations.langchain.shapes import hitl_request
from signoff.model import ApprovalRequest, DecisionError, SignoffError, ToolCall, Verdict, new_id

ModelResult = ModelResponse[Any] | ExtendedModelResponse[Any]
_CHECKPOINTER_KEY = "__pregel_checkpointer"


class SetupError(SignoffError):
    """The agent is not set up the way signoff needs (says what to add or change)."""


class ChangedWhilePaused(DecisionError):
    """A held call was changed in the graph state; signoff will not run what nobody saw."""


def model_flow(
    s: Settings, request: ModelRequest[Any], config: RunnableConfig, is_async: bool = False
) -> Flow[Any]:
    paused = find_paused(request.messages)
    if paused is not None:
        return (yield from _continue(s, request, config, paused, is_async))
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
    if not s.gate.writable:  # once per gate, through the async API (no blocking on a loop)
        yield Io(s.gate.ensure_writable())
    s.reviewer.register_tools(request.tools)
    place = where(config, s.principal, s.agent, f"langchain:{ai.id}")
    ctx = step_context(s.gate, place, request.messages, ai)
    calls = _reviewed_calls(request, ai)
    ids = [scoped(ai, c["id"] or "") for c in calls]
    verdicts = [s.reviewer.verdict(c, ctx, request, i, ai) for c, i in zip(calls, ids, strict=True)]
    if any(v.judge_pending for v in verdicts):  # intent judges answer before anything runs
        verdicts = yield Io(s.gate.ajudge_all(_tool_calls(calls, ids), ctx, verdicts))
    if not any(v.needs_approval for v in verdicts):
        for call, call_id, verdict in zip(calls, ids, verdicts, strict=True):
            s.memory.put(place.thread, call_id, Reviewed(call["name"], call["args"], verdict, ctx))
        return _result(response, carried)
    submission = yield Io(s.gate.asubmit_checked(_tool_calls(calls, ids), verdicts, ctx))
    req = submission.request
    assert req is not None  # a verdict needing approval always stores a request
    s.snapshots.keep(req)
    hold_all = s.hold_ungated or _returns_directly(request.tools, calls, verdicts)
    for call, call_id, verdict in zip(calls, ids, verdicts, strict=True):
        waits = verdict.needs_approval or hold_all
        reviewed = Reviewed(call["name"], call["args"], verdict, ctx, req.id if waits else None)
        s.memory.put(place.thread, call_id, reviewed)
    if req.terminal or s.mode == "blocking":
        return _result(response, carried)
    holds: list[BaseMessage] = [
        msgs.hold(c, i, req.id, v)
        for c, i, v in zip(calls, ids, verdicts, strict=True)
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


def _reviewed_calls(request: ModelRequest[Any], ai: AIMessage) -> list[LCToolCall]:
    """The message's tool calls signoff reviews (not structured-output tool calls)."""
    skipped = _structured_output_tools(request)
    return [c for c in ai.tool_calls if c["name"] not in skipped]


def _tool_calls(calls: Sequence[LCToolCall], ids: Sequence[str]) -> list[ToolCall]:
    return [ToolCall(c["name"], c["args"], id=i) for c, i in zip(calls, ids, strict=True)]


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
    s: Settings,
    request: ModelRequest[Any],
    config: RunnableConfig,
    paused: Paused,
    is_async: bool,
) -> Flow[ModelResult]:
    place = where(config, s.principal, s.agent, f"langchain:{paused.ai.id}")
    req = s.snapshots.just_submitted(paused.request_id)
    if req is None:
        req = yield Io(stored_request(s.gate, paused.request_id))
    if paused.superseded:
        if req is not None and req.pending:
            yield Io(
                s.gate.acancel(
                    req.id,
                    actor=place.principal or req.principal.id,
                    reason="superseded by a new user message",
                )
            )
        replaced: list[BaseMessage] = [msgs.superseded(h, paused.request_id) for h in paused.holds]
        return (yield from _model_again(s, request, config, replaced))
    rechecked: dict[str, Verdict] = {}
    if req is None:
        found: Rechecked = yield Io(recheck(s, request, place, paused))
        req, rechecked = found.request, found.verdicts
    if req is not None and req.pending:
        _refuse_changed(req, paused)
        if s.mode == "blocking":
            req = yield Io(s.gate.await_request(req.id), waits=True)
        else:
            req = yield from _pause(s, req, paused, is_async)
        s.snapshots.keep(req)
    updates, runnable = _release(s, req, paused, place, request.messages, rechecked)
    if runnable:
        # Replay the model's own message (same id: replaced in place) so LangChain's
        # router sends the released calls to the tools node; the model is not called.
        return _result(ModelResponse(result=[paused.ai]), updates)
    return (yield from _model_again(s, request, config, updates))


def _refuse_changed(req: ApprovalRequest, paused: Paused) -> None:
    changed = changed_calls(req, paused)
    if changed:
        raise ChangedWhilePaused(
            f"{', '.join(changed)} changed in the graph state (agent.update_state?) after "
            f"signoff held it for request {req.id}. signoff runs only what the approvers "
            "were shown, so the changed call will not run. To run other arguments, resume "
            'with an edit decision ({"type": "edit", "edited_action": {"name": ..., '
            '"args": ...}}), which gets the same checks as every edit; or put the original '
            "call back into the state; or send a new user message, which cancels the request."
        )


def _pause(
    s: Settings, req: ApprovalRequest, paused: Paused, is_async: bool
) -> Flow[ApprovalRequest]:
    """Pause the graph (or, on resume, take the answer LangGraph hands back).

    A sync agent records the decision inside LangGraph's validation of the resume value (a
    refused value is then never saved); an async one must not block its event loop on the
    store there, so it records the checked decision right after, through the store's async
    API (if that fails, the request is still pending and the resume can be repeated).
    """
    approver = s.approver or req.principal.id
    prefix = prefix_of(paused.ai)
    try:
        with answering(s.gate, req, approver, prefix, None if is_async else s.run_io):
            decided: Any = interrupt(hitl_request(req, prefix), response_schema=ResumeValue)
    except ValidationError as exc:
        error = unwrap(exc)
        if error is None:
            raise
        _mark_invalid_resume(error)
        raise error from None
    if isinstance(decided, Checked):
        try:
            decided = yield Io(record_checked(s.gate, req, decided))
        except SignoffError as exc:
            raise explained(exc, req) from None
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
    req: ApprovalRequest | None,
    paused: Paused,
    place: Where,
    messages: Sequence[AnyMessage],
    rechecked: dict[str, Verdict],
) -> tuple[list[BaseMessage], bool]:
    """Per hold: removed (the call runs) or replaced in place by the answer.

    ``rechecked``: verdicts of a rebuilt step; a call the policy now allows or denies is
    not in the rebuilt request (``req`` is None when no call is).
    """
    calls = {c["id"]: c for c in paused.ai.tool_calls}
    ctx = step_context(s.gate, place, messages, paused.ai)
    updates: list[BaseMessage] = []
    runnable = False
    for held in paused.holds:
        info = msgs.hold_info(held) or {}
        call_id = scoped(paused.ai, held.tool_call_id)
        verdict = rechecked.get(held.tool_call_id)
        if verdict is None and info.get("verdict") == "allow":
            policy_hash = req.policy_hash if req is not None else s.gate.policy.hash
            verdict = Verdict.allow(info.get("rule", "allow"), policy_hash=policy_hash)
        if verdict is not None and not verdict.needs_approval:
            call = calls[held.tool_call_id]
            if verdict.denied:
                updates.append(msgs.denied(call, verdict).model_copy(update={"id": held.id}))
                continue
            s.memory.put(place.thread, call_id, Reviewed(call["name"], call["args"], verdict, ctx))
            updates.append(RemoveMessage(id=held.id or ""))
            runnable = True
            continue
        assert req is not None  # a call needing a human is in the (stored or rebuilt) request
        state = req.call(call_id)
        if state.runnable:
            # Tell the tool wrapper where the decision is (it runs moments later), so it need
            # not look the call up in the store; it still claims the ledger before running.
            call = calls[held.tool_call_id]
            asked = Verdict(
                "require_approval", req.action_request(call_id).rule, policy_hash=req.policy_hash
            )
            reviewed = Reviewed(call["name"], call["args"], asked, ctx, req.id)
            s.memory.put(place.thread, call_id, reviewed)
            updates.append(RemoveMessage(id=held.id or ""))
            runnable = True
        else:
            tool = held.name or req.action_request(call_id).name
            answer = msgs.answer(req, state, tool, held.tool_call_id)
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
